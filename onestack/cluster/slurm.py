"""Slurm on the virtual cluster: its files (slurm.conf, mpi.conf, hosts, each node's
topology and boot id), its daemons (munged and slurmctld on the host, one
slurmd per node namespace), and the client commands users and tests run."""

import os
import re
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from onestack import commands, files, render
from onestack.cluster import processes
from onestack.cluster.config import TEMPLATES, ClusterError, Config, Node

BOOT_SCRIPT = TEMPLATES / "boot.sh"
# Slurm's states of a job that has ended (scontrol's JobState).
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
}
POLL_SECONDS = 0.5
# slurmd's reason for a node it drains when a job's processes outlive SIGKILL.
UNKILLABLE = "Kill task failed"


@dataclass(frozen=True)
class Job:
    id: int
    state: str  # one of ENDED
    exit_code: str  # Slurm's "<code>:<signal>"
    reason: str
    nodes: str
    output: str  # the job's --output file
    seconds: float  # from submission (or from the start of the wait) to its end
    # Nodes Slurm drained as the job ended, and what the cluster did to
    # return each to service (Cluster.return_to_service).
    returned: Tuple[str, ...] = ()


def node_dir(config: Config, node: Node) -> Path:
    return config.workdir / "nodes" / node.name


def local_dir(config: Config) -> Path:
    """The same path on every node, a different folder behind it: the node's
    local disk (what only that node has, e.g. a library installed there)."""
    return config.workdir / "local"


def node_local_dir(config: Config, node: Node) -> Path:
    """Where the host writes what `node` alone sees at local_dir()."""
    return node_dir(config, node) / "local"


def _render(template: str, out: Path, mode: int = 0o644, **values) -> None:
    render.write(TEMPLATES, template, out, mode, **values)


def machine_hardware() -> str:
    """This machine's cores as slurm.conf declares a node (from `slurmd -C`)."""
    line = _run(["slurmd", "-C"]).stdout.splitlines()[0]
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    fields = dict(token.split("=", 1) for token in line.split() if "=" in token)
    return " ".join(f"{key}={fields[key]}" for key in keys)


def rotated_topology(topology_xml: str, shift: int) -> str:
    """hwloc's XML with the machine numbers of the processing units rotated by
    `shift`: Slurm's core 0 of this node is then machine core `shift`.

    The nodes share this machine's cores. Slurm confines a step that does not
    fill its node to the cores it was given, which are the node's first; with
    every node numbering from machine core 0, a job with one rank per node
    would put all its ranks on that one core (measured: 3-5 ms per message
    between two busy-polling ranks that take turns on one core)."""
    numbers = re.findall(r'type="PU" os_index="(\d+)"', topology_xml)
    order = iter(numbers[shift % len(numbers) :] + numbers[: shift % len(numbers)])
    return re.sub(r'type="PU" os_index="\d+"', lambda _: f'type="PU" os_index="{next(order)}"', topology_xml)


def write_files(config: Config) -> None:
    """Everything the daemons read, in the cluster's folder (made empty by `up`)."""
    for folder in ("slurmctld-state", "local"):
        (config.workdir / folder).mkdir()
    key = config.workdir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    values = dict(
        prefix=config.prefix,
        workdir=config.workdir,
        controller=config.controller,
        controller_address=config.controller_address,
        nodes=config.nodes,
    )
    _render("slurm.conf.j2", config.slurm_conf, slurmctld_port=_free_port(), hardware=machine_hardware(), **values)
    _render("mpi.conf.j2", config.slurm_conf.with_name("mpi.conf"), **values)
    _render("hosts.j2", config.workdir / "hosts", **values)
    _render("env.sh.j2", config.env_file, settings=login_settings(config), **values)
    topology = _run(["lstopo-no-graphics", "--of", "xml"]).stdout
    for node in config.nodes:
        folder = node_dir(config, node)
        for sub in ("spool", "tmp", "local"):
            (folder / sub).mkdir(parents=True)
        (folder / "tmp").chmod(0o1777)
        # UCX tells machines apart by the kernel's boot id: with the real one
        # shared by all nodes, MPICH's UCX moved messages between nodes through
        # shared memory (sysv/cma), never over the network.
        files.write_text(folder / "boot_id", f"{uuid.uuid4()}\n")
        files.write_text(folder / "topology.xml", rotated_topology(topology, node.index))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _run(argv, timeout: float = 60, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, text=True, capture_output=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise ClusterError(f"{argv[0]} is not installed: run `make setup` (setup/apt-packages.txt)") from None
    if proc.returncode != 0:
        raise ClusterError(f"`{' '.join(map(str, argv))}` exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def tail(log: Path, lines: int = 15) -> str:
    if not log.exists():
        return f"(no {log})"
    return f"{log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _daemon(argv, log: Path, env: Optional[dict] = None) -> None:
    """Start a daemon that forks into the background once it is set up."""
    try:
        _run(argv, timeout=30, env=env)
    except ClusterError as err:
        raise ClusterError(f"{err}\n{tail(log)}") from None


def daemon_env(config: Config, **extra: str) -> dict:
    """The daemons' environment, marked with the cluster's name: its
    processes on the host's side (munged, slurmctld, and by their parent
    those that write over it, slurmscriptd) are found by the mark, whatever
    folder a shell names (processes.of_cluster)."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", processes.MARK: config.prefix, **extra}


def start_munged(config: Config) -> None:
    w = config.workdir
    # --force: munged refuses to run as root, which the cluster needs.
    # --origin: the bridge's address, not the one the host's own hostname
    # resolves to (a lookup that could leave the machine, or fail).
    _daemon(
        [
            "munged",
            "--force",
            f"--key-file={w}/munge.key",
            f"--socket={w}/munge.socket",
            f"--pid-file={w}/munged.pid",
            f"--log-file={w}/munged.log",
            f"--seed-file={w}/munge.seed",
            f"--origin={config.bridge}",
        ],
        w / "munged.log",
        daemon_env(config),
    )


def _booted(config: Config, hostname: str, binds: List[str], *daemon: str) -> List[str]:
    """A daemon started in mount and UTS namespaces of its own by
    cluster/boot.sh: the hostname, the cluster's hosts file and each
    (source, target) of binds mounted over the host's, then the daemon."""
    return [
        "unshare",
        "--uts",
        "--mount",
        "--propagation",
        "slave",
        "--",
        "sh",
        str(BOOT_SCRIPT),
        hostname,
        str(config.workdir / "hosts"),
        "/etc/hosts",
        *binds,
        "--",
        *daemon,
    ]


def start_slurmctld(config: Config) -> None:
    """On the host's network (the bridge address), under the controller's own
    hostname (slurmctld only runs where the hostname is SlurmctldHost) and
    with the cluster's hosts file."""
    _daemon(
        _booted(config, config.controller, [], "slurmctld", "-f", str(config.slurm_conf)),
        config.workdir / "slurmctld.log",
        daemon_env(config),
    )


def start_slurmd(config: Config, node: Node) -> None:
    """In the node's network namespace (nsenter, which keeps the host's /sys:
    slurmd needs its cgroup mounts), with the node's hostname, hosts file, boot
    id, local folder and core numbering."""
    folder = node_dir(config, node)
    binds = [str(folder / "boot_id"), "/proc/sys/kernel/random/boot_id", str(folder / "local"), str(local_dir(config))]
    _daemon(
        [
            "nsenter",
            f"--net=/run/netns/{node.name}",
            *_booted(config, node.name, binds, "slurmd", "-f", str(config.slurm_conf), "-N", node.name),
        ],
        folder / "slurmd.log",
        daemon_env(config, HWLOC_XMLFILE=str(folder / "topology.xml")),
    )


def login_settings(config: Config) -> List[Tuple[str, str, str]]:
    """What a shell on the head node sets to use the cluster (env.sh), and so
    every job submitted from it: (name, value, why)."""
    return [
        ("SLURM_CONF", str(config.slurm_conf), "Slurm's commands (sinfo, sbatch, srun) talk to this cluster."),
        (
            "OMPI_MCA_hwloc_base_binding_policy",
            "none",
            "Open MPI's mpirun binds each node's first rank to the machine's first core: the nodes share this "
            "machine's cores, which Slurm divides among them (each node numbers them from another one), so "
            "mpirun's ranks keep Slurm's binding instead (measured: 5 ms per message with both on one core).",
        ),
    ]


def client_env(config: Config, extra: Optional[dict] = None) -> dict:
    """A login shell's environment on the head node that sourced env.sh."""
    settings = {name: value for name, value, _ in login_settings(config)}
    return {
        "HOME": os.environ.get("HOME", "/"),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        **settings,
        **(extra or {}),
    }


def command(config: Config, *argv: str, timeout: float = 60, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    """A Slurm client command (sinfo, sbatch, srun, scontrol ...) on the head
    node, ended whole past its time or with its caller (commands.run_whole):
    an srun left running holds its job's nodes until the job's time limit."""
    code, out, err = commands.run_whole(list(argv), timeout, env=client_env(config, env))
    if code == -signal.SIGKILL:
        raise ClusterError(f"`{' '.join(argv)}` was killed: past its {timeout:.0f} s, or by another process")
    return subprocess.CompletedProcess(list(argv), code, out, err)


def node_states(config: Config) -> Dict[str, str]:
    """Each node's state as sinfo prints it (idle, allocated, down* ...)."""
    out = command(config, "sinfo", "--noheader", "--Node", "--format=%N %T", timeout=20).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def drained_by_unkillable(config: Config) -> List[str]:
    """Nodes Slurm drained because a job's processes outlived SIGKILL
    (UnkillableStepTimeout): a drain no ReturnToService undoes."""
    out = command(config, "sinfo", "--noheader", "--Node", "--format=%N|%T|%E", timeout=20).stdout
    rows = (line.split("|", 2) for line in out.splitlines() if line.strip())
    return [name for name, state, reason in rows if state.startswith("drain") and reason == UNKILLABLE]


def resume(config: Config, name: str) -> None:
    proc = command(config, "scontrol", "update", f"NodeName={name}", "State=RESUME", timeout=20)
    if proc.returncode != 0:
        raise ClusterError(f"scontrol could not resume {name}: {proc.stderr.strip()}")


def wait_for_nodes(config: Config, state: str, names: Iterable[str], timeout: float) -> float:
    """Seconds until every named node is in `state`; ClusterError with the logs if not within `timeout`."""
    names = list(names)
    start = time.monotonic()
    deadline = start + timeout
    while True:
        states = node_states(config)
        if all(states.get(name) == state for name in names):
            return time.monotonic() - start
        if time.monotonic() > deadline:
            logs = "\n".join(tail(node_dir(config, config.node(n)) / "slurmd.log") for n in names)
            raise ClusterError(
                f"nodes {', '.join(names)} not {state} within {timeout:.0f} s (sinfo: {states})\n"
                f"{tail(config.workdir / 'slurmctld.log')}\n{logs}"
            )
        time.sleep(POLL_SECONDS)


def submit(config: Config, script: Path, *sbatch_args: str, env: Optional[dict] = None) -> int:
    proc = command(config, "sbatch", "--parsable", *sbatch_args, str(script), env=env)
    if proc.returncode != 0:
        raise ClusterError(f"sbatch {script} failed: {proc.stderr.strip()}")
    return int(proc.stdout.strip().split(";")[0])


def job_fields(config: Config, job_id: int) -> Dict[str, str]:
    """scontrol's record of the job (kept MinJobAge, 300 s, after its end)."""
    proc = command(config, "scontrol", "--oneliner", "show", "job", str(job_id), timeout=20)
    if proc.returncode != 0:
        raise ClusterError(f"no job {job_id} in cluster {config.prefix}: {proc.stderr.strip()}")
    return dict(token.split("=", 1) for token in proc.stdout.split() if "=" in token)


def wait_job(config: Config, job_id: int, timeout: float) -> Job:
    """The job once it has ended; past `timeout` it is cancelled and the error has the logs."""
    start = time.monotonic()
    while True:
        fields = job_fields(config, job_id)
        if fields["JobState"] in ENDED:
            output = Path(fields.get("StdOut", ""))
            text = output.read_text(errors="replace") if output.is_file() else ""
            return Job(
                job_id,
                fields["JobState"],
                fields["ExitCode"],
                fields.get("Reason", ""),
                fields.get("NodeList", ""),
                text,
                time.monotonic() - start,
            )
        if time.monotonic() - start > timeout:
            command(config, "scancel", str(job_id))
            raise ClusterError(
                f"job {job_id} still {fields['JobState']} after {timeout:.0f} s: cancelled\n"
                f"{tail(config.workdir / 'slurmctld.log')}"
            )
        time.sleep(POLL_SECONDS)
