"""The report's MPI ping-pong: each MPI of the stack within a node and
between two nodes of the virtual cluster (onestack/cluster/pingpong.py),
on the site's cluster if `make cluster` left it up, else on one started for
the report and taken down after it. Where the cluster cannot run (not root,
no namespaces), the report says why instead."""

import contextlib
from dataclasses import asdict
from typing import Sequence

from onestack import cluster
from onestack.cluster import config, pingpong
from onestack.paths import SetupError

# The test suite's reduced report: about 1 s per repetition.
REDUCED_ARGS = ("3000", "10", "5", "1")


@contextlib.contextmanager
def _cluster(conf: config.Config):
    if cluster.leftovers(conf):
        yield cluster.attach(conf)
    else:
        with cluster.running(conf) as started:
            yield started


def measure(reduced: bool) -> dict:
    """{"table": printed figures, "results": [...]} or {"skipped": why}."""
    args: Sequence[str] = REDUCED_ARGS if reduced else pingpong.BENCH_ARGS
    try:
        conf = config.load(config.DEFAULT_FILE)
        with _cluster(conf) as running:
            results = pingpong.benchmark(running, args=args)
    except (config.ClusterError, SetupError) as err:
        return {"skipped": f"not measured: {err}"}
    ratios = {mpi: pingpong.latency_ratio(results, mpi) for mpi in dict.fromkeys(r.mpi for r in results)}
    return {"table": pingpong.table(results), "results": [asdict(r) for r in results], "latency_ratios": ratios}
