"""Test problems: an input, a published reference output, tolerances and how
to run it (tests/problems/<app>/<case>.yaml), run through `module load` in a
clean shell exactly as a user would, and checked value by value."""

import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import yaml

from onestack import lmod, mirror, paths

PROBLEMS = paths.REPO / "tests" / "problems"


@dataclass
class Check:
    name: str
    reference: float
    value: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return abs(self.value - self.reference) <= self.tolerance

    def __str__(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        return (f"{self.name}: {self.value} vs reference {self.reference} "
                f"(|diff| {abs(self.value - self.reference):.3g}, tolerance {self.tolerance}) {verdict}")


def load(app: str) -> Dict[str, dict]:
    """Every problem of an application, by case name."""
    return {f.stem: yaml.safe_load(f.read_text()) for f in sorted((PROBLEMS / app).glob("*.yaml"))}


def source_archive(spec: str) -> Path:
    """The verified source archive of a spec, from the mirror or Spack's cache."""
    for source in mirror.needed_sources(include_installed=True):
        if source["spec"] == spec and source["kind"] == "source":
            for root in (paths.mirror(), paths.source_cache()):
                if (root / source["mirror_path"]).is_file():
                    return root / source["mirror_path"]
    raise FileNotFoundError(f"no source archive of {spec} in the mirror or source cache: run `make mirror`")


def extract(archive: Path, members: List[str], dest: Path) -> None:
    """Extract files or folders (paths below the archive's top folder)."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            inner = member.name.split("/", 1)[1] if "/" in member.name else ""
            if any(inner == m or inner.startswith(m.rstrip("/") + "/") for m in members):
                member.name = inner
                tar.extract(member, dest, filter="data")


def values(pattern: str, text: str) -> List[float]:
    return [float(v) for v in re.findall(pattern, text, re.MULTILINE)]


def compare(problem: dict, output: str, reference: str) -> List[Check]:
    """One Check per quantity: the last value printed in the output against
    the last in the reference (a missing value fails, it is never skipped)."""
    checks = []
    for name, how in problem["checks"].items():
        expected = values(how["pattern"], reference)
        if not expected:
            raise ValueError(f"reference has no {name} (pattern {how['pattern']!r}): fix the problem file")
        got = values(how["pattern"], output)
        checks.append(Check(name, expected[-1], got[-1] if got else float("nan"), how["tolerance"]))
    return checks


def run(init: Path, module: str, problem: dict, workdir: Path, prelude: str = "") -> List[Check]:
    """Run a problem with a flavor's module (and any shell lines of prelude
    after the load) and check it against its reference."""
    archive = source_archive(problem["source"])
    extract(archive, [problem["input"], problem["reference"], problem["pseudo_dir"]], workdir)
    input_file = workdir / problem["input"]
    command = problem["command"].format(ranks=problem["ranks"], input=input_file.name)
    proc = lmod.clean_shell(
        init,
        f"module load {module}\n{prelude}\ncd '{input_file.parent}'\n"
        f"export ESPRESSO_PSEUDO='{workdir / problem['pseudo_dir']}' ESPRESSO_TMPDIR='{workdir}/tmp'\n"
        f"mkdir -p \"$ESPRESSO_TMPDIR\"\n{command}",
    )
    (workdir / "output.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"`{command}` with {module} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return compare(problem, proc.stdout, (workdir / problem["reference"]).read_text())
