"""The flavor status table: one row per cell of the flavor matrix, saying
whether it concretizes, whether it is built, whether its test problems pass,
and if not, why. Nothing is left out: a cell that cannot be built here says so."""

import fcntl
import json
from pathlib import Path
from typing import Dict, List, Tuple

from onestack import files, paths, problems, spack, stack
from onestack.problems import check
from onestack.stack import cover, site
from onestack.stack.flavors import Flavor, package_name


def results_dir() -> Path:
    """Test problem outcomes, one JSON per flavor and case (written by tests)."""
    return paths.prefix() / "results"


def record_result(module: str, case: str, outcome: problems.Outcome) -> Tuple[str, list]:
    """A run's verdict for the flavor table's tests column, recorded whatever
    it was (a failed run too: an earlier pass must not stay): failed, not
    checked (none of its checks could be made, each says why) or passed.
    Returns the run's failure ("" if none) and its checks."""
    failure = outcome.failure()
    checks = [] if failure else outcome.checks()
    if failure or not all(c.passed for c in checks):
        verdict = "failed"
    elif check.none_made(checks):
        verdict = "not checked"
    else:
        verdict = "passed"
    said = [failure[:300]] if failure else [str(c) for c in checks]
    files.write_text(
        results_dir() / module / f"{case}.json", json.dumps({"verdict": verdict, "checks": said}, indent=1)
    )
    return failure, checks


def declared_compilers(every: List[Flavor]) -> Dict[str, dict]:
    """Spack `packages:` externals of the compilers the site lacks, as
    components.yaml declares them (site_external), by flavor compiler."""
    matrix = stack.load()
    absent = {f.compiler for f in every if matrix.site.why_unavailable("compilers", f.compiler)}
    return {name: matrix.components["compilers"][name]["site_external"] for name in absent}


def solved_here(every: List[Flavor]) -> List[Flavor]:
    """The cells this run solves. The build lists (`make flavors`, the
    pipeline's concretize job): every cell. The ci_build lists (`make
    test`): the cells the lists build (spack.lock holds them: no solve) and,
    of the others, a cover of what they add: each application's compilers,
    MPIs, math libraries, threading and kinds of build once: each cell is a
    solve of its own, and the whole matrix would take much of CI's budget
    (docs/site-staff/ci.md)."""
    if not stack.ci_lists():
        return every
    built = {f.module_name for f in stack.load().select(ci=True)}
    traits = {f.module_name: cell_traits(f) for f in every}
    had = set().union(*(traits[m] for m in built if m in traits))
    chosen = built | set(cover.cover({m: t for m, t in traits.items() if m not in built}, seen=had))
    return [f for f in every if f.module_name in chosen]


def cell_traits(flavor: Flavor) -> set:
    """What a cell brings to the solver that another of its application may not."""
    app = flavor.app.module
    return {
        (app, "compiler", flavor.compiler),
        (app, "mpi", flavor.mpi),
        (app, "math", flavor.math),
        (app, "threads", flavor.threads),
        (app, "kind", flavor.kind),
    }


def concretize_cells(every: List[Flavor]) -> Dict[str, dict]:
    """Concretize each cell on its own (a solve each), cached in
    $ONESTACK_CACHE cell by cell until the stack's inputs change. A second
    caller (the pipeline's `make flavors` while `make test` fills the cache
    beside the tests) waits for the first instead of solving again, then
    solves only what the first did not."""
    cache = site.cache_dir() / "flavor-status" / f"concretize-{spack.inputs_fingerprint()}.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cells = json.loads(cache.read_text()) if cache.is_file() else {}
        missing = [f for f in every if f.spack_spec not in cells]
        if missing:
            cells.update(_concretize_each(missing))
            files.write_text(cache, json.dumps(cells))
    return _with_install_state({f.spack_spec: cells[f.spack_spec] for f in every})


def _concretize_each(every: List[Flavor]) -> Dict[str, dict]:
    """Each cell solved on its own. A compiler absent here is concretized
    against its declared external (Spack 1.x needs the compiler installed or
    external), only for its own flavors."""
    print(f"==> flavors: concretizing {len(every)} cells, each on its own", flush=True)
    spack.not_buildable()
    declared = declared_compilers(every)
    present = [f.spack_spec for f in every if f.compiler not in declared]
    # A cell the environment has solved from today's recipes (the built
    # lists) is taken from spack.lock: the same solve, minutes saved.
    result = spack.query("concretize_each", json.dumps(present), json.dumps({}), json.dumps(spack.lock_is_current()))
    if declared:
        packages = {package_name(external["spec"]): {"externals": [external]} for external in declared.values()}
        absent = [f.spack_spec for f in every if f.compiler in declared]
        result.update(spack.query("concretize_each", json.dumps(absent), json.dumps({"packages": packages})))
    return result


def _with_install_state(cells: Dict[str, dict]) -> Dict[str, dict]:
    """Cached cells with whether each is installed now: a build since the
    cache was written must show as built."""
    hashes = [cell["hash"] for cell in cells.values() if cell["ok"]]
    installed = spack.query("installed", json.dumps(hashes))
    for cell in cells.values():
        if cell["ok"]:
            cell["installed"] = installed[cell["hash"]]
    return cells


def _tests(module: str) -> str:
    """Outcomes of the application's current test problems, the latest run
    of each (a renamed case's old result does not count, nor a record
    without a verdict, written by an older onestack)."""
    cases = problems.load(module.split("/")[0])
    records = [json.loads(f.read_text()) for f in sorted((results_dir() / module).glob("*.json")) if f.stem in cases]
    verdicts = [r["verdict"] for r in records if "verdict" in r]
    if not verdicts:
        return "not run"
    said = f"{verdicts.count('passed')}/{len(verdicts)} passed"
    if verdicts.count("not checked"):
        said += f", {verdicts.count('not checked')} not checked"
    return said if "failed" not in verdicts else f"{said}, {verdicts.count('failed')} FAILED"


def rows(every: List[Flavor]) -> List[dict]:
    cells = concretize_cells(solved_here(every))
    declared = declared_compilers(every)
    return [
        _row(flavor, cells[flavor.spack_spec], declared) if flavor.spack_spec in cells else _unsolved_row(flavor)
        for flavor in every
    ]


def _row(flavor: Flavor, cell: dict, declared: Dict[str, dict]) -> dict:
    built = cell.get("installed", False)
    if not cell["ok"]:
        note = f"does not concretize: {cell['error']}"
    elif flavor.unavailable:
        note = f"concretized only: {'; '.join(flavor.unavailable)} (site {stack.load().site.name})"
        if flavor.compiler in declared:
            note += f" (concretized against compilers.{flavor.compiler}.site_external of components.yaml)"
    elif not built and flavor.name in flavor.app.build:
        note = f"in `build` of {flavor.app.file.name}, not built on this machine yet (`make stack` builds it)"
    elif not built:
        note = f"buildable here, not built: not in `build` of {flavor.app.file.name}"
    elif flavor.reference:
        note = "benchmark baseline: built for the report to measure, never published"
    else:
        note = ""
    return {
        "flavor": flavor.module_name,
        "compiler": flavor.compiler,
        "mpi": flavor.mpi,
        "math": flavor.math,
        "concretized": "yes" if cell["ok"] else "NO",
        "built": "yes" if built else "no",
        "tests": _tests(flavor.module_name) if built else "-",
        "note": note,
    }


def _unsolved_row(flavor: Flavor) -> dict:
    """A cell the ci_build lists' run leaves to `make flavors` (solved_here)."""
    note = "not solved with the ci_build lists, which solve a cover of the matrix; `make flavors` solves it"
    row = {"flavor": flavor.module_name, "compiler": flavor.compiler, "mpi": flavor.mpi, "math": flavor.math}
    return {**row, "concretized": "-", "built": "-", "tests": "-", "note": note}


def print_table(table: List[dict]) -> None:
    columns = ["flavor", "compiler", "mpi", "math", "concretized", "built", "tests", "note"]
    widths = {c: max(len(c), *(len(r[c]) for r in table)) for c in columns[:-1]}
    print("  ".join(c.ljust(widths[c]) for c in columns[:-1]) + "  note")
    for row in table:
        print("  ".join(row[c].ljust(widths[c]) for c in columns[:-1]) + "  " + row["note"])
