"""The project's MPI ping-pong (cluster/pingpong.c), for the virtual
cluster's own checks: a job's ranks name their hosts, and it counts the bytes
it sent, which the nodes' interface counters must show crossing. The MPI
figures sites compare come from the Intel MPI Benchmarks (imb.py)."""

import os
import subprocess
from pathlib import Path
from typing import Dict, Optional

from onestack import paths
from onestack.cluster.config import ClusterError

SOURCE = paths.REPO / "cluster" / "pingpong.c"
# A job's Slurm time limit (minutes).
TIME_LIMIT = "1"


def build(mpicc: str, dest: Path, env: Optional[Dict[str, str]] = None) -> Path:
    """pingpong.c compiled with that MPI's compiler wrapper (with env: what
    the MPI's wrapper needs, e.g. Intel MPI's I_MPI_ROOT)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        proc = subprocess.run(
            [mpicc, "-O2", "-o", str(tmp), str(SOURCE)],
            text=True,
            capture_output=True,
            timeout=120,
            env={**os.environ, **(env or {})},
        )
    except FileNotFoundError:
        raise ClusterError(
            f"{mpicc} not found: install the MPI's development package "
            f"(setup/apt-packages.txt) or pass its compiler wrapper's path"
        ) from None
    if proc.returncode != 0:
        raise ClusterError(f"`{mpicc} {SOURCE}` failed:\n{proc.stderr}")
    tmp.replace(dest)
    return dest


def parse(output: str) -> Dict[str, list]:
    """pingpong's key=value lines: the first key of each line -> [(value, {other keys})]."""
    found: Dict[str, list] = {}
    for line in output.splitlines():
        tokens = dict(token.split("=", 1) for token in line.split() if "=" in token)
        if tokens and "=" in line.split()[0]:
            key = line.split()[0].split("=", 1)[0]
            found.setdefault(key, []).append((tokens[key], tokens))
    return found


def complete(output: str) -> bool:
    """pingpong got to its last line (all it measures is in the output)."""
    return "payload_bytes" in parse(output)
