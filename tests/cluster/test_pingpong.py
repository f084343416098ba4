"""The project's ping-pong on the cluster, for Debian's MPICH and Open MPI:
within a node the MPI uses shared memory, between nodes the network, and
small-message latency shows it (at least 5x lower within a node)."""

import pytest

from onestack.cluster import pingpong

# Shorter than the benchmark's (`python -m onestack.cluster bench`): at most
# about 20 s per run on a loaded machine (1 s per repetition).
TEST_ARGS = ("3000", "10", "5", "1")
SHARED_MEMORY = {"mpich": {"sysv/memory", "posix/memory", "cma/memory"}, "openmpi": {"vader"}}
NETWORK = {"mpich": "tcp/eth0", "openmpi": "tcp"}


@pytest.fixture(scope="module")
def results(virtual_cluster):
    measured = pingpong.benchmark(virtual_cluster, pingpong.DEBIAN_MPIS, TEST_ARGS)
    print("\n" + pingpong.table(measured))
    return measured


@pytest.mark.parametrize("mpi", [mpi.name for mpi in pingpong.DEBIAN_MPIS])
def test_transport_within_and_between_nodes(mpi, results):
    within, between = (next(r for r in results if r.mpi == mpi and r.nodes == n) for n in (1, 2))
    assert len(set(within.hosts)) == 1 and len(set(between.hosts)) == 2
    assert within.transports and set(" ".join(within.transports).split()) <= SHARED_MEMORY[mpi], within
    assert between.transports == [NETWORK[mpi]], between


@pytest.mark.parametrize("mpi", [mpi.name for mpi in pingpong.DEBIAN_MPIS])
def test_small_messages_are_5x_faster_within_a_node(mpi, results):
    ratio = pingpong.latency_ratio(results, mpi)
    assert ratio >= 5, f"{mpi}: inter-node latency only {ratio:.1f}x the intra-node one"
