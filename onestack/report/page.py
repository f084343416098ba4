"""The report's page: an HTML file (report/report.html.j2, HTML-escaped)
and a PNG chart per case and figure."""

from pathlib import Path
from typing import List, Optional

from onestack import paths, render

TEMPLATE = "report.html.j2"


def chart(
    out: Path, app: str, case: str, name: str, how: dict, results: List[dict], peak: Optional[dict], source: str
) -> str:
    """A bar per run, median and min-max, and the peak where the figure is
    GFLOPS; source (the report and the host's CPU) printed beneath, since a
    chart travels without its page."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if name in r.get("figures", {})]
    # The title names the application: the bars need only the flavor (long
    # names such as hpl/openblas-mvapich2 ran into each other).
    labels = [r["label"].removeprefix(f"{app}/").replace(" (", "\n(") for r in rows]
    medians = [r["figures"][name]["median"] for r in rows]
    spread = [
        [m - r["figures"][name]["min"] for m, r in zip(medians, rows)],
        [r["figures"][name]["max"] - m for m, r in zip(medians, rows)],
    ]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(rows), 3.6))
    colors = [
        {"reference": "#999999", "native": "#dd6b20", "baseline": "#805ad5"}.get(r["kind"], "#2b6cb0") for r in rows
    ]
    ax.bar(range(len(rows)), medians, yerr=spread, capsize=4, color=colors)
    if peak and how["unit"] == "GFLOPS":
        ax.axhline(
            peak["gflops"],
            color="#c53030",
            linestyle="--",
            label=f"measured FMA peak of {peak['cores']} cores: {peak['gflops']:.0f} GFLOPS",
        )
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel(f"{name} ({how['unit']}, {how['better']} is better)")
    ax.set_title(f"{app}: {case} (median, min-max bars)")
    fig.text(0.01, 0.01, source, fontsize=6, wrap=True, va="bottom")
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    file = f"{app}-{case}-{name}.png"
    fig.savefig(out / file, dpi=110)
    plt.close(fig)
    return file


def write(out: Path, **values) -> Path:
    """index.html; every value HTML-escaped (a flavor's error text included)."""
    return render.write(paths.REPO / "report", TEMPLATE, out / "index.html", **values)
