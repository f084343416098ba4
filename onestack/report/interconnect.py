"""The report's MPI benchmarks: each MPI of the stack, and each crossing of
MPIs (the standard ABI, the translation layers), within a node and between
two nodes of the virtual cluster (onestack/cluster/imb.py),
on the site's cluster if `make cluster` left it up, else on one started for
the report and taken down after it. Where the cluster cannot run (not root,
no namespaces), the report says why instead."""

import contextlib
from dataclasses import asdict

from onestack import cluster
from onestack.cluster import config, imb
from onestack.errors import OnestackError


@contextlib.contextmanager
def _cluster(conf: config.Config):
    if cluster.leftovers(conf):
        yield cluster.attach(conf)
    else:
        with cluster.running(conf) as started:
            yield started


def measure(reduced: bool) -> dict:
    """{"table": printed figures, "results": [...], "latency_ratios": ...,
    "failed": {pairing: error}} or {"skipped": why} (no cluster here, no
    benchmark source, no MPI)."""
    try:
        conf = config.load(config.DEFAULT_FILE)
        with _cluster(conf) as running:
            measured = imb.benchmark(running, repeat=imb.REDUCED if reduced else imb.FULL)
    except OnestackError as err:
        return {"skipped": f"not measured: {err}"}
    results = measured.results
    ratios = {name: imb.latency_ratio(results, name) for name in dict.fromkeys(r.pairing for r in results)}
    return {
        "table": imb.table(results, measured.failed),
        "results": [asdict(r) for r in results],
        "latency_ratios": ratios,
        "crossing_costs": imb.crossing_costs(results),
        "failed": measured.failed,
    }
