"""Files and folders that appear whole under their final name or not at all:
a failed or killed step (a render, a build context, an image, a mirror
archive, a key) never leaves a half-written one where users or later steps
read it. One mechanism for every writer: a partial beside the final name
(same file system, so the rename is atomic), renamed over it on success."""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Optional


def is_elf(file: Path) -> bool:
    """An ELF object (a program or a library), by its first four bytes."""
    with open(file, "rb") as handle:
        return handle.read(4) == b"\x7fELF"


def remove(path: Path) -> None:
    """A file, link or folder, if there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _drop_stale(final: Path) -> None:
    """Partials of final left by processes that are gone (killed runs)."""
    for stale in final.parent.glob(f".{final.name}.partial-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if not (pid.isdigit() and Path(f"/proc/{pid}").exists()):
            remove(stale)


@contextlib.contextmanager
def replacing(final: Path) -> Iterator[Path]:
    """A partial path beside final for the caller to write (a file or a
    folder); it replaces final when the block ends without an error, and is
    removed otherwise."""
    final.parent.mkdir(parents=True, exist_ok=True)
    _drop_stale(final)
    partial = final.with_name(f".{final.name}.partial-{os.getpid()}")
    remove(partial)
    # A folder cannot be renamed over a non-empty one: the old one is renamed
    # aside first, never deleted in place (a killed run would leave half of it).
    aside = final.with_name(f".{final.name}.partial-old-{os.getpid()}")
    try:
        yield partial
        moved = final.is_dir() and not final.is_symlink()
        if moved:
            os.replace(final, aside)
        try:
            os.replace(partial, final)
        except OSError:
            if moved:
                os.replace(aside, final)
            raise
    finally:
        for left in (partial, aside):
            if left.exists() or left.is_symlink():
                remove(left)


@contextlib.contextmanager
def exclusive(lock_file: Path, doing: str, error: type) -> Iterator[None]:
    """One process doing a thing at a time (`doing`, as the error names it):
    a second one is refused with the first's pid, never left waiting."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    # Never through a link: a lock in a folder its user owns (the cluster's,
    # under sudo) would have root truncate the file the link names.
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as err:
        raise error(f"{lock_file}: {err.strerror}: a lock file must be a plain file; remove it") from None
    with os.fdopen(fd, "r+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise error(
                f"another {doing} is running (pid {lock.read().strip() or '?'}): wait for it to end, "
                "then run this again"
            ) from None
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield


def git_export(clone: str, commit: str, into: Path, pathspecs: List[str]) -> str:
    """`git archive` of a commit's pathspecs, extracted into a folder (what
    the commit holds, never a checkout's files); "" or the error git or tar
    printed."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen(
        ["git", "-C", clone, "archive", "--format=tar", commit, "--", *pathspecs],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    untar = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    error = archive.stderr.read().decode() or untar.stderr.decode()
    failed = archive.wait() != 0 or untar.returncode != 0
    return (error.strip()[-800:] or "failed") if failed else ""


def write_text(final: Path, text: str, mode: int = 0o644) -> Path:
    with replacing(final) as partial:
        partial.write_text(text)
        partial.chmod(mode)
    return final


def pip_venv(where: Path, pip_args: List[str], stamp: str, wanted: str) -> Optional[str]:
    """A virtualenv of its own at where with what `pip install pip_args`
    installs, made again whenever `wanted` (what they install: the
    requirement, a requirements file's text) changes: complete only once its
    stamp file, written last, holds it. pip's error text where it failed,
    else None."""
    if (where / stamp).is_file() and (where / stamp).read_text() == wanted:
        return None
    print(f"==> pip: installing {' '.join(pip_args)} into {where}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)], check=True)
    pip = subprocess.run(
        [str(where / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *pip_args],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        return pip.stderr
    (where / stamp).write_text(wanted)
    return None
