"""A real OCI registry on loopback for the image tests: Debian's
`docker-registry` (the CNCF distribution registry), with TLS from a CA made
here by the openssl CLI and basic auth from a bcrypt htpasswd file
(`htpasswd` of apache2-utils).

    with registry.running(folder) as reg:
        apptainer.push(runner, image, reg.oras_uri("onestack/tiny", "v1"), fingerprint)

Clients trust the CA through `reg.trust_env()`, without --insecure and
without touching the system's trust store (nothing else on the machine sees
the CA):
- SSL_CERT_DIR names a folder holding only this CA (plus OpenSSL's hash
  link). Go's TLS stack (Apptainer) reads it *besides* its bundle file, and
  so does OpenSSL's default verify path (Python's ssl.create_default_context).
- SSL_CERT_FILE names a bundle: the system's bundle plus this CA. Spack
  reads only that (config:ssl_certs defaults to $SSL_CERT_FILE, and a file
  there replaces every other source), and some environments set it already
  to the system bundle, which would hide SSL_CERT_DIR from Spack.
"""

import contextlib
import http.client
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator

from onestack import files
from onestack import render as rendering
from onestack.images import ImageError

HERE = Path(__file__).resolve().parent

REGISTRY_COMMAND = "docker-registry"  # Debian package docker-registry
HTPASSWD_COMMAND = "htpasswd"  # Debian package apache2-utils
STARTUP_SECONDS = 30
STOP_SECONDS = 10
CERT_DAYS = 7  # test certificates: made per run, so a short life suffices


@dataclass(frozen=True)
class Registry:
    folder: Path
    port: int
    username: str
    password: str
    ca_dir: Path  # holds only ca.pem: the value of SSL_CERT_DIR for clients

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ca_certificate(self) -> Path:
        return self.ca_dir / "ca.pem"

    @property
    def ca_bundle(self) -> Path:
        return self.folder / "ca-bundle.pem"

    def oras_uri(self, repository: str, tag: str) -> str:
        return f"oras://{self.host}/{repository}:{tag}"

    def trust_env(self) -> Dict[str, str]:
        return {"SSL_CERT_DIR": str(self.ca_dir), "SSL_CERT_FILE": str(self.ca_bundle)}


def _require(command: str, package: str) -> str:
    found = shutil.which(command)
    if not found:
        raise ImageError(
            f"`{command}` not found: install the Debian package {package} (setup/apt-packages.txt, `make setup`)"
        )
    return found


def _run(argv, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, text=True, capture_output=True, timeout=60, **kwargs)
    if proc.returncode != 0:
        raise ImageError(
            f"`{' '.join(map(str, argv))}` failed with exit code {proc.returncode}:\n{proc.stderr.strip()[-2000:]}"
        )
    return proc


def make_certificates(folder: Path) -> Path:
    """A CA (folder/ca/ca.pem) and a server certificate for 127.0.0.1 and
    localhost signed by it (folder/server.pem, server.key); returns the CA's
    folder. Go ignores the CN: the names must be subjectAltNames."""
    openssl = _require("openssl", "openssl")
    ca_dir = folder / "ca"
    ca_dir.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc"]
    _run(
        [
            openssl,
            "req",
            "-x509",
            *ec,
            "-days",
            str(CERT_DAYS),
            "-subj",
            "/CN=onestack test registry CA",
            "-keyout",
            folder / "ca.key",
            "-out",
            ca_dir / "ca.pem",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]
    )
    _run(
        [
            openssl,
            "req",
            *ec,
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            folder / "server.key",
            "-out",
            folder / "server.csr",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext",
            "extendedKeyUsage=serverAuth",
        ]
    )
    _run(
        [
            openssl,
            "x509",
            "-req",
            "-in",
            folder / "server.csr",
            "-CA",
            ca_dir / "ca.pem",
            "-CAkey",
            folder / "ca.key",
            "-CAserial",
            folder / "ca.srl",
            "-CAcreateserial",
            "-days",
            str(CERT_DAYS),
            "-copy_extensions",
            "copyall",
            "-out",
            folder / "server.pem",
        ]
    )
    # OpenSSL finds a CA in a directory only by its subject-hash name.
    _run([openssl, "rehash", ca_dir])
    return ca_dir


def write_bundle(bundle: Path, ca_certificate: Path) -> None:
    """The system's CA bundle (what SSL_CERT_FILE or OpenSSL's default names)
    followed by our CA."""
    defaults = ssl.get_default_verify_paths()
    system = Path(defaults.cafile or defaults.openssl_cafile)
    text = system.read_text() if system.is_file() else ""
    files.write_text(bundle, text + ca_certificate.read_text())


def write_htpasswd(path: Path, username: str, password: str) -> None:
    """bcrypt (-B), the only hash the distribution registry accepts; the
    password goes through stdin (-i), never on a command line."""
    htpasswd = _require(HTPASSWD_COMMAND, "apache2-utils")
    line = _run([htpasswd, "-B", "-i", "-n", username], input=password + "\n").stdout.strip()
    files.write_text(path, line + "\n", mode=0o600)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(registry: Registry) -> bool:
    """True once the registry serves /v2/ over TLS (401: auth is on)."""
    context = ssl.create_default_context(cafile=str(registry.ca_certificate))
    conn = http.client.HTTPSConnection("127.0.0.1", registry.port, context=context, timeout=2)
    try:
        conn.request("GET", "/v2/")
        return conn.getresponse().status == 401
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_SECONDS)


@contextlib.contextmanager
def running(folder: Path, username: str = "onestack", password: str = "") -> Iterator[Registry]:
    """A registry serving folder/storage on a free loopback port until the
    block ends; it is stopped (and waited for) however the block ends."""
    command = _require(REGISTRY_COMMAND, "docker-registry")
    folder.mkdir(parents=True, exist_ok=True)
    registry = Registry(
        folder=folder,
        port=free_port(),
        username=username,
        password=password or secrets.token_urlsafe(16),
        ca_dir=make_certificates(folder),
    )
    write_bundle(registry.ca_bundle, registry.ca_certificate)
    write_htpasswd(folder / "htpasswd", registry.username, registry.password)
    config = folder / "config.yml"
    files.write_text(
        config,
        rendering.text(
            HERE,
            "registry-config.yml.j2",
            storage=str(folder / "storage"),
            address=registry.host,
            secret=secrets.token_hex(16),
            certificate=str(folder / "server.pem"),
            key=str(folder / "server.key"),
            htpasswd=str(folder / "htpasswd"),
        ),
    )
    log = folder / "registry.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [command, "serve", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        _wait_until_serving(registry, process, log)
        yield registry
    finally:
        _stop(process)


def _wait_until_serving(registry: Registry, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ImageError(
                f"{REGISTRY_COMMAND} exited with code {process.returncode} on start "
                f"(config {registry.folder / 'config.yml'}):\n{log.read_text()[-2000:]}"
            )
        if _answers(registry):
            return
        time.sleep(0.2)
    raise ImageError(
        f"{REGISTRY_COMMAND} did not answer on https://{registry.host}/v2/ within "
        f"{STARTUP_SECONDS} s; its log {log}:\n{log.read_text()[-2000:]}"
    )
