"""Recording the test problems' outputs for the fast tier
(tests/fast/recorded/): one real run of each case through a published
flavor's module, and the lines of the published reference its checks read."""

import re
import tempfile
import time
from pathlib import Path
from typing import List

from onestack import paths
from onestack.problems import check
from onestack.problems.problem import Problem, ProblemError, apps, load
from onestack.problems.runner import How, execute

RECORDED = "tests/fast/recorded"


def _reference_lines(problem: Problem, reference: str) -> str:
    """The reference file's lines that a check of the problem reads."""
    patterns = [
        how.get("reference_pattern", how["pattern"])
        for how in problem["checks"].values()
        if "at_most" not in how and "expected" not in how
    ]
    return "".join(line + "\n" for line in reference.splitlines() if any(re.search(p, line) for p in patterns))


def record(init: Path, published: List[str]) -> List[Path]:
    written = []
    for app in apps():
        module = next((m for m in published if m.startswith(f"{app}/")), None)
        if module is None:
            raise ProblemError(f"record-outputs: no {app} flavor is published")
        for case, problem in load(app, benchmarks=True).items():
            with tempfile.TemporaryDirectory() as tmp:
                outcome = execute(problem, How(modules=(module,)), Path(tmp), init)
                if outcome.failure():
                    raise ProblemError(f"{problem.name} with {module}: {outcome.failure()}")
                folder = paths.REPO / RECORDED / app
                folder.mkdir(parents=True, exist_ok=True)
                header = f"# recorded by onestack record-outputs: {module}, {time.strftime('%Y-%m-%d')}\n"
                (folder / f"{case}.output").write_text(header + outcome.output)
                written.append(folder / f"{case}.output")
                if "reference" in problem.spec:
                    reference = (Path(tmp) / problem["reference"]).read_text()
                    (folder / f"{case}.reference").write_text(header + _reference_lines(problem, reference))
                checks = check.compare(
                    problem["checks"], outcome.output, reference if "reference" in problem.spec else ""
                )
                print(f"==> record-outputs: {problem.name} ({module}): " + "; ".join(map(str, checks)))
    return written
