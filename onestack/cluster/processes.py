"""The cluster's processes, found without trusting any record: everything in
a node's network namespace, the host-side daemons (their environment has the
cluster's mark, MARK, or their parent's does) and Slurm clients still
talking to the cluster (their SLURM_CONF is its slurm.conf). Root reads
them all; another user, only their own."""

import os
import signal
import time
from pathlib import Path
from typing import Iterable, List, Set

from onestack.cluster import network

# The variable whose value, the cluster's name, every daemon the cluster
# starts carries (slurm.daemon_env), and the processes they start: by their
# command line (a folder), a user's `tail` of a log would be taken for one,
# and a folder named otherwise by another shell would miss them.
MARK = "ONESTACK_CLUSTER"
# Host-side commands that talk to a cluster; a user's shell that sourced the
# cluster's env.sh has its SLURM_CONF too, and must survive `down`.
SLURM_CLIENTS = {"srun", "sbatch", "salloc", "sattach", "scontrol", "sinfo", "squeue", "scancel"}


def _read(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:  # gone meanwhile, or a kernel thread
        return b""


def command_name(pid: int) -> str:
    return _read(pid, "comm").decode(errors="replace").strip()


def alive(pid: int) -> bool:
    """Running (a zombie has ended: only its parent's wait is missing)."""
    stat = _read(pid, "stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[0] != b"Z"


def _ancestors() -> Set[int]:
    """This process and its parents: `down` run from a shell of the cluster must not end that shell."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        fields = _read(pid, "stat").rsplit(b")", 1)
        pid = int(fields[1].split()[1]) if len(fields) == 2 else 0
    return pids


def of_cluster(prefix: str, workdir: Path) -> List[int]:
    found = {pid for namespace in network.namespaces(prefix) for pid in network.pids_in(namespace)}
    mark = f"{MARK}={prefix}".encode()
    conf = f"SLURM_CONF={workdir}/slurm.conf".encode()
    parent = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        environ = _read(pid, "environ").split(b"\0")
        if mark in environ or (command_name(pid) in SLURM_CLIENTS and conf in environ):
            found.add(pid)
        fields = _read(pid, "stat").rsplit(b")", 1)
        parent[pid] = int(fields[1].split()[1]) if len(fields) == 2 else 0
    # With their children: slurmctld's slurmscriptd writes its title over
    # its environment, mark and all (setproctitle).
    found |= {pid for pid, ppid in parent.items() if ppid in found}
    return sorted(pid for pid in found - _ancestors() if alive(pid))


def end(pids: Iterable[int], grace: float = 5, patience: float = 5) -> List[int]:
    """SIGTERM, then SIGKILL after `grace` seconds for those still running
    (grace 0: SIGKILL at once); the pids still alive `patience` seconds after
    the SIGKILL (none, unless the kernel is stuck)."""
    pids = list(pids)
    steps = ((signal.SIGTERM, grace),) if grace else ()
    for sig, wait in steps + ((signal.SIGKILL, patience),):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if alive(pid)]
            time.sleep(0.1)
    return pids
