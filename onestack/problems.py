"""Test problems: an input, a published reference output, tolerances and how
to run it (tests/problems/<app>/<case>.yaml), run through `module load` in a
clean shell exactly as a user would, and checked value by value."""

import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from onestack import lmod, mirror, paths, slurm

PROBLEMS = paths.REPO / "tests" / "problems"


class ProblemError(RuntimeError):
    """A test problem that failed its checks."""


@dataclass
class Check:
    name: str
    reference: float
    value: float
    tolerance: float
    bound: bool = False  # reference is an upper bound, not a value to match

    @property
    def passed(self) -> bool:
        if self.bound:
            return self.value <= self.reference
        return abs(self.value - self.reference) <= self.tolerance

    def __str__(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        if self.bound:
            return f"{self.name}: {self.value} (at most {self.reference}) {verdict}"
        return (f"{self.name}: {self.value} vs reference {self.reference} "
                f"(|diff| {abs(self.value - self.reference):.3g}, tolerance {self.tolerance}) {verdict}")


def apps() -> List[str]:
    """The applications that have test problems (tests/problems/<app>/)."""
    return sorted(d.name for d in PROBLEMS.iterdir() if d.is_dir())


def load(app: str, benchmarks: bool = False) -> Dict[str, dict]:
    """The test problems of an application, by case name; with benchmarks,
    also its `benchmark_only` cases (too long for every test run, measured by
    the full report)."""
    every = {f.stem: yaml.safe_load(f.read_text()) for f in sorted((PROBLEMS / app).glob("*.yaml"))}
    return {case: p for case, p in every.items() if benchmarks or not p.get("benchmark_only", False)}


def emulation_problem(app: str) -> dict:
    """The problem an app runs under an emulated CPU (onestack/emulate.py):
    the one that states `emulation_params`."""
    found = [p for p in load(app).values() if "emulation_params" in p]
    if not found:
        raise ProblemError(f"tests/problems/{app}/: no problem states emulation_params: add it to one "
                           "(its params for one process under qemu; {} for none)")
    return found[0]


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


# A duration as programs print it past a minute (QE: "1m 2.16s", "1h 2m").
DURATION = re.compile(r"^(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:([\d.]+)s)?$")


def number(text: str) -> float:
    """A printed number, or a duration in seconds."""
    try:
        return float(text)
    except ValueError:
        match = DURATION.match(text.strip())
        if not match or not any(match.groups()):
            raise ValueError(f"not a number or a duration: {text!r}") from None
        hours, minutes, seconds = (float(g or 0) for g in match.groups())
        return 3600 * hours + 60 * minutes + seconds


def values(pattern: str, text: str) -> List[float]:
    return [number(v) for v in re.findall(pattern, text, re.MULTILINE)]


def compare(problem: dict, output: str, reference: str = "") -> List[Check]:
    """One Check per quantity, on the last value the output prints: against
    the last in the published reference (`tolerance`), against a value the
    problem states (`expected`, with `tolerance`), or against the
    program's own acceptance bound (`at_most`, e.g. HPL's residual threshold).
    A missing value fails; it is never skipped."""
    checks = []
    for name, how in problem["checks"].items():
        got = values(how["pattern"], output)
        value = got[-1] if got else float("nan")
        if "at_most" in how:
            checks.append(Check(name, how["at_most"], value, 0.0, bound=True))
            continue
        if "expected" in how:  # a value the problem file states (no published output)
            checks.append(Check(name, how["expected"], value, how["tolerance"]))
            continue
        # The published file may print the quantity otherwise than the run.
        pattern = how.get("reference_pattern", how["pattern"])
        expected = values(pattern, reference)
        if not expected:
            raise ValueError(f"reference has no {name} (pattern {pattern!r}): fix the problem file")
        checks.append(Check(name, expected[-1], value, how["tolerance"]))
    return checks


def figures(problem: dict, output: str) -> Dict[str, float]:
    """The problem's benchmark figures (its `figures`) in an output, scaled."""
    found = {}
    for name, how in problem.get("figures", {}).items():
        got = values(how["pattern"], output)
        if got:
            found[name] = got[-1] * how.get("scale", 1)
    return found


def prepare(problem: dict, workdir: Path) -> Path:
    """Lay out a problem's files in workdir: those it takes from its source
    archive (input, reference and files), and those it writes itself; returns
    the folder it runs in."""
    if "source" in problem:
        members = [problem[k] for k in ("input", "reference") if k in problem] + problem.get("files", [])
        extract(source_archive(problem["source"]), members, workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for name, replacements in problem.get("edits", {}).items():
        _edit(workdir / name, replacements)
    for name, text in problem.get("write", {}).items():
        for key, value in problem.get("params", {}).items():
            text = text.replace(f"{{{key}}}", str(value))
        (workdir / name).write_text(text)
    return (workdir / problem["input"]).parent if "input" in problem else workdir


def _edit(path: Path, replacements: List[List[str]]) -> None:
    """A problem's `edits` of a file it takes from the source (e.g. fewer
    steps): each [old, new] must match exactly once, so that an edit never
    silently misses a changed input."""
    text = path.read_text()
    for old, new in replacements:
        if text.count(old) != 1:
            raise ProblemError(f"{path.name}: edit {old!r} matches {text.count(old)} times, not once: "
                               "fix `edits` in the problem file")
        text = text.replace(old, new)
    path.write_text(text)


def exports(problem: dict, workdir: Path) -> str:
    """Shell lines setting the problem's environment (its `env`)."""
    return "".join(f"export {k}='{v.format(workdir=workdir)}'\n" for k, v in problem.get("env", {}).items())


def command_line(problem: dict, container: str = "", host_mpi: bool = False, launcher: str = "") -> str:
    """The problem's shell command: its launcher (or the one given, e.g. srun
    in a batch job), then its command. With container (a prefix that runs a
    command in an image), the image's own MPI launches (inside it), or with
    host_mpi the host's launches one container per rank (Apptainer's hybrid
    model)."""
    fields = {"ranks": problem["ranks"], "input": Path(problem.get("input", "")).name}
    launcher, program = (launcher or problem["launcher"]).format(**fields), problem["command"].format(**fields)
    if not container:
        return f"{launcher} {program}"
    return f"{launcher} {container} {program}" if host_mpi else f"{container} {launcher} {program}"


def run(init: Path, module: str, problem: dict, workdir: Path, prelude: str = "",
        container: str = "", host_mpi: bool = False, cluster: Optional[slurm.Cluster] = None) -> List[Check]:
    """Run a problem with a flavor's module (and any shell lines of prelude
    after the load), or in a container (see command_line), or as a batch job
    on a Slurm cluster, and check it against its reference."""
    rundir = prepare(problem, workdir)
    load = f"module load {module}\n" if module else ""  # no module: a baseline outside the stack
    # CI containers run as root, which Open MPI refuses unless told twice.
    root = "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n" if os.geteuid() == 0 else ""
    setup = f"{load}{root}{prelude}\ncd '{rundir}'\n{exports(problem, workdir)}"
    if cluster:
        command = command_line(problem, launcher="srun")
        proc = _submit(cluster, f"set -e\nsource '{init}'\n{setup}{command}\n", problem["ranks"], workdir)
    else:
        command = command_line(problem, container, host_mpi)
        proc = lmod.clean_shell(init, setup + command)
    output = (rundir / problem["output"]).read_text() if "output" in problem and proc.returncode == 0 else proc.stdout
    (workdir / "output.txt").write_text(output + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"`{command}` with {module} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    _check_ranks(problem, output, module)
    reference = (workdir / problem["reference"]).read_text() if "reference" in problem else ""
    return compare(problem, output, reference)


def _submit(cluster: slurm.Cluster, body: str, ranks: int, workdir: Path) -> subprocess.CompletedProcess:
    """A batch job as users write one (it loads its module itself), submitted
    with sbatch and waited for; its output file stands for stdout."""
    script, out = workdir / "job.sh", workdir / "job.out"
    script.write_text(f"#!/bin/bash\n#SBATCH --ntasks={ranks}\n#SBATCH --output={out}\n{body}")
    proc = cluster.command("sbatch", "--wait", str(script))
    job_output = out.read_text() if out.exists() else ""
    return subprocess.CompletedProcess(proc.args, proc.returncode, job_output, proc.stderr)


def _check_ranks(problem: dict, output: str, module: str) -> None:
    """The program must report one job of `ranks` ranks: a launcher of another
    MPI starts `ranks` one-rank jobs instead, which can still print the right
    answer, each computing all of it."""
    counts = values(problem["ranks_pattern"], output)
    if counts != [problem["ranks"]] * len(counts) or not counts:
        raise RuntimeError(f"{module or 'baseline'}: expected one job of {problem['ranks']} ranks, the program "
                           f"reported {counts or 'no rank count'} (is mpirun this MPI's own launcher?)")
