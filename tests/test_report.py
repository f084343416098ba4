"""The benchmark report's code path, on the reduced run (small sizes, one run
each): it measures every published flavor and the Netlib reference, writes
the HTML page and its charts, and prints its goals with their figures. (Its
arithmetic and goals are checked in tests/fast/test_report.py.)"""

import json
import subprocess
from html import unescape

import pytest
from conftest import onestack, why_no_cluster

from onestack import report, stack
from onestack.cluster import imb
from onestack.modules import dispatch, publish
from onestack.report import peak
from onestack.stack import cpus
from tests.fast import dispatch_tree as tree


@pytest.fixture(scope="module")
def reduced():
    """One reduced report for the tests below: its output, folder and results."""
    proc = onestack("report", "--reduced", check=True)
    out = report.latest()
    return proc, out, json.loads((out / "results.json").read_text())


def test_reduced_report_measures_every_published_flavor(reduced, published_flavors):
    proc, out, results = reduced
    measured = {r["label"]: r for a in results["apps"] for case in a["cases"].values() for r in case["results"]}
    for module in published_flavors:
        assert module in measured, f"{module} is published but not in the report"
        assert measured[module]["figures"], f"{module}: no figure measured: {measured[module]['error']}"
    reference = [r for r in measured.values() if r["kind"] == "reference"]
    assert reference and reference[0]["figures"]["hpl_gflops"]["median"] > 0, "the Netlib baseline was not measured"
    measured_peak = results["peak"]
    assert len(measured_peak["samples"]) == 2 * peak.SAMPLES and measured_peak["gflops"] == max(
        measured_peak["samples"]
    )
    html = (out / "index.html").read_text()
    charts = [chart for a in results["apps"] for case in a["cases"].values() for chart in case["charts"]]
    assert charts, "the report drew no chart"
    for chart in charts:
        assert (out / chart).stat().st_size > 1000 and chart in html
    netlib = next(g for g in results["goals"] if g["goal"].startswith("the Netlib reference >= 5x slower"))
    assert not netlib["verdict"].startswith("not measured"), netlib
    # Each native twin against its fat flavor in alternating pairs (HPL's is built by make test).
    hpl = next(a for a in results["apps"] if a["app"] == "hpl")
    [pairs] = hpl["native_pairs"]
    assert pairs["error"] is None and pairs["pairs"] == 3 and len(pairs["ratios"]) == 3, pairs
    assert "Fat against native, in alternating pairs" in html
    # The peak search: a reduced run tries each layout of HPL alone (xhpl) at the test size.
    searched = hpl["peak_search"]
    assert len(searched["trials"]) == 2 and searched["best"]["gflops"] > 0, searched
    assert "The peak, sought with" in html
    # Each MKL flavor also runs without its preloaded library (the remedy's before and after).
    for module in (m for m in published_flavors if "/mkl-" in m):
        assert measured[f"{module} (without onestack-mkl-cpu-path)"]["figures"], module
    # Each flavor with level builds also runs on its baseline build alone (what the levels buy).
    release = publish.current_release()
    for flavor in stack.load().select(published_flavors):
        if len(dispatch.published_levels(release, flavor)) > 1:
            row = measured[f"{flavor.module_name} ({cpus.baseline_level()} build only)"]
            assert row["figures"], f"{flavor.module_name} on its baseline build: {row['error']}"
    # The reduced run never rewrites the site default (only a full report does).
    assert all(a["default_change"] is None for a in results["apps"])
    assert onestack("report-path", check=True).stdout.strip() == str(out)


def test_the_report_measures_the_interconnect_of_every_mpi(reduced):
    """The MPI benchmarks on the virtual cluster: every MPI of the stack and
    every crossing of MPIs, each crossing against its native build; where
    the cluster cannot run here, a skip that says why, never a pass."""
    _, out, results = reduced
    links = results["interconnect"]
    if "skipped" in links:
        # A skip only where the cluster cannot run at all; else its failure is the test's.
        assert why_no_cluster(), f"the report's interconnect measurement failed: {links['skipped']}"
        pytest.skip(f"the report's interconnect measurement did not run: {why_no_cluster()}")
    assert not links["failed"], f"pairings that failed: {links['failed']}"
    assert set(links["latency_ratios"]) == {p.name for p in imb.pairings()}, links["latency_ratios"]
    crossings = [p for p in imb.pairings() if p.kind != "native"]
    assert len(links["crossing_costs"]) == 2 * len(crossings), links["crossing_costs"]
    assert links["table"] in unescape((out / "index.html").read_text())


@pytest.mark.parametrize("generation", cpus.generations(), ids=[g["name"] for g in cpus.generations()])
def test_the_peak_is_measured_on_every_generation_of_the_site(generation, tmp_path):
    """report/fma_peak.c under qemu emulating each generation (as far as
    qemu goes: AVX2 at most): the vectors it has (FMA from x86-64-v3 on;
    none on the baseline, whose multiply and add it times instead, on AVX's
    vectors on a Sandy Bridge), never an illegal instruction."""
    level = tree.emulated_level(generation)
    exe = tmp_path / "fma_peak"
    subprocess.run(["gcc", "-O3", "-o", str(exe), str(peak.FMA_PEAK_SOURCE)], check=True)
    ran = subprocess.run(
        ["qemu-x86_64", "-cpu", generation["qemu"], str(exe), "100000"], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, f"{generation['name']}: exit {ran.returncode}: {ran.stderr[-500:]}"
    isa, gflops = ran.stdout.split()[:2]
    wanted = "avx2" if level == "x86-64-v3" else "avx" if generation["isa"] == "AVX" else "sse2"
    assert isa == wanted and float(gflops) > 0, f"{generation['name']}: {ran.stdout}"
