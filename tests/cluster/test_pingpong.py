"""The project's ping-pong on the cluster, for each MPI of the stack
(Debian's MPICH and Open MPI, the pinned Intel MPI, MVAPICH2 as Spack built
it) with its flavors' settings: within a node the MPI uses shared memory,
between nodes the network, and small-message latency shows it (at least 5x
lower within a node)."""

import pytest

from onestack.cluster import pingpong

# Shorter than the benchmark's (`make cluster-bench`): at most about 20 s
# per run on a loaded machine (1 s per repetition).
TEST_ARGS = ("3000", "10", "5", "1")
MPIS = [mpi.name for mpi in pingpong.DEBIAN_MPIS] + ["impi", "mvapich2"]
# What each names between the nodes: UCX's TCP on the node's interface, Open
# MPI's TCP BTL, and the OFI provider the site's fabric sets for Intel MPI.
# MVAPICH2's nemesis names none (pingpong.mvapich2): its latency speaks.
NETWORK = {"mpich": "tcp/eth0", "openmpi": "tcp", "impi": "tcp", "mvapich2": None}


@pytest.fixture(scope="module")
def mpis():
    return pingpong.stack_mpis()


@pytest.fixture(scope="module")
def results(virtual_cluster, mpis):
    measured = pingpong.benchmark(virtual_cluster, mpis, TEST_ARGS)
    print("\n" + pingpong.table(measured))
    return measured


def _runs(results, mpi):
    runs = [r for r in results if r.mpi == mpi]
    if not runs:
        pytest.skip(f"{mpi} is not on this machine (MVAPICH2: `make stack` builds it with its flavors)")
    return (next(r for r in runs if r.nodes == n) for n in (1, 2))


@pytest.mark.parametrize("mpi", MPIS)
def test_transport_within_and_between_nodes(mpi, mpis, results):
    within, between = _runs(results, mpi)
    assert len(set(within.hosts)) == 1 and len(set(between.hosts)) == 2
    shared_memory = next(m for m in mpis if m.name == mpi).shared_memory
    if shared_memory:
        assert within.transports and set(" ".join(within.transports).split()) <= set(shared_memory), within
    assert between.transports == ([NETWORK[mpi]] if NETWORK[mpi] else []), between


@pytest.mark.parametrize("mpi", MPIS)
def test_small_messages_are_5x_faster_within_a_node(mpi, results):
    _runs(results, mpi)
    ratio = pingpong.latency_ratio(results, mpi)
    assert ratio >= 5, f"{mpi}: inter-node latency only {ratio:.1f}x the intra-node one"
