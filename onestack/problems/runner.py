"""Running a test problem: one script, from one template, for every place a
problem runs (a flavor's module on this host, an emulated CPU, a Slurm
batch job, a container image), then one check (check.py) of its output.
The tests, the emulated-CPU runs, the report and the images all run
problems through here."""

import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

from onestack import commands, render
from onestack.problems import check
from onestack.problems.problem import Problem, ProblemError, prepare

TEMPLATES = Path(__file__).parent / "templates"
# A run that outlives this is killed and fails: no test waits forever.
TIMEOUT_S = 1800
# Under qemu, glibc leaves out its own AVX2 routines and its AVX memmove.
# With AVX2 in the emulated CPU, glibc picks them for its string functions,
# after which qemu 7.2's TCG ran the program's scalar double arithmetic in
# its soft-float path: several times slower than under a CPU without AVX2,
# for the same build (measured: docs/results.md, Build and test times).
# They are glibc's choice, not the stack's: the dispatcher and the math
# libraries read CPUID themselves.
EMULATED_GLIBC_TUNABLES = "glibc.cpu.hwcaps=-AVX2,-AVX_Fast_Unaligned_Load"


@dataclass(frozen=True)
class How:
    """How a run is started. The default: `mpirun -n <ranks> <program>`."""

    preset: Tuple[Tuple[str, str], ...] = ()  # exported before the load (what a user sets first, e.g. OMP_NUM_THREADS)
    modules: Tuple[str, ...] = ()  # loaded first, e.g. a flavor (none: a baseline outside the stack)
    env: Tuple[Tuple[str, str], ...] = ()  # exported after the load
    unset: Tuple[str, ...] = ()  # unset after the load
    path: Tuple[str, ...] = ()  # folders put first on PATH (e.g. a native twin's bin/)
    launcher: Tuple[str, ...] = ("mpirun", "-n", "{ranks}")
    wrapper: Tuple[str, ...] = ()  # e.g. `apptainer exec <image>`: per rank, or around the launcher if inside
    inside: bool = False  # the wrapper runs the launcher too (an image's own MPI)
    emulate: str = ""  # a qemu CPU model: one process, no launcher
    report_hosts: bool = False  # each rank prints its host first (runs across nodes)
    # Why the flavor has no build for this CPU's own level ("": it has one):
    # its `own_level` checks are then printed as not checked.
    no_own_level: str = ""

    @property
    def own_level_unchecked(self) -> str:
        """Why the run cannot judge `own_level` checks ("" where it can). Under
        qemu through a flavor's entry point, the build it picks for the
        emulated CPU is not one the caller named (`path` names one, and
        `no_own_level` then says whether it is that CPU's own)."""
        if self.emulate and not self.path and not self.no_own_level:
            return f"under qemu ({self.emulate}) through the entry point, whose pick is not named here"
        return self.no_own_level


@dataclass
class Outcome:
    """What a run did: its exit code and its output (the program's output
    file where it writes one, else what it printed)."""

    problem: Problem
    how: How
    exit: int
    output: str
    printed: str
    rundir: Path
    workdir: Path
    command: str = field(default="")

    @property
    def sigill(self) -> bool:
        """Killed by SIGILL (itself, or seen through the shell); MPICH's UCX
        catches the SIGILL, names it, then dies of a SIGSEGV."""
        return self.exit in (-signal.SIGILL, 128 + signal.SIGILL) or "Illegal instruction" in self.printed

    def checks(self) -> List[check.Check]:
        if self.problem.get("not_checked_why"):
            return [check.Unchecked(name, self.problem["not_checked_why"]) for name in self.problem["checks"]]
        reference = (self.workdir / self.problem["reference"]).read_text() if "reference" in self.problem.spec else ""
        wanted = self.problem["checks"]
        why = self.how.own_level_unchecked
        if why:
            wanted = {name: how for name, how in wanted.items() if not how.get("own_level")}
        unchecked = [check.Unchecked(name, why) for name in self.problem["checks"] if name not in wanted]
        return check.compare(wanted, self.output, reference) + unchecked

    def failure(self) -> str:
        """Why the run is not one good job ("" if it is): its exit, its ranks."""
        if self.exit != 0:
            return f"`{self.command}` exited {self.exit}:\n{self.printed[-3000:]}"
        if self.how.emulate:
            return ""
        return check.ranks_error(self.problem["ranks_pattern"], self.problem["ranks"], self.output)


def script(problem: Problem, how: How, rundir: Path, workdir: Path, init: Optional[Path]) -> str:
    launcher = [word.replace("{ranks}", str(problem["ranks"])) for word in how.launcher]
    hosts = list(check.REPORT_HOST) if how.report_hosts else []
    words = [*how.wrapper, *launcher, *hosts] if how.inside else [*launcher, *hosts, *how.wrapper]
    env = [(k, v.replace("{workdir}", str(workdir))) for k, v in problem["env"].items()] + list(how.env)
    return render.text(
        TEMPLATES,
        "run.sh.j2",
        problem=problem,
        how=how,
        init=init,
        env=env,
        rundir=rundir,
        argv=problem.argv(),
        prepare=[[*how.wrapper, *problem.argv(step)] for step in problem["prepare"]],
        after=[[*(() if how.emulate else how.wrapper), *problem.argv(step)] for step in problem["after"]],
        output=problem.get("output", ""),
        words=words + problem.argv(),
        as_root=os.geteuid() == 0,
        emulated_glibc=EMULATED_GLIBC_TUNABLES,
    )


def image_test(problem: Problem, out: Path, test_dir: str) -> None:
    """A container image's %test: the problem's files (laid out in
    out/files, which the definition copies to test_dir/files), the script
    that runs it with the image's own MPI, the checker and what it checks."""
    rundir = prepare(problem, out / "files")
    launcher = [word.replace("{ranks}", str(problem["ranks"])) for word in How().launcher]
    # The work folder is made at run time: each value in pieces around {workdir}, which becomes "$work".
    env = [(k, v.split("{workdir}")) for k, v in problem["env"].items()]
    output = problem["output"] if "output" in problem.spec else "onestack-test.out"
    text = render.text(
        TEMPLATES,
        "image-test.sh.j2",
        problem=problem,
        test_dir=test_dir,
        env=env,
        rundir=str(rundir.relative_to(out / "files")),
        words=launcher + problem.argv(),
        prepare=[problem.argv(step) for step in problem["prepare"]],
        after=[problem.argv(step) for step in problem["after"]],
        output=output,
        reference=problem.get("reference", ""),
    )
    (out / "run").write_text(text)
    (out / "run").chmod(0o755)
    (out / "checks.txt").write_text(problem.checker_spec())
    shutil.copy(Path(check.__file__), out / "check.py")


def execute(problem: Problem, how: How, workdir: Path, init: Optional[Path] = None, submit=None) -> Outcome:
    """Lay the problem out in workdir and run it (with submit, as a batch
    job: a function taking the script and returning (exit, printed))."""
    rundir = prepare(problem, workdir)
    file = workdir / "run.sh"
    file.write_text(script(problem, how, rundir, workdir, init))
    code, printed = submit(file) if submit else _bash(file)
    written = rundir / problem["output"] if "output" in problem.spec else None
    output = written.read_text() if written and written.is_file() else printed
    (workdir / "output.txt").write_text(printed if output is printed else output + printed)
    return Outcome(problem, how, code, output, printed, rundir, workdir, command=str(file))


def _bash(file: Path) -> Tuple[int, str]:
    """A run script's exit code and what it printed; a run past TIMEOUT_S is
    killed whole (commands.run_whole)."""
    code, out, err = commands.run_whole(
        ["bash", "--noprofile", "--norc", str(file)], TIMEOUT_S, env=commands.clean_env()
    )
    if code == -signal.SIGKILL:
        return code, f"killed after {TIMEOUT_S} s\n{out}{err}"
    return code, out + err


def run(problem: Problem, how: How, workdir: Path, init: Optional[Path] = None, submit=None) -> List[check.Check]:
    """A run that must work: its checks, or ProblemError saying why not."""
    outcome = execute(problem, how, workdir, init, submit)
    failure = outcome.failure()
    if failure:
        raise ProblemError(f"{problem.name} with {' '.join(how.modules) or 'no module'}: {failure}")
    return outcome.checks()
