"""Recording the test problems' outputs for the fast tier
(tests/fast/recorded/): one real run of each case through a published
flavor's module, and the lines of the published reference its checks read."""

import re
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from onestack import paths
from onestack.problems.problem import Problem, ProblemError, apps, load
from onestack.problems.runner import How, execute

RECORDED = "tests/fast/recorded"


def _reference_lines(problem: Problem, reference: str) -> str:
    """The reference file's lines that a check of the problem reads (a
    pattern may span lines: a table's header and its values)."""
    patterns = [
        how.get("reference_pattern", how["pattern"])
        for how in problem["checks"].values()
        if not {"at_most", "expected", "absent", "min_cosine"} & set(how)
    ]
    lines = reference.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    kept = set()
    for pattern in patterns:
        for match in re.finditer(pattern, reference, re.MULTILINE):
            first = max(i for i, start in enumerate(starts[:-1]) if start <= match.start())
            last = max(i for i, start in enumerate(starts[:-1]) if start <= max(match.end() - 1, match.start()))
            kept.update(range(first, last + 1))
    return "".join(lines[i] if lines[i].endswith("\n") else lines[i] + "\n" for i in sorted(kept))


# The header line that says why a recording's `own_level` checks are not
# checked (the flavor had no build for the recording CPU's own level: a
# `make test` tree's GROMACS), which the fast tier reads back.
NO_OWN_LEVEL = "# own_level checks not checked: "


def record(
    init: Path, published: List[str], no_own_level: Dict[str, str], only: Optional[List[str]] = None
) -> List[Path]:
    """One run of each case of each application (of `only`, if given);
    no_own_level: why each published flavor has no build for this CPU's
    own level ("" where it has one: dispatch.without_own_level)."""
    written = []
    for app in only or apps():
        module = next((m for m in published if m.startswith(f"{app}/")), None)
        if module is None:
            raise ProblemError(f"record-outputs: no {app} flavor is published")
        for case, problem in load(app, benchmarks=True).items():
            with tempfile.TemporaryDirectory() as tmp:
                why = no_own_level[module]
                outcome = execute(problem, How(modules=(module,), no_own_level=why), Path(tmp), init)
                if outcome.failure():
                    raise ProblemError(f"{problem.name} with {module}: {outcome.failure()}")
                folder = paths.REPO / RECORDED / app
                folder.mkdir(parents=True, exist_ok=True)
                header = f"# recorded by onestack record-outputs: {module}, {time.strftime('%Y-%m-%d')}\n"
                header += f"{NO_OWN_LEVEL}{why}\n" if why else ""
                (folder / f"{case}.output").write_text(header + outcome.output)
                written.append(folder / f"{case}.output")
                if "reference" in problem.spec:
                    reference = (Path(tmp) / problem["reference"]).read_text()
                    (folder / f"{case}.reference").write_text(header + _reference_lines(problem, reference))
                checks = outcome.checks()
                print(f"==> record-outputs: {problem.name} ({module}): " + "; ".join(map(str, checks)))
    return written
