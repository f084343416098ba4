"""Binaries for site staff through the site's registry: the built flavors'
Spack buildcache pushed to an OCI mirror on the registry that serves the
images (`spack buildcache push` to oci://<registry>/<path>), and installed
from it into another, empty prefix (`spack install --cache-only`), as a
second machine of the site would.

Unsigned: Spack 1.1 does not sign OCI buildcaches ("Code signing is
currently not supported for OCI images", spack/cmd/buildcache.py), and it
unpacked a tarball with one byte changed in the registry's storage without a
word (measured: tests/images/test_binaries.py). What is verified instead,
before anything installs: the registry is reached over TLS with the site's
CA and an account, and every blob of every tag of the buildcache is read
back and checked against the sha256 digest it is addressed by (verify).

The mirror lives in a configuration scope of its own (`spack -C <folder>`),
written per command: the registry's address and account come from the
caller (variables of the site or a test's registry), never from the
repository's files.
"""

import base64
import hashlib
import json
import signal
import ssl
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import yaml

from onestack import commands, paths
from onestack.spack import SpackError, command, scope

MIRROR = "onestack-registry"
# Spack reads the account from these variables (mirrors.yaml access_pair),
# the names `make push-images` takes the site's registry account from.
USER_VARIABLE = "ONESTACK_REGISTRY_USER"
PASSWORD_VARIABLE = "ONESTACK_REGISTRY_PASSWORD"
TIMEOUT_S = 3600


@dataclass(frozen=True)
class Installed:
    root: Path
    seconds: float


def write_scope(folder: Path, url: str, install_root: Path = None) -> Path:
    """A Spack configuration scope with the registry as its only binary
    mirror; with install_root, an install tree there and the stack's recipes
    (a relocated binary may run its package's hooks)."""
    access = {"id_variable": USER_VARIABLE, "secret_variable": PASSWORD_VARIABLE}
    sections = {"mirrors:": {MIRROR: {"url": url, "signed": False, "source": False, "access_pair": access}}}
    if install_root is not None:
        sections["config"] = {"install_tree": {"root": str(install_root), "padded_length": 0}}
        sections["repos:"] = scope.recipe_repos(paths.REPO / "packages", paths.spack_packages())
    return scope.write(folder, sections)


def _run(argv: List[str], env: Dict[str, str], cwd: Path) -> None:
    code, out, err = commands.run_whole(argv, TIMEOUT_S, env=env, cwd=cwd)
    if code != 0:
        limit = f" (killed past its {TIMEOUT_S} s)" if code == -signal.SIGKILL else ""
        raise SpackError(f"`{' '.join(argv[1:])}` failed (exit {code}){limit}:\n{(out + err)[-3000:]}")


def push(hashes: List[str], scope: Path, env: Dict[str, str]) -> None:
    """The installed specs and their link/run dependencies into the registry,
    with the index a `spack install` there reads."""
    _run(
        [
            *command("-C", str(scope)),
            "buildcache",
            "push",
            "--unsigned",
            "--update-index",
            MIRROR,
            *[f"/{h}" for h in hashes],
        ],
        env,
        paths.REPO,
    )


MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"


def _get(url: str, env: Dict[str, str], accept: str = ""):
    """An authenticated GET on the registry (its CA from SSL_CERT_FILE, as Spack's)."""
    request = urllib.request.Request(url)
    account = f"{env[USER_VARIABLE]}:{env[PASSWORD_VARIABLE]}".encode()
    request.add_header("Authorization", "Basic " + base64.b64encode(account).decode())
    if accept:
        request.add_header("Accept", accept)
    context = ssl.create_default_context(cafile=env.get("SSL_CERT_FILE"))
    return urllib.request.urlopen(request, context=context, timeout=60)


def verify(url: str, env: Dict[str, str]) -> int:
    """Every blob (spec file and tarball) of every tag of the buildcache at
    oci://host/path, read back and checked against its digest; returns how
    many. Raises SpackError naming the tag and blob that does not match."""
    host, _, repository = url.removeprefix("oci://").partition("/")
    api = f"https://{host}/v2/{repository}"
    with _get(f"{api}/tags/list", env) as answer:
        tags = json.load(answer).get("tags") or []
    checked = 0
    for tag in tags:
        with _get(f"{api}/manifests/{tag}", env, MANIFEST_TYPES) as answer:
            manifest = json.load(answer)
        for blob in [manifest["config"], *manifest["layers"]]:
            algorithm, _, expected = blob["digest"].partition(":")
            digest = hashlib.new(algorithm)
            with _get(f"{api}/blobs/{blob['digest']}", env) as answer:
                for chunk in iter(lambda: answer.read(1 << 20), b""):
                    digest.update(chunk)
            if digest.hexdigest() != expected:
                raise SpackError(
                    f"{url}: tag {tag}: blob {blob['digest']} reads back as {algorithm}:"
                    f"{digest.hexdigest()}: the registry's copy is altered; nothing was installed"
                )
            checked += 1
    return checked


def install(spec_hash: str, scope: Path, env: Dict[str, str]) -> Installed:
    """One spec and its dependencies, binaries only, into the scope's install
    tree, once the registry's buildcache verifies: outside the site
    environment (`spack` without -e, run from the scope's folder), as on a
    machine that has only the registry."""
    spack = str(paths.spack_root() / "bin" / "spack")
    start = time.monotonic()
    mirror = yaml.safe_load((scope / "mirrors.yaml").read_text())["mirrors:"][MIRROR]
    verify(mirror["url"], env)
    _run([spack, "-C", str(scope), "install", "--cache-only", "--no-check-signature", f"/{spec_hash}"], env, scope)
    root = Path(yaml.safe_load((scope / "config.yaml").read_text())["config"]["install_tree"]["root"])
    return Installed(root, time.monotonic() - start)
