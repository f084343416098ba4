"""The benchmark report's code path, on the reduced run (small sizes, one run
each): it measures every published flavor and the Netlib reference, writes
the HTML page and its charts, and prints its goals with their figures."""

import json

from conftest import onestack
from onestack import report


def test_reduced_report_measures_every_published_flavor(published_flavors):
    proc = onestack("report", "--reduced", check=True)
    out = report.latest()
    results = json.loads((out / "results.json").read_text())
    measured = {r["label"]: r for a in results["apps"] for case in a["cases"].values() for r in case["results"]}
    for module in published_flavors:
        assert module in measured, f"{module} is published but not in the report"
        assert measured[module]["figures"], f"{module}: no figure measured: {measured[module]['error']}"
    reference = [r for r in measured.values() if r["kind"] == "reference"]
    assert reference and reference[0]["figures"]["hpl_gflops"]["median"] > 0, "the Netlib baseline was not measured"
    peak = results["peak"]
    assert len(peak["samples"]) == 2 * report.PEAK_SAMPLES and peak["gflops"] == max(peak["samples"]) > 0
    html = (out / "index.html").read_text()
    for a in results["apps"]:
        for case in a["cases"].values():
            for chart in case["charts"]:
                assert (out / chart).stat().st_size > 1000 and chart in html
    assert "Netlib baseline >= 5x slower" in proc.stdout
    # The reduced run never rewrites the site default (only a full report does).
    assert all(a["default_change"] is None for a in results["apps"])
    assert onestack("report-path", check=True).stdout.strip() == str(out)


def test_the_peak_goal_is_not_judged_when_hpl_outruns_the_measured_peak():
    """A peak measured while the host took a CPU (19.5 GFLOPS, where the
    CPU does 39.7) made the report print "163% met"; the best sample, before
    or after the runs, is the peak, and a peak below an HPL run is no yardstick."""
    disturbed = {"isa": "avx2", "cores": 2, "samples": [19.5, 19.6]}
    goal = report.peak_goal(31.7, 32.3, report.combined_peak(disturbed, {"samples": [19.4]}))
    assert goal["verdict"].startswith("not judged"), goal
    goal = report.peak_goal(31.7, 32.3, report.combined_peak(disturbed, {"samples": [39.7, 39.2]}))
    assert goal["verdict"] == "MISSED" and goal["figure"].endswith("= 80%"), goal


def _two_flavors(better: str, a: dict, b: dict) -> dict:
    return {"case": {"figures": {"figure": {"better": better}},
                     "results": [{"name": "app/a", "figures": {"figure": a}}, {"name": "app/b", "figures": {"figure": b}}]}}


def test_the_default_changes_only_for_a_flavor_faster_beyond_the_spread():
    """This host's full report (3 runs each): hpl/openblas-mvapich2 33.5
    [31.0-33.7] GFLOPS against the default hpl/mkl-mpich's 30.2 [27.2-31.1]
    is a lead within the noise, and the default stays."""
    overlapping = _two_flavors("higher", {"min": 31.0, "max": 33.7}, {"min": 27.2, "max": 31.1})
    assert not report.clearly_faster("app/a", "app/b", overlapping)
    apart = _two_flavors("higher", {"min": 31.2, "max": 33.7}, {"min": 27.2, "max": 31.1})
    assert report.clearly_faster("app/a", "app/b", apart)
    assert not report.clearly_faster("app/b", "app/a", apart)
    assert report.clearly_faster("app/a", "app/unbuilt", apart), "a default not measured here is no yardstick"
    times = _two_flavors("lower", {"min": 31.8, "max": 32.9}, {"min": 33.0, "max": 33.8})
    assert report.clearly_faster("app/a", "app/b", times) and not report.clearly_faster("app/b", "app/a", times)


def test_each_round_starts_one_further_down_the_list():
    """In a fixed order, the flavor that always ran first (after the previous
    case) read 8-17% slower than its native twin, which side by side it was not."""
    contestants = [{"name": n} for n in ("fat", "native", "reference")]
    rounds = [[c["name"] for c in report._round_order(contestants, i)] for i in range(4)]
    assert rounds[:3] == [["fat", "native", "reference"], ["native", "reference", "fat"],
                          ["reference", "fat", "native"]]
    assert rounds[3] == rounds[0]
