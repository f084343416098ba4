"""The site's CPU generations (environments/cpus.yaml) emulated by qemu-user:
how the tests and the report show that a fat build runs on every generation
and a build for one CPU does not. A test problem runs as one process without
its MPI launcher (MPICH and Open MPI then start a one-rank job), with its
`emulation_params` (emulation is 10-100x slower than the real CPU)."""

import signal
import subprocess
from pathlib import Path

from onestack import lmod, problems


def run(init: Path, cpu: str, command: str, cwd: Path, module: str = "", setup: str = "") -> subprocess.CompletedProcess:
    """A command (program, then its arguments) under qemu emulating cpu, in
    a clean shell after `module load module` and the setup lines."""
    program, _, args = command.partition(" ")
    load = f"module load {module}\n" if module else ""
    # qemu-user runs a file: it does not search PATH itself.
    return lmod.clean_shell(init, f"{load}{setup}\ncd '{cwd}'\nqemu-x86_64 -cpu {cpu} \"$(command -v {program})\" {args}")


def died_of_sigill(proc: subprocess.CompletedProcess) -> bool:
    """Killed by SIGILL (itself, or seen through the shell); MPICH's UCX
    catches the SIGILL, names it, then dies of a SIGSEGV."""
    return proc.returncode in (-signal.SIGILL, 128 + signal.SIGILL) or "Illegal instruction" in proc.stderr


def run_problem(init: Path, cpu: str, problem: dict, workdir: Path, module: str = "",
                prelude: str = "", setup: str = "") -> dict:
    """A test problem on one process under qemu: whether it ran and passed
    its checks, its exit code and, when it died, of what."""
    problem = {**problem, "params": {**problem.get("params", {}), **problem.get("emulation_params", {})}}
    rundir = problems.prepare(problem, workdir)
    command = problem["command"].format(input=Path(problem.get("input", "")).name)
    proc = run(init, cpu, command, rundir, module, prelude + "\n" + problems.exports(problem, workdir) + setup)
    result = {"cpu": cpu, "exit": proc.returncode, "passed": False, "output": proc.stdout + proc.stderr,
              "sigill": died_of_sigill(proc)}
    if proc.returncode == 0:
        output = (rundir / problem["output"]).read_text() if "output" in problem else proc.stdout
        reference = (workdir / problem["reference"]).read_text() if "reference" in problem else ""
        checks = problems.compare(problem, output, reference)
        result.update(passed=all(c.passed for c in checks), checks=[str(c) for c in checks])
    return result
