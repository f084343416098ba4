"""The Intel MPI Benchmarks' output as onestack/cluster/imb.py reads it:
IMB-MPI1's tables among an MPI's own log lines, each crossing of MPIs
against its native run on the same nodes, and a pairing that fails beside
the others."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from onestack.cluster import imb
from onestack.cluster.config import ClusterError

# IMB-MPI1 2021.7's output (PingPong and Allreduce at 8 B, 1 and 4 MiB),
# with an MPI's log lines between the tables, as verbose settings print them.
OUTPUT = """\
rank=0 host=oscl-n1
rank=1 host=oscl-n2
#---------------------------------------------------
# Benchmarking PingPong
# #processes = 2
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            8         1000         0.36        22.53
      1048576           40      1015.23      1032.85
      4194304           10       933.91      4491.15
[1764100000.1] ucp_worker.c:1900 UCX INFO ep_cfg[1]: tag(tcp/eth0)
#----------------------------------------------------------------
# Benchmarking Allreduce
# #processes = 2
#----------------------------------------------------------------
       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]
            8         1000         0.48         0.86         0.67
      1048576           40      1681.19      1861.42      1771.31
      4194304           10      3349.72      3351.19      3350.46


# All processes entering MPI_Finalize
"""


def test_the_tables_are_read_by_benchmark_and_size():
    tables = imb._tables(OUTPUT)
    assert tables["PingPong"][8] == [0.36, 22.53]
    assert tables["PingPong"][4194304] == [933.91, 4491.15]
    assert tables["Allreduce"][1048576] == [1681.19, 1861.42, 1771.31]


def test_a_run_without_both_tables_did_not_end_well():
    class Proc:
        returncode, stderr = 0, ""

    assert imb._ended_well(Proc, imb._tables(OUTPUT))
    assert not imb._ended_well(Proc, imb._tables(OUTPUT.split("# Benchmarking Allreduce")[0]))


def _run(pairing: str, kind: str, nodes: int, latency: float, bandwidth: float, native: str = "") -> imb.Measurement:
    sizes = {n: bandwidth for n in imb.LARGE_BYTES}
    return imb.Measurement(pairing, kind, nodes, [], latency, sizes, {8: 1.0, 1 << 20: 1.0}, 0.5, native=native)


def test_each_crossing_is_set_against_its_native_run_on_the_same_nodes():
    results = [
        _run("impi", "native", 1, 0.5, 4000.0),
        _run("impi", "native", 2, 16.0, 1000.0),
        _run("mpi5>impi", "standard ABI", 1, 0.55, 4000.0, native="impi"),
        _run("mpi5>impi", "standard ABI", 2, 16.0, 900.0, native="impi"),
    ]
    costs = imb.crossing_costs(results)
    assert costs == [
        "mpi5>impi (standard ABI) on 1 node(s) against impi: latency 1.10x, 1 MiB bandwidth 1.00x",
        "mpi5>impi (standard ABI) on 2 node(s) against impi: latency 1.00x, 1 MiB bandwidth 0.90x",
    ]
    assert imb.latency_ratio(results, "impi") == pytest.approx(32.0)


def test_a_pairing_that_fails_is_named_and_the_others_still_measured(monkeypatch):
    """A run that hangs until its time limit (seen once: Open MPI through
    Wi4MPI) fails its own pairing; the pairings after it still run."""
    hung, fine = (imb.Pairing(SimpleNamespace(name=n), SimpleNamespace(name=n), "native") for n in ("openmpi", "mpich"))

    def measure(cluster, pairing, exe, nodes, repeat):
        if pairing is hung and nodes == 2:
            raise ClusterError(f"IMB-MPI1 of {pairing.name} on 2 node(s) failed (exit 143):\nDUE TO TIME LIMIT")
        return _run(pairing.name, "native", nodes, 1.0, 1000.0)

    monkeypatch.setattr(imb, "build", lambda mpi: Path("/nonexistent") / mpi.name)
    monkeypatch.setattr(imb, "measure", measure)
    measured = imb.benchmark(None, [hung, fine], imb.REDUCED)
    assert [(r.pairing, r.nodes) for r in measured.results] == [("mpich", 1), ("mpich", 2)]
    assert list(measured.failed) == ["openmpi"] and "DUE TO TIME LIMIT" in measured.failed["openmpi"]
    table = imb.table(measured.results, measured.failed)
    assert table.endswith("FAILED openmpi: IMB-MPI1 of openmpi on 2 node(s) failed (exit 143):"), table
