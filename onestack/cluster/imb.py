"""The Intel MPI Benchmarks (IMB-MPI1) on the virtual cluster: the figures
sites compare MPIs by, within a node and between two: PingPong's latency (8
bytes) and bandwidth (1 and 4 MiB), Allreduce at 8 bytes and 1 MiB, and the
start-up of a 2-rank job. For each MPI of the stack (onestack/cluster/mpis.py),
and for the executables that cross MPIs, each beside the native build of the
MPI that served it: one built for the MPI-5 standard ABI, run on MPICH 5 and
on Intel MPI; one built with Debian's MPICH, run on Open MPI through the
translation layer.

The source is the version components.yaml `mpi_benchmarks` names, admitted
into the mirror by the sha256 Spack's builtin recipe declares for it. IMB's
own Makefile builds it with each MPI's C++ wrapper (as that recipe does)
into the cache (bench_dir), not Spack: a Spack build per MPI would put a root per
MPI into the site environment, whose every solve would then carry a
benchmark that no flavor links."""

import functools
import hashlib
import math
import os
import re
import shutil
import signal
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from onestack import commands, files, paths, spack, stack
from onestack.cluster import mpis
from onestack.cluster.config import ClusterError
from onestack.cluster.mpis import Mpi
from onestack.spack import mirror

PROGRAM = "IMB-MPI1"
# Message sizes (bytes): the latency's, and the bandwidth's and the large
# allreduce's (a 1 MiB allreduce is the figure sites quote beside the 8-byte one).
LATENCY_BYTES = 8
LARGE_BYTES = (1 << 20, 4 << 20)
# IMB's repetitions per size and the seconds after which a size stops early
# (its -iter and -time): full figures, and the test suite's (a loaded machine
# must still end each run within seconds: -time bounds the large sizes, the
# small ones take milliseconds at any count). Thousands at least: Intel MPI's
# first few hundred small messages within a node are slow (2.6 us a round
# trip's half over 200 repetitions, 0.22 us over 5000, measured here).
FULL = ("5000", "2")
REDUCED = ("5000", "0.5")
TIME_LIMIT = "2"  # each run's Slurm time limit (minutes)
RUN_TIMEOUT = 240  # seconds srun may take, beyond which the run failed
# Each rank names its host before the benchmark starts (IMB names none).
WITH_HOST = 'echo "rank=$SLURM_PROCID host=$(uname -n)"; exec "$@"'


@dataclass(frozen=True)
class Pairing:
    """The benchmark built with one MPI's wrappers and run on another's (or
    its own) libraries; `native` names the pairing it is measured against."""

    built: Mpi
    runs_on: Mpi
    kind: str  # native | standard ABI | translated
    native: str = ""

    @property
    def name(self) -> str:
        return self.runs_on.name if self.kind == "native" else f"{self.built.name}>{self.runs_on.name}"


@dataclass
class Measurement:
    pairing: str
    kind: str
    nodes: int
    hosts: List[str]
    latency_us: float
    bandwidth_mbps: Dict[int, float]  # PingPong, bytes -> MB/s
    allreduce_us: Dict[int, float]  # bytes -> mean time over the ranks
    start_s: float  # a 2-rank job of one barrier, srun to its end
    transports: List[str] = field(default_factory=list)  # between rank 0 and rank 1, as the MPI said
    library: str = ""  # the MPI library the run's output names
    note: str = ""  # e.g. mpis.FINALIZE_HANG
    transport_note: str = ""
    native: str = ""  # a crossing's native pairing, on the MPI that served it
    program: str = ""  # the executable that ran


# IMB-MPI1's build: about a minute of 2 cores; a compiler that hangs ends here.
BUILD_TIMEOUT = 15 * 60


@functools.lru_cache(maxsize=None)
def source() -> Dict[str, str]:
    """name@version -> the sha256 its recipe declares (for `make mirror`),
    asked of Spack once per process (each build needs it)."""
    spec = stack.load().components["mpi_benchmarks"]
    return {spec: spack.query("version_archives", spec)[spec]["sha256"]}


def bench_dir() -> Path:
    """Where the builds are kept, from one run and one cluster to the next
    (the nodes see this machine's filesystem)."""
    return paths.cache() / "mpi-benchmarks"


def _unpacked() -> Path:
    """The source, unpacked once per archive."""
    ((spec, sha256),) = source().items()
    archive = mirror.archive_path(spec, sha256)
    folder = bench_dir() / f"imb-{sha256[:12]}"
    if not folder.is_dir():
        with files.replacing(folder) as partial, tarfile.open(archive) as tar:
            partial.mkdir()
            tar.extractall(partial, filter="data")
    return next(folder.iterdir())


def build(mpi: Mpi) -> Path:
    """IMB-MPI1 built with mpi's wrappers (reused while the source and the
    wrappers are the same): IMB's Makefile in a copy of its sources."""
    source_dir = _unpacked()
    wrapper = Path(shutil.which(mpi.mpicxx) or mpi.mpicxx)
    if not wrapper.is_file():
        raise ClusterError(f"{mpi.name}'s C++ wrapper {mpi.mpicxx} is not on this machine")
    identity = f"{source_dir}\n{mpi.mpicc}\n{wrapper}\n{wrapper.stat().st_mtime}"
    exe = bench_dir() / f"{PROGRAM}-{mpi.name}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
    if exe.is_file():
        return exe
    with tempfile.TemporaryDirectory(dir=bench_dir()) as tmp:
        work = Path(tmp)
        for folder in ("src_cpp", "src_c"):  # src_cpp includes headers of ../src_c
            shutil.copytree(source_dir / folder, work / folder)
        code, out, err = commands.run_whole(
            ["make", "-C", str(work / "src_cpp"), "-f", "Makefile", "-j2", "TARGET=MPI1"]
            + [f"CC={mpi.mpicc}", f"CXX={mpi.mpicxx}"],
            BUILD_TIMEOUT,
            env={**os.environ, **dict(mpi.env)},
        )
        if code != 0:
            ended = f"no result after {BUILD_TIMEOUT} s" if code == -signal.SIGKILL else "failed"
            raise ClusterError(f"{PROGRAM} with {mpi.name}'s {mpi.mpicxx} {ended}:\n{out[-1500:]}{err[-1500:]}")
        with files.replacing(exe) as partial:
            shutil.copy2(work / "src_cpp" / PROGRAM, partial)
    return exe


def pairings() -> List[Pairing]:
    """Each MPI of the stack on itself, MPICH 5 too, and Open MPI 6 where it
    is built; the standard-ABI build on each of these three and on Intel MPI;
    Debian's MPICH build on each translation layer installed here."""
    mpich5, built = mpis.mpich5(), [m for m in (mpis.openmpi6(),) if m]
    natives = [Pairing(m, m, "native") for m in (*mpis.stack_mpis(), mpich5, *built)]
    abi = mpis.standard_abi()
    crossing = [Pairing(abi, m, "standard ABI", m.name) for m in (mpich5, mpis.intel_mpi(), *built)]
    mpich = next(m for m in mpis.DEBIAN_MPIS if m.name == "mpich")
    for runtime in stack.load().runtimes:
        layer = mpis.translated(runtime.name) if runtime.translator else None
        if layer is not None:
            crossing.append(Pairing(mpich, layer, "translated", runtime.to))
    return natives + crossing


def _srun(cluster, pairing: Pairing, nodes: int, *argv: str, env: dict):
    """The benchmark's job, and its nodes back in service after it, as
    Cluster.run_job leaves them: a job whose kill at its time limit outlives
    SIGKILL drains its node, and every later job needing it would wait out
    its own limit."""
    runs_on = pairing.runs_on
    proc = cluster.command(
        "srun",
        f"--nodes={nodes}",
        "--ntasks=2",
        f"--mpi={runs_on.srun_mpi}",
        f"--time={TIME_LIMIT}",
        *argv,
        timeout=RUN_TIMEOUT,
        env={**dict(runs_on.env), **env},
    )
    for done in cluster.return_to_service():
        print(f"==> imb: {pairing.name}: {done}", flush=True)
    return proc


def _tables(output: str) -> Dict[str, Dict[int, List[float]]]:
    """IMB's tables: benchmark -> message bytes -> the row's figures after
    #repetitions (PingPong: t[usec], Mbytes/sec; Allreduce: t_min, t_max, t_avg)."""
    tables: Dict[str, Dict[int, List[float]]] = {}
    current = None
    for line in output.splitlines():
        heading = re.match(r"# Benchmarking (\S+)", line)
        if heading:
            current = tables.setdefault(heading.group(1), {})
        elif current is not None and re.fullmatch(r"\s+\d+\s+\d+(\s+[\d.]+)+\s*", line):
            numbers = line.split()
            current[int(numbers[0])] = [float(n) for n in numbers[2:]]
    return tables


def _ended_well(proc, tables: dict) -> bool:
    """IMB printed both tables; a run that then hung in MPI_Finalize (Debian's
    MPICH between nodes) and was ended by the time limit counts, said so."""
    return {"PingPong", "Allreduce"} <= set(tables) and (proc.returncode == 0 or "DUE TO TIME LIMIT" in proc.stderr)


def _start_seconds(cluster, pairing: Pairing, exe: Path, nodes: int) -> float:
    """The job's seconds, srun to its end; NaN for a job that hung in
    MPI_Finalize (its time limit is no start-up figure)."""
    start = time.monotonic()
    proc = _srun(cluster, pairing, nodes, str(exe), "Barrier", "-npmin", "2", "-iter", "1", env={})
    seconds = time.monotonic() - start
    if proc.returncode != 0 and "DUE TO TIME LIMIT" not in proc.stderr:
        raise ClusterError(
            f"{pairing.name}: a job of one barrier failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    return seconds if proc.returncode == 0 else math.nan


def measure(cluster, pairing: Pairing, exe: Path, nodes: int, repeat: Sequence[str] = FULL) -> Measurement:
    """Two ranks of the benchmark with srun: on one node, or one on each of two."""
    lengths = exe.parent / "msglen"
    lengths.write_text("".join(f"{n}\n" for n in (LATENCY_BYTES, *LARGE_BYTES)))
    runs_on = pairing.runs_on
    args = ["PingPong", "Allreduce", "-msglen", str(lengths), "-npmin", "2", "-iter", repeat[0], "-time", repeat[1]]
    proc = _srun(
        cluster,
        pairing,
        nodes,
        f"--chdir={exe.parent}",
        "sh",
        "-c",
        WITH_HOST,
        "imb",
        str(exe),
        *args,
        env=dict(runs_on.verbose_env),
    )
    tables = _tables(proc.stdout)
    if not _ended_well(proc, tables):
        raise ClusterError(
            f"{PROGRAM} of {pairing.name} on {nodes} node(s) failed (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
    ranks = dict(re.findall(r"^rank=(\d+) host=(\S+)$", proc.stdout, re.MULTILINE))
    return Measurement(
        pairing=pairing.name,
        kind=pairing.kind,
        nodes=nodes,
        hosts=[ranks[r] for r in sorted(ranks)],
        latency_us=tables["PingPong"][LATENCY_BYTES][0],
        bandwidth_mbps={n: tables["PingPong"][n][1] for n in LARGE_BYTES},
        allreduce_us={n: tables["Allreduce"][n][2] for n in (LATENCY_BYTES, LARGE_BYTES[0])},
        start_s=_start_seconds(cluster, pairing, exe, nodes),
        transports=mpis.transports(runs_on, proc.stdout + proc.stderr),
        library=mpis.library(runs_on, proc.stdout + proc.stderr),
        note="" if proc.returncode == 0 else mpis.FINALIZE_HANG,
        transport_note=runs_on.transport_note,
        native=pairing.native,
        program=str(exe),
    )


@dataclass
class Benchmark:
    """The runs of every pairing that ran, and why each other one failed
    (its build, a run, or a hang ended by its time limit): one pairing's
    failure never takes the others' figures with it."""

    results: List[Measurement]
    failed: Dict[str, str]  # pairing -> the error, with the run's output


def benchmark(cluster, chosen: Optional[Sequence[Pairing]] = None, repeat: Sequence[str] = FULL) -> Benchmark:
    """Each pairing (default: all) within a node and between two nodes."""
    measured = Benchmark([], {})
    for pairing in pairings() if chosen is None else chosen:
        try:
            exe = build(pairing.built)
            measured.results += [measure(cluster, pairing, exe, nodes, repeat) for nodes in (1, 2)]
        except ClusterError as err:
            measured.failed[pairing.name] = str(err)
    return measured


def _row(r: Measurement) -> List[str]:
    return [
        r.pairing,
        r.kind,
        str(r.nodes),
        ",".join(r.hosts),
        f"{r.latency_us:.2f}",
        *(f"{r.bandwidth_mbps[n]:.0f}" for n in LARGE_BYTES),
        *(f"{r.allreduce_us[n]:.2f}" for n in (LATENCY_BYTES, LARGE_BYTES[0])),
        f"{r.start_s:.2f}",
        " ".join(r.transports) or "-",
    ]


HEADER = [
    "run",
    "kind",
    "nodes",
    "hosts",
    "latency_us",
    "MBps@1MiB",
    "MBps@4MiB",
    "allreduce8_us",
    "allreduce1MiB_us",
    "start_s",
    "transport",
]


def table(results: Sequence[Measurement], failed: Optional[Dict[str, str]] = None) -> str:
    """One row per run, then what each run's MPI said of itself, the ratios
    (between nodes against within, each crossing against its native), and
    each pairing that failed with the first line of its error."""
    rows = [HEADER] + [_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines += [f"{r.pairing} on {r.nodes} node(s): {r.note}" for r in results if r.note]
    lines += [f"{r.pairing}: served by {r.library}" for r in results if r.library and r.nodes == 1]
    lines += [f"{name} {note}" for name, note in dict.fromkeys((r.pairing, r.transport_note) for r in results) if note]
    for name in dict.fromkeys(r.pairing for r in results):
        lines.append(f"{name}: inter-node latency / intra-node latency = {latency_ratio(results, name):.1f}x")
    lines += crossing_costs(results)
    lines += [f"FAILED {name}: {error.splitlines()[0]}" for name, error in (failed or {}).items()]
    return "\n".join(lines)


def latency_ratio(results: Sequence[Measurement], pairing: str) -> float:
    by_nodes = {r.nodes: r.latency_us for r in results if r.pairing == pairing}
    return by_nodes[2] / by_nodes[1]


def crossing_costs(results: Sequence[Measurement]) -> List[str]:
    """Each crossing's 8-byte latency and 1 MiB bandwidth against the native
    build on the MPI that served it, on the same nodes, in this one run."""
    native = {(r.pairing, r.nodes): r for r in results if r.kind == "native"}
    lines = []
    for r in results:
        base = native.get((r.native, r.nodes))
        if base:
            bandwidth = r.bandwidth_mbps[LARGE_BYTES[0]] / base.bandwidth_mbps[LARGE_BYTES[0]]
            lines.append(
                f"{r.pairing} ({r.kind}) on {r.nodes} node(s) against {base.pairing}: "
                f"latency {r.latency_us / base.latency_us:.2f}x, 1 MiB bandwidth {bandwidth:.2f}x"
            )
    return lines
