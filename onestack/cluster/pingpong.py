"""The project's MPI ping-pong (cluster/pingpong.c) on the virtual cluster:
latency and bandwidth between two ranks on one node (shared memory) and on
two nodes (the network), and which transport each MPI took. The MPIs are the
stack's: Debian's MPICH and Open MPI (the externals its flavors use), Intel
MPI (the pinned wheels) and MVAPICH2 where Spack has built it, each run with
the settings its flavors get on the site's fabric (environments/components.yaml)."""

import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from onestack import paths, spack, stack
from onestack.cluster.config import ClusterError
from onestack.spack import vendor

SOURCE = paths.REPO / "cluster" / "pingpong.c"
# pingpong.c's arguments: iterations (latency, bandwidth), timed repetitions
# of each, and the seconds after which a repetition stops early (a loaded
# machine: see pingpong.c).
BENCH_ARGS = ("10000", "20", "5", "2")
# Each run's Slurm time limit (minutes) and, beyond it, the wait for srun.
TIME_LIMIT = "1"
RUN_TIMEOUT = 180
# Debian's MPICH 4.0.2 (ch4:ucx) sometimes hangs in MPI_Finalize between
# nodes over TCP: one rank still flushes its UCX endpoint to a peer that sits
# in finalize's PMI barrier and no longer answers. Upstream removed that
# barrier (pmodels/mpich#6596, MPICH 4.2). Seen here in 2-10% of 2-node runs;
# the time limit ends such a run, and the figures it printed before still count.
FINALIZE_HANG = (
    "hung in MPI_Finalize after its output, ended by the time limit (MPICH 4.0.2 ch4:ucx over TCP: pmodels/mpich#6596)"
)


@dataclass(frozen=True)
class Mpi:
    """An MPI as the benchmark builds and starts it."""

    name: str
    mpicc: str  # its compiler wrapper (a name on PATH or a path)
    srun_mpi: str  # srun's PMI plugin for it: pmi2 (MPICH family), pmix (Open MPI)
    env: Tuple[Tuple[str, str], ...]  # what its runs need
    verbose_env: Tuple[Tuple[str, str], ...]  # makes it print the transport it picked per peer
    transport_pattern: str  # a regex whose group 1 is that transport, on lines about a peer
    # What it names within a node: its shared-memory transports, or none
    # where it names only the network's (Intel MPI: then the latency shows it).
    shared_memory: Tuple[str, ...] = ()
    # What the table says of an MPI that names less than both transports.
    transport_note: str = ""


# Open MPI refuses to start as root without the two *_ALLOW_* settings; the
# cluster's jobs run as whoever submits them, root in the tests.
OPENMPI_AS_ROOT = (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"))

DEBIAN_MPIS = (
    # Debian's MPICH 4.0.2 is ch4:ucx (mpichversion); UCX logs each endpoint's
    # transports at info level ("ep_cfg[1]: tag(tcp/eth0) ...").
    Mpi(
        "mpich",
        "mpicc.mpich",
        "pmi2",
        (),
        (("UCX_LOG_LEVEL", "info"),),
        r"ep_cfg\[\d+\]: tag\(((?:(?!self/)[^)])*)\)",
        ("sysv/memory", "posix/memory", "cma/memory"),
    ),
    # Open MPI 4.1.4 (ob1): the BTL module chosen for each peer.
    Mpi(
        "openmpi",
        "mpicc.openmpi",
        "pmix",
        OPENMPI_AS_ROOT,
        (("OMPI_MCA_btl_base_verbose", "100"),),
        r"Using (\w+) btl for send to .* on node",
        ("vader",),
    ),
)


def intel_mpi() -> Mpi:
    """The stack's Intel MPI with its flavors' settings (I_MPI_FABRICS=shm:ofi,
    the fabric's OFI provider). I_MPI_DEBUG=5 names the OFI provider, also
    within a node, where shm:ofi uses shared memory."""
    layout = vendor.environment("intel-oneapi-mpi")
    prepend = dict(layout["prepend"])
    runtime = next(r for r in stack.load().runtimes if r.name == "impi")
    settings = {s.name: s.value for s in runtime.env}
    env = (
        *layout["set"],
        ("LD_LIBRARY_PATH", prepend["LD_LIBRARY_PATH"]),
        *((k, v) for k, v in settings.items() if k != "SLURM_MPI_TYPE"),
    )
    return Mpi(
        "impi",
        f"{prepend['PATH']}/mpicc",
        settings["SLURM_MPI_TYPE"],
        env,
        (("I_MPI_DEBUG", "5"),),
        r"libfabric provider: (\S+)",
        transport_note="names only its OFI provider; within a node, I_MPI_FABRICS=shm:ofi takes shared memory",
    )


def mvapich2() -> Optional[Mpi]:
    """MVAPICH2 as the stack builds it (mpis.mvapich2 on the site's fabric),
    where Spack has installed it (with its flavors), started as they are
    (srun's pmi2). Its nemesis channel prints no transport: it takes shared
    memory within a node and its build's only netmod, TCP, between nodes."""
    if not (paths.spack_root() / "bin" / "spack").is_file():
        return None  # no Spack set up here (`make cluster-bench` needs only the venv): nothing it built either
    spec = stack.load().mpi_spec("mvapich2")
    prefix = spack.query("installed_prefix", json.dumps([spec]))[spec]
    if prefix is None:
        return None
    return Mpi(
        "mvapich2",
        f"{prefix}/bin/mpicc",
        "pmi2",
        (),
        (),
        r"(?!)",
        transport_note="ch3:nemesis prints no transport: shared memory within a node, its TCP netmod "
        "between (the build's only one); the latency ratio shows the first",
    )


def stack_mpis() -> Tuple[Mpi, ...]:
    """The stack's MPIs that are on this machine (MVAPICH2 once built)."""
    built = mvapich2()
    return (*DEBIAN_MPIS, intel_mpi(), *((built,) if built else ()))


@dataclass
class Measurement:
    mpi: str
    nodes: int
    hosts: List[str]
    latency_us: float
    latency_iterations: int  # fewer than asked: the repetition hit its time limit
    bandwidth_mbps: Dict[int, float]  # message bytes -> MB/s
    payload_bytes: int
    transports: List[str] = field(default_factory=list)  # between rank 0 and rank 1, as the MPI said
    note: str = ""  # e.g. FINALIZE_HANG
    transport_note: str = ""  # Mpi.transport_note


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


def measure(cluster, mpi: Mpi, exe: Path, nodes: int, args: Sequence[str] = BENCH_ARGS) -> Measurement:
    """Two ranks of `exe` with srun: on one node, or one rank on each of two."""
    env = dict(mpi.env + mpi.verbose_env)
    proc = cluster.command(
        "srun",
        f"--nodes={nodes}",
        "--ntasks=2",
        f"--mpi={mpi.srun_mpi}",
        f"--time={TIME_LIMIT}",
        f"--chdir={exe.parent}",
        str(exe),
        *args,
        timeout=RUN_TIMEOUT,
        env=env,
    )
    hung = proc.returncode != 0 and complete(proc.stdout) and "DUE TO TIME LIMIT" in proc.stderr
    if (proc.returncode != 0 and not hung) or not complete(proc.stdout):
        raise ClusterError(
            f"{mpi.name} pingpong on {nodes} node(s) failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
    found = parse(proc.stdout)
    return Measurement(
        mpi=mpi.name,
        nodes=nodes,
        hosts=found["hosts"][0][0].split(","),
        latency_us=float(found["latency_us"][0][0]),
        latency_iterations=int(found["latency_us"][0][1]["iterations"]),
        bandwidth_mbps={int(extra["bytes"]): float(value) for value, extra in found["bandwidth_MBps"]},
        payload_bytes=int(found["payload_bytes"][0][0]),
        transports=transports(mpi, proc.stdout + proc.stderr),
        note=FINALIZE_HANG if hung else "",
        transport_note=mpi.transport_note,
    )


def transports(mpi: Mpi, output: str) -> List[str]:
    """What the MPI's verbose output says it used between the ranks (a rank's
    path to itself left out)."""
    return sorted(set(re.findall(mpi.transport_pattern, output)) - {"self"})


def benchmark(cluster, mpis: Sequence[Mpi] = (), args: Sequence[str] = BENCH_ARGS) -> List[Measurement]:
    """Each MPI (default: the stack's) within a node and between two nodes."""
    results = []
    for mpi in mpis or stack_mpis():
        exe = build(mpi.mpicc, cluster.config.workdir / "bench" / f"pingpong-{mpi.name}", dict(mpi.env))
        results += [measure(cluster, mpi, exe, nodes, args) for nodes in (1, 2)]
    return results


def table(results: Sequence[Measurement]) -> str:
    """One row per run, then each MPI's inter-node / intra-node latency ratio."""
    sizes = sorted({size for r in results for size in r.bandwidth_mbps})
    header = (
        ["mpi", "nodes", "hosts", "latency_us", "iterations"]
        + [f"MBps@{size >> 20}MiB" for size in sizes]
        + ["transport"]
    )
    rows = [header]
    for r in results:
        rows.append(
            [r.mpi, str(r.nodes), ",".join(r.hosts), f"{r.latency_us:.2f}", str(r.latency_iterations)]
            + [f"{r.bandwidth_mbps.get(size, float('nan')):.0f}" for size in sizes]
            + [" ".join(r.transports) or "-"]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines += [f"{r.mpi} on {r.nodes} node(s): {r.note}" for r in results if r.note]
    lines += [f"{mpi} {note}" for mpi, note in dict.fromkeys((r.mpi, r.transport_note) for r in results) if note]
    for mpi in dict.fromkeys(r.mpi for r in results):
        ratio = latency_ratio(results, mpi)
        lines.append(f"{mpi}: inter-node latency / intra-node latency = {ratio:.1f}x")
    return "\n".join(lines)


def latency_ratio(results: Sequence[Measurement], mpi: str) -> float:
    by_nodes = {r.nodes: r.latency_us for r in results if r.mpi == mpi}
    return by_nodes[2] / by_nodes[1]
