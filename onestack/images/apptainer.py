"""A thin wrapper around a real Apptainer: build, sign, verify, push, pull,
test, run, exec, inspect. Each failure is an ApptainerError naming the
command, its exit code, the tail of its stderr and the fix.

Which Apptainer: APPTAINER (a site's own executable), else the one
setup/apptainer.sh installs under $ONESTACK_CACHE/apptainer/<version>.

Builds run with --fakeroot, also as root: root on these VMs lacks
CAP_SYS_RESOURCE, and Apptainer runs a definition's %post and %test with its
built-in configuration (`--build-config`, which ignores apptainer.conf's
"root default capabilities = file") asking for every capability, so a plain
root build fails ("Requesting capability set ..."). In the user namespace of
--fakeroot the capability bounding set is full again. It needs a subordinate
id range for the building user (setup/apptainer.sh adds root's).

A SIF is mounted with squashfuse when the user runs it unprivileged; where
/dev/fuse is not open to that user (mode 0600 here: no udev), run, exec and
test add --unsquash: Apptainer then extracts the image into a temporary
sandbox (seconds for a flavor's image: docs/results.md) instead of failing to
mount it.

Files appear complete or not at all: build and pull write a temporary name
in the destination folder and rename it only once the image is complete
(and, for a pull, its signature verified).
"""

import json
import os
import pwd
import re
import signal
import stat
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from onestack import commands, files, paths
from onestack.images import ImageError

PINS = paths.REPO / "setup" / "apptainer-pins.sh"
BUILD_SECONDS = 1800
# Every SIF's squashfs at gzip's fastest level: mksquashfs's default, level 9,
# spent most of an image build's CPU for a few percent of size (measured in
# docs/results.md, Build and test times). gzip, not zstd or xz: every
# Apptainer and Singularity a desktop user may have, and every kernel, can
# mount it.
SQUASHFS_OPTIONS = ("--mksquashfs-args", "-comp gzip -Xcompression-level 1")
TRANSFER_SECONDS = 900
RUN_SECONDS = 600

# What a failure's stderr says -> what to do about it (first match wins).
FIXES = [
    (
        r"Requesting capability set .* while permitted capability set",
        "root lacks a capability here: set 'root default capabilities = file' in the "
        "installation's etc/apptainer/apptainer.conf (setup/apptainer.sh does), or run with --userns",
    ),
    (
        r"signature not found|no signatures found|no groups found|image is not signed",
        "the image is unsigned: images are pushed signed (onestack/images/keys.py); do not use this one",
    ),
    # Before the integrity rule: Apptainer 1.4 says "integrity: signature
    # object N not valid: openpgp: signature made by unknown entity" of an
    # image whose signer's key the keyring lacks.
    (
        r"key not found|public key .* not found|unknown issuer|entity not found|unknown entity",
        "the signer's public key is not in your keyring: import the site's public key "
        "(`apptainer key import site-signing.asc`); if you have, another key signed it: do not use it",
    ),
    (
        r"integrity:|hash mismatch|signature verification failed|object integrity|digest mismatch",
        "the image changed after it was signed: do not use it; pull it again from the registry",
    ),
    (
        r"unauthorized|authentication required|\b401\b",
        "the registry refused the credentials: log in with the right username/password "
        "(`apptainer registry login --username U --password-stdin oras://HOST`)",
    ),
    (
        r"MANIFEST_UNKNOWN|manifest unknown|NAME_UNKNOWN|name unknown",
        "no such image or tag in the registry: check the repository and tag (was it pushed?)",
    ),
    (
        r"certificate signed by unknown authority|x509:",
        "the registry's TLS certificate is not trusted: add its CA to the system store, or name a "
        "folder holding it in SSL_CERT_DIR",
    ),
    (
        r"connection refused|no such host|i/o timeout|dial tcp",
        "the registry is not reachable: check its address and that it is running",
    ),
    (
        r"no space left on device|file too large",
        "the destination ran out of space: free some, or pull into another folder",
    ),
]


class ApptainerError(ImageError):
    def __init__(self, argv: Sequence[str], returncode: int, stderr: str, fix: str = ""):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.fix = fix or _fix_for(stderr)
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        super().__init__(f"`{' '.join(self.argv)}` failed with exit code {returncode}:\n{tail}\nfix: {self.fix}")


def _fix_for(stderr: str) -> str:
    for pattern, fix in FIXES:
        if re.search(pattern, stderr, re.IGNORECASE):
            return fix
    return "see the error above"


def pinned_version() -> str:
    return paths.pinned(PINS.name, "APPTAINER_VERSION")


def installed_executable() -> Path:
    """APPTAINER if set, else the installation of setup/apptainer.sh."""
    named = os.environ.get("APPTAINER")
    if named:
        exe = Path(named)
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            raise ImageError(
                f"APPTAINER={named} is not an executable file: point it at a site's "
                "apptainer, or unset it to use the one setup/apptainer.sh installs"
            )
        return exe
    exe = paths.cache() / "apptainer" / pinned_version() / "bin" / "apptainer"
    if not exe.is_file():
        raise ImageError(
            f"Apptainer {pinned_version()} is not installed ({exe} missing): "
            "run `bash setup/apptainer.sh`, or set APPTAINER to a site's own"
        )
    return exe


@dataclass(frozen=True)
class Apptainer:
    """One apptainer executable with the environment its commands run in
    (keyring, credentials, CA trust) and, for tests of a desktop user, the
    user that runs it."""

    executable: Path
    env: Mapping[str, str] = field(default_factory=dict)
    user: Optional[str] = None

    def with_env(self, **env: str) -> "Apptainer":
        return replace(self, env={**self.env, **env})

    def command(self, args: Sequence[str]) -> List[str]:
        argv = [str(self.executable), *map(str, args)]
        if self.user is None:
            return argv
        # The other user starts from a clean environment, as after a login:
        # PATH, their HOME, and the variables of this Apptainer.
        account = pwd.getpwnam(self.user)
        clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": account.pw_dir, **self.env}
        return ["runuser", "-u", self.user, "--", "env", "-i", *(f"{k}={v}" for k, v in clean.items()), *argv]

    def run(
        self,
        args: Sequence[str],
        *,
        input: Optional[str] = None,
        timeout: int = RUN_SECONDS,
        cwd: Optional[Path] = None,
        fix: str = "",
    ) -> subprocess.CompletedProcess:
        argv = self.command(args)
        # Errors show the apptainer command (and whose), not runuser's env list.
        shown = [str(self.executable), *map(str, args)]
        if self.user is not None:
            shown = [f"(as {self.user})", *shown]
        if cwd is None and self.user is not None:
            cwd = Path("/")  # ours may be a folder the other user cannot enter
        # Killed whole past its time: as another user, runuser's child and
        # what it started (apptainer's starter, the container's processes).
        code, out, err = commands.run_whole(
            argv,
            timeout,
            input=input,
            cwd=cwd,
            env={**os.environ, **self.env},
            **({} if input is not None else {"stdin": subprocess.DEVNULL}),
        )
        if code == -signal.SIGKILL:
            raise ApptainerError(
                shown,
                -1,
                f"killed after {timeout} s, its time limit (or by the system)\n{err}",
                fix or "find out what it waits for (a prompt? a network?)",
            )
        proc = subprocess.CompletedProcess(argv, code, out, err)
        if proc.returncode != 0:
            raise ApptainerError(shown, proc.returncode, proc.stderr or proc.stdout, fix)
        return proc

    def version(self) -> str:
        return self.run(["--version"]).stdout.strip().split()[-1]

    def fuse_usable(self) -> bool:
        """Whether squashfuse can open /dev/fuse as the user who runs."""
        try:
            dev = os.stat("/dev/fuse")
        except FileNotFoundError:
            return False
        uid = os.getuid() if self.user is None else pwd.getpwnam(self.user).pw_uid
        if uid == 0 or dev.st_mode & (stat.S_IROTH | stat.S_IWOTH) == (stat.S_IROTH | stat.S_IWOTH):
            return True
        return dev.st_uid == uid and bool(dev.st_mode & stat.S_IRUSR) and bool(dev.st_mode & stat.S_IWUSR)

    def action(
        self, command: str, image: Path, args: Sequence[str] = (), options: Sequence[str] = ()
    ) -> subprocess.CompletedProcess:
        """run/exec/test of a SIF, extracted (--unsquash) where FUSE is closed."""
        unsquash = [] if self.fuse_usable() else ["--unsquash"]
        return self.run([command, *unsquash, *options, image, *args])


def find(env: Optional[Mapping[str, str]] = None) -> Apptainer:
    return Apptainer(installed_executable(), dict(env or {}))


def build(apptainer: Apptainer, definition: Path, image: Path, *, timeout: int = BUILD_SECONDS) -> Path:
    """`apptainer build` of definition into image, which appears whole."""
    with files.replacing(image) as partial:
        build_into(apptainer, definition, partial, timeout=timeout)
    return image


def build_into(
    apptainer: Apptainer, definition: Path, target: Path, *, binds: Sequence[str] = (), timeout: int = BUILD_SECONDS
) -> None:
    """`apptainer build` of definition at target (relative %files paths are
    read from the definition's folder), with the host folders binds names
    (host:container) mounted during the build."""
    bound = [word for bind in binds for word in ("--bind", bind)]
    apptainer.run(
        ["build", "--fakeroot", "--force", *SQUASHFS_OPTIONS, *bound, target, definition.resolve()],
        cwd=definition.parent,
        timeout=timeout,
    )


def sign(apptainer: Apptainer, image: Path, *, passphrase: str = "") -> None:
    """Signs with the first secret key of the keyring APPTAINER_KEYSDIR names
    (keys.py sets it). A passphrase, if the key has one, goes through stdin."""
    apptainer.run(["sign", "--keyidx", "0", image], input=passphrase + "\n", timeout=TRANSFER_SECONDS)


class WrongSigner(ImageError):
    pass


def verify(apptainer: Apptainer, image: Path, signer: str) -> None:
    """Checks every signed object of image against the local public keys
    (APPTAINER_KEYSDIR's keyring and the installation's global one: --local,
    no key server is asked), and that the key of fingerprint `signer` signed
    each: Apptainer accepts a signature by any key it holds (an older site
    key, another center's), which is not the site's."""
    argv = ["verify", "--local", "--json", image]
    printed = apptainer.run(argv, timeout=TRANSFER_SECONDS).stdout
    try:
        found = {s["Signer"]["Fingerprint"].upper() for s in json.loads(printed)["SignerKeys"] or []}
    except (ValueError, KeyError, TypeError):
        raise ImageError(
            f"`apptainer {' '.join(map(str, argv))}` printed no report of its signers: {printed[:300]!r}"
        ) from None
    if found != {signer.upper()}:
        raise WrongSigner(
            f"{image}: signed by {', '.join(sorted(found)) or 'no key'}, not by the site's key {signer.upper()}: "
            "not the site's image, do not use it"
        )


def push(apptainer: Apptainer, image: Path, uri: str, signer: str) -> None:
    """Pushes an image signed by `signer` (verified first: an unsigned,
    altered or otherwise signed image is never published) to
    oras://HOST:PORT/REPO:TAG."""
    verify(apptainer, image, signer)
    apptainer.run(["push", image, uri], timeout=TRANSFER_SECONDS)


def pull(apptainer: Apptainer, uri: str, image: Path, signer: str) -> Path:
    """Pulls uri into image only once the whole file is there and its
    signature by `signer` (a fingerprint) verifies; a failed, refused or
    killed pull never leaves a file under image's name."""

    with files.replacing(image) as partial:
        # --disable-cache: the image goes straight to the partial file, not
        # also into the user's cache folder.
        apptainer.run(["pull", "--disable-cache", partial, uri], timeout=TRANSFER_SECONDS)
        verify(apptainer, partial, signer)
    return image


def sandbox(apptainer: Apptainer, image: Path, folder: Path, signer: str) -> Path:
    """A verified SIF unpacked once into a folder (`apptainer build
    --sandbox`): what a host `mpirun` starts once per rank where FUSE is
    closed. `--unsquash` would unpack the whole image again for every rank,
    and under a launcher that hands its ranks open descriptors (Intel MPI's
    hydra: more than a dozen), unsquashfs, which keeps 10 under the open-file limit,
    fails with "Too many open files" at the usual soft limit of 1024.
    Unpacked beside the folder and renamed into place: a failed unpack leaves
    the folder as it was, never half an image where mpirun would start it."""
    verify(apptainer, image, signer)
    with files.replacing(folder) as partial:
        apptainer.run(["build", "--sandbox", partial, image], timeout=BUILD_SECONDS)
    return folder


def login(apptainer: Apptainer, host: str, username: str, password: str) -> None:
    """`apptainer registry login` for oras://host; the credentials land in
    the config folder APPTAINER_CONFIGDIR names (else ~/.apptainer). The
    password goes through stdin, never on a command line."""
    apptainer.run(
        ["registry", "login", "--username", username, "--password-stdin", f"oras://{host}"], input=password + "\n"
    )


def test(apptainer: Apptainer, image: Path) -> str:
    return apptainer.action("test", image).stdout


def run_image(apptainer: Apptainer, image: Path, args: Sequence[str] = ()) -> str:
    return apptainer.action("run", image, args).stdout


def exec_in(apptainer: Apptainer, image: Path, argv: Sequence[str], env: Optional[Dict[str, str]] = None) -> str:
    """`apptainer exec`, with --env NAME=VALUE for each of env."""
    options = [f"--env={k}={v}" for k, v in (env or {}).items()]
    return apptainer.action("exec", image, argv, options).stdout


def sif_objects(apptainer: Apptainer, image: Path) -> List[Dict[str, object]]:
    """The data objects of a SIF (`apptainer sif list`): id, start and end
    byte offsets, type (e.g. "FS (Squashfs/*System/amd64)")."""
    objects = []
    for line in apptainer.run(["sif", "list", image]).stdout.splitlines():
        found = re.match(r"\s*(\d+)\s*\|[^|]*\|[^|]*\|\s*(\d+)-(\d+)\s*\|(.*)$", line)
        if found:
            objects.append(
                {
                    "id": int(found.group(1)),
                    "start": int(found.group(2)),
                    "end": int(found.group(3)),
                    "type": found.group(4).strip(),
                }
            )
    return objects


def inspect(apptainer: Apptainer, image: Path) -> Dict[str, str]:
    """The image's labels (`apptainer inspect --json`)."""
    data = json.loads(apptainer.run(["inspect", "--json", "--labels", image]).stdout)
    return data["data"]["attributes"]["labels"]
