"""A real single-node Slurm (Debian's slurm-wlm) on loopback, for the tests:
MUNGE, slurmctld and slurmd started in one folder and stopped afterwards, so
that test problems run as users' batch jobs do (sbatch, then srun).

Written here because neither Slurm nor its packages start a throwaway
cluster outside systemd and /etc/slurm."""

import contextlib
import getpass
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from onestack import paths

CONF_TEMPLATE = paths.REPO / "tests" / "slurm" / "slurm.conf"
NODE = "onestack0"
DAEMONS = ("slurmd", "slurmctld", "munged")  # stopped in this order


class SlurmError(RuntimeError):
    """The test cluster did not come up (the message has its logs)."""


@dataclass
class Cluster:
    workdir: Path

    @property
    def conf(self) -> Path:
        return self.workdir / "slurm.conf"

    def command(self, *argv: str, timeout: float = 1800) -> subprocess.CompletedProcess:
        """A Slurm command in a clean environment, as a user's login shell runs it."""
        env = {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin", "SLURM_CONF": str(self.conf)}
        return subprocess.run(argv, env=env, text=True, capture_output=True, timeout=timeout)

    def submitter(self, ranks: int, nodes: int = 1):
        """A batch job as users write one (the script loads its module
        itself), for onestack.problems.execute: submitted with sbatch,
        waited for; its exit code and its output file."""
        def submit(script: Path):
            out = script.with_suffix(".out")
            proc = self.command("sbatch", "--wait", f"--nodes={nodes}", f"--ntasks={ranks}", f"--output={out}",
                                str(script))
            return proc.returncode, (out.read_text() if out.exists() else "") + proc.stderr
        return submit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(argv: list, workdir: Path, log: str) -> None:
    proc = subprocess.run(argv, text=True, capture_output=True)
    if proc.returncode != 0:
        raise SlurmError(f"`{' '.join(argv)}` exited {proc.returncode}:\n{proc.stderr}{_tail(workdir / log)}")


def _tail(log: Path) -> str:
    return "\n".join(log.read_text().splitlines()[-15:]) if log.exists() else f"(no {log.name})"


def _wait_idle(cluster: Cluster, timeout: float = 60) -> None:
    """slurmd registers with slurmctld a moment after both started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = cluster.command("sinfo", "--noheader", "--format=%T", f"--nodes={NODE}").stdout.strip()
        if state == "idle":
            return
        time.sleep(0.5)
    raise SlurmError(f"node {NODE} not idle after {timeout:.0f} s (state '{state}'):\n"
                     f"slurmctld.log:\n{_tail(cluster.workdir / 'slurmctld.log')}\n"
                     f"slurmd.log:\n{_tail(cluster.workdir / 'slurmd.log')}")


def _stop(workdir: Path) -> None:
    for daemon in DAEMONS:
        pid_file = workdir / f"{daemon}.pid"
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGTERM)


@contextlib.contextmanager
def single_node(workdir: Path) -> Iterator[Cluster]:
    """A cluster of one node with this machine's cores, one partition."""
    workdir.mkdir(parents=True, exist_ok=True)
    for folder in ("state", "spool"):
        (workdir / folder).mkdir(exist_ok=True)
    key = workdir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster = Cluster(workdir)
    cluster.conf.write_text(CONF_TEMPLATE.read_text().format(
        workdir=workdir, user=getpass.getuser(), ctld_port=_free_port(), slurmd_port=_free_port(),
        node=NODE, cpus=os.cpu_count()))
    try:
        # --force: munged refuses to run as root, which CI containers are.
        _start(["munged", "--force", f"--key-file={key}", f"--socket={workdir}/munge.socket",
                f"--pid-file={workdir}/munged.pid", f"--log-file={workdir}/munged.log",
                f"--seed-file={workdir}/munge.seed"], workdir, "munged.log")
        _start(["slurmctld", "-f", str(cluster.conf)], workdir, "slurmctld.log")
        _start(["slurmd", "-f", str(cluster.conf), "-N", NODE], workdir, "slurmd.log")
        _wait_idle(cluster)
        yield cluster
    finally:
        _stop(workdir)
