"""SIF images without Apptainer, which is not obtainable here: written in the
layout `apptainer build` produces (definition, labels, a gzip squashfs as the
primary system partition, /.singularity.d/ inside), and run the way
`apptainer exec|run|test` runs them, under bubblewrap. Real sites use
Apptainer itself for both; the images are the same files."""

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

# siftool's codes (the SIF format's): data types, and the partition's kind.
DEFINITION, GENERIC_JSON, PARTITION = "1", "6", "4"
PARTITION_FLAGS = ["--parttype", "2", "--partfs", "1", "--partarch", "2"]  # primary system, squashfs, amd64
# Where Apptainer sources a container's environment from: %post's
# $SINGULARITY_ENVIRONMENT is 91-environment.sh.
ENVIRONMENT_FILE = ".singularity.d/env/91-environment.sh"
# The action scripts Apptainer runs for `exec`, `run` and `test`: source
# the environment files, then the command, the %runscript or the %test.
ACTIONS = {"exec": 'exec "$@"', "run": 'exec /.singularity.d/runscript "$@"',
           "test": 'exec /.singularity.d/test "$@"'}
# What `apptainer exec` sets instead of the host's PATH (its default).
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Host paths Apptainer binds by default that these images need: /tmp (the
# working directory of the tests), /dev/shm (shared memory between ranks that
# run in separate containers), /sys (hardware topology for the MPI).
DEFAULT_BINDS = ("/tmp", "/dev/shm")


class SifError(RuntimeError):
    pass


def _run(argv: Sequence[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], text=True, capture_output=True, **kwargs)
    if proc.returncode != 0:
        raise SifError(f"`{shlex.join(map(str, argv))}` failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def write_metadata(root: Path, definition: str, labels: Dict[str, str], runscript: str, test: str,
                   environment: str) -> None:
    """/.singularity.d/ as `apptainer build` leaves it."""
    meta = root / ".singularity.d"
    for sub in ("env", "actions", "libs"):
        (meta / sub).mkdir(parents=True, exist_ok=True)
    (meta / "Singularity").write_text(definition)
    (meta / "labels.json").write_text(json.dumps(labels, indent=2) + "\n")
    _script(meta / "runscript", runscript)
    _script(meta / "test", test)
    (root / ENVIRONMENT_FILE).write_text(environment)
    for action, line in ACTIONS.items():
        _script(meta / "actions" / action, f'for f in /.singularity.d/env/*.sh; do . "$f"; done\n{line}')


def assemble(root: Path, definition: Path, labels: Dict[str, str], out: Path) -> None:
    """Write out (a SIF file) from a root file system: the squashfs must be
    gzip (Apptainer rejects zstd) and owned by root (-all-root)."""
    squashfs = out.with_suffix(".sqfs")
    labels_file = out.with_suffix(".labels.json")
    labels_file.write_text(json.dumps(labels, indent=2) + "\n")
    _run(["mksquashfs", root, squashfs, "-comp", "gzip", "-all-root", "-noappend", "-quiet"])
    out.unlink(missing_ok=True)
    _run(["siftool", "new", out])
    _run(["siftool", "add", out, definition, "--datatype", DEFINITION, "--filename", "Singularity"])
    _run(["siftool", "add", out, labels_file, "--datatype", GENERIC_JSON, "--filename", "labels.json"])
    _run(["siftool", "add", out, squashfs, "--datatype", PARTITION, *PARTITION_FLAGS])
    squashfs.unlink()
    labels_file.unlink()


def descriptors(sif: Path) -> List[Dict[str, str]]:
    """`siftool list`, parsed: id and type of each data object."""
    rows = re.findall(r"^(\d+)\s*\|[^|]*\|[^|]*\|[^|]*\|(.+)$", _run(["siftool", "list", sif]).stdout, re.M)
    return [{"id": i, "type": t.strip()} for i, t in rows]


def dump(sif: Path, type_prefix: str) -> bytes:
    """The content of the first data object of a type (e.g. Def.FILE)."""
    wanted = next((d["id"] for d in descriptors(sif) if d["type"].startswith(type_prefix)), None)
    if wanted is None:
        raise SifError(f"{sif}: no {type_prefix} data object")
    return subprocess.run(["siftool", "dump", wanted, str(sif)], capture_output=True, check=True).stdout


def extract(sif: Path, dest: Path) -> Path:
    """The image's root file system (its primary partition), unpacked into dest."""
    squashfs = dest.with_suffix(".sqfs")
    squashfs.write_bytes(dump(sif, "FS (Squashfs/*System"))
    _run(["unsquashfs", "-d", dest, "-f", squashfs])
    squashfs.unlink()
    return dest


def exec_argv(root: Path, action: str, args: Sequence[str] = (), binds: Sequence[str] = (),
              env: Dict[str, str] = None, cwd: str = "") -> List[str]:
    """argv of `apptainer <action> [--bind b ...] <image> args` on an extracted
    root: the image as /, host binds, Apptainer's default PATH and no host
    LD_LIBRARY_PATH (`--env NAME=value` sets variables inside). The root is
    bound writable: Apptainer makes missing bind points in an underlay, bwrap
    needs them made in the root, a scratch copy."""
    argv = ["bwrap", "--bind", str(root), "/", "--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys"]
    for bind in [*DEFAULT_BINDS, *binds]:
        source, _, target = bind.partition(":")
        argv += ["--bind", source, target or source]
    argv += ["--setenv", "PATH", CONTAINER_PATH, "--unsetenv", "LD_LIBRARY_PATH"]
    for name, value in (env or {}).items():
        argv += ["--setenv", name, value]
    if cwd:
        argv += ["--chdir", cwd]
    return [*argv, f"/.singularity.d/actions/{action}", *args]
