"""Running the pinned Spack on the site environment (the repository's spack.yaml)."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import List

from onestack import paths

INSIDE_SPACK = Path(__file__).parent / "inside_spack"


class SpackError(RuntimeError):
    pass


def command(*args: str) -> List[str]:
    return [str(paths.spack_root() / "bin" / "spack"), "-e", str(paths.REPO), *args]


def inputs_fingerprint() -> str:
    """Everything concretization depends on: the site environment, the
    stack's data, the site recipes and their patches, this machine's externals."""
    files = [paths.REPO / "spack.yaml", *sorted(paths.environments_dir().glob("*")),
             *sorted(f for f in (paths.REPO / "packages").rglob("*") if f.is_file()),
             *sorted(INSIDE_SPACK.glob("*.py")), paths.site_scope() / "packages.yaml"]
    digest = hashlib.sha256()
    for file in files:
        if file.is_file():
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def concretize() -> None:
    """`spack concretize` of the rendered flavors. Spack keeps a root it has
    concretized before, even when the recipe it was solved with has changed
    since (a reused checkout then installs the old, unfixed build); so when
    the inputs have changed, every root is solved again (--force)."""
    stamp = paths.generated_dir() / "concretized-inputs"
    fingerprint = inputs_fingerprint()
    unchanged = stamp.is_file() and stamp.read_text() == fingerprint
    run("concretize", *([] if unchanged else ["--force"]), quiet=True)
    stamp.write_text(fingerprint)


def run(*args: str, quiet: bool = False) -> None:
    """Run a Spack command, its output shown (or kept for the error if quiet)."""
    cmd = command(*args)
    print(f"==> spack {' '.join(args)}", flush=True)
    proc = subprocess.run(cmd, text=True, capture_output=quiet)
    if proc.returncode != 0:
        detail = (proc.stdout + proc.stderr)[-4000:] if quiet else ""
        raise SpackError(f"`spack {' '.join(args)}` failed (exit {proc.returncode})\n{detail}")


def query(script: str, *args: str):
    """Run onestack/inside_spack/<script>.py in `spack python`; it prints JSON.

    These scripts read Spack's own objects (concretized specs, fetchers,
    module index) where no Spack command prints the fact we need.
    """
    cmd = command("python", str(INSIDE_SPACK / f"{script}.py"), *args)
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SpackError(f"spack python {script}.py failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])
