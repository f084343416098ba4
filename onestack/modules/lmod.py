"""Lmod, as installed by the OS (apt `lmod`): its init scripts and the tools
it ships to lint a tree and build the spider cache."""

import os
import shlex
import subprocess
from pathlib import Path
from typing import List

from onestack.commands import clean_env
from onestack.errors import OnestackError

# Where distributions install Lmod; LMOD_ROOT overrides for a site's own build.
_CANDIDATES = ("/usr/share/lmod/lmod", "/opt/apps/lmod/lmod", "/usr/local/lmod/lmod")


class LmodError(OnestackError):
    pass


def root() -> Path:
    for candidate in [os.environ.get("LMOD_ROOT"), os.environ.get("LMOD_PKG"), *_CANDIDATES]:
        if candidate and (Path(candidate) / "init" / "bash").is_file():
            return Path(candidate)
    raise LmodError("Lmod not found: install it (`make setup` does) or set LMOD_ROOT")


def init_dir() -> Path:
    return root() / "init"


def check_syntax(dirs: List[Path]) -> None:
    """Lmod's own linter over each module directory."""
    tool = root() / "libexec" / "check_module_tree_syntax"
    for directory in dirs:
        proc = subprocess.run([str(tool), str(directory)], text=True, capture_output=True)
        if proc.returncode != 0 or "No errors found" not in proc.stdout:
            raise LmodError(f"check_module_tree_syntax {directory}:\n{proc.stdout}{proc.stderr}")


def build_spider_cache(cache_dir: Path, modulepath: List[Path]) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    tool = root() / "libexec" / "update_lmod_system_cache_files"
    proc = subprocess.run(
        [str(tool), "-d", str(cache_dir), "-t", str(cache_dir / "timestamp"), ":".join(map(str, modulepath))],
        text=True,
        capture_output=True,
    )
    if proc.returncode != 0:
        raise LmodError(f"update_lmod_system_cache_files failed:\n{proc.stdout}{proc.stderr}")


def clean_shell(init: Path, commands: str) -> subprocess.CompletedProcess:
    """Run bash commands in a clean environment after sourcing a tree's init script."""
    script = f"set -e\nsource {shlex.quote(str(init))}\n{commands}\n"
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script], env=clean_env(), text=True, capture_output=True
    )


def check_loads(init: Path, module: str) -> None:
    proc = clean_shell(init, f"module load {shlex.quote(module)}")
    if proc.returncode != 0 or "error" in proc.stderr.lower():
        raise LmodError(f"`module load {module}` fails in a clean shell:\n{proc.stderr}")


def time_command(init: Path, command: str, runs: int, use_cache: bool) -> List[float]:
    """Milliseconds of one `module <command>` (e.g. "avail"), timed inside a
    clean shell, per run (the first, cold run is discarded as warm-up); the
    command reaches the script as a variable, never as script text."""
    script = (
        '[ -n "$USE_CACHE" ] || unset LMOD_RC\n'
        'for i in $(seq 0 "$RUNS"); do module purge >/dev/null 2>&1; s=$(date +%s%N)\n'
        "module $COMMAND >/dev/null 2>&1\ne=$(date +%s%N); echo $(( (e - s) / 1000 ))\ndone"
    )
    proc = clean_shell(
        init, f"USE_CACHE={'1' if use_cache else ''} RUNS={int(runs)} COMMAND={shlex.quote(command)}\n{script}"
    )
    return [int(v) / 1000 for v in proc.stdout.split()][1:]
