"""Every test problem's checks on outputs recorded from real runs
(tests/fast/recorded/<app>/<case>.output, and the published reference's
lines the checks read, <case>.reference): each passes as recorded, and fails
when a checked value moves beyond its tolerance. The same checker runs in
every container image (check.py as a script): it gives the same verdicts."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from onestack import problems, stack
from onestack.problems import check, runner

RECORDED = Path(__file__).parent / "recorded"
CASES = [(app, case) for app in problems.apps() for case in sorted(problems.load(app, benchmarks=True))]


def _recorded(app: str, case: str):
    output = RECORDED / app / f"{case}.output"
    assert output.is_file(), f"no recorded output {output}: record one (tests/fast/recorded/README.md)"
    reference = RECORDED / app / f"{case}.reference"
    return output.read_text(), reference.read_text() if reference.is_file() else ""


def _perturbed(checks: dict, output: str) -> str:
    """The output with each checked value moved by ten tolerances (or past
    its bound), and each line that must be absent added."""
    for how in checks.values():
        if how.get("absent"):
            line = re.sub(r"\\(.)", r"\1", how["pattern"])
            assert re.search(how["pattern"], line), f"{how['pattern']!r}: an `absent` pattern must be plain text"
            output += f"\n{line}\n"
            continue

        def move(match):
            value = float(match.group(1))
            relative = how.get("relative_tolerance", 0) * abs(value)
            shift = (
                max(how.get("tolerance", 0) * 10, relative * 10, abs(value) * 1e-3, 1e-3)
                if "at_most" not in how
                else how["at_most"] + 1 - value
            )
            return match.group(0).replace(match.group(1), repr(value + shift))

        output = re.sub(how["pattern"], move, output, flags=re.MULTILINE)
    return output


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_recorded_output_passes_and_a_moved_value_fails(app, case):
    problem = problems.load(app, benchmarks=True)[case]
    output, reference = _recorded(app, case)
    assert check.ranks_error(problem["ranks_pattern"], problem["ranks"], output) == ""
    checks = check.compare(problem["checks"], output, reference)
    assert checks and all(c.passed for c in checks), "\n".join(map(str, checks))
    for name, how in problem["checks"].items():  # each check alone: none hides behind another
        moved = check.compare(problem["checks"], _perturbed({name: how}, output), reference)
        failed = [c.name for c in moved if not c.passed]
        assert name in failed, f"{app}/{case}:{name}: its value moved beyond its tolerance, and it passed"
    assert check.ranks_error(problem["ranks_pattern"], problem["ranks"] + 1, output), "a wrong rank count passed"


OWN_LEVEL = [
    (app, case)
    for app, case in CASES
    if any(h.get("own_level") for h in problems.load(app, True)[case]["checks"].values())
]


@pytest.mark.parametrize("app,case", OWN_LEVEL, ids=[f"{a}/{c}" for a, c in OWN_LEVEL])
def test_an_own_level_check_is_printed_as_not_checked_without_that_build(app, case, tmp_path):
    """A run of a flavor with no build for the CPU's own level (make test's
    GROMACS) prints its own_level checks as not checked, with why; with
    that build they are checked, and the line that must be absent fails."""
    problem = problems.load(app, benchmarks=True)[case]
    output, reference = _recorded(app, case)
    if "reference" in problem.spec:
        (tmp_path / problem["reference"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / problem["reference"]).write_text(reference)
    noted = _perturbed_own_level(problem, output)

    def checks(why):
        return runner.Outcome(problem, runner.How(no_own_level=why), 0, noted, "", tmp_path, tmp_path).checks()

    unchecked = [c for c in checks("no x86-64-v4 build") if isinstance(c, check.Unchecked)]
    assert unchecked and all(c.passed and "not checked: no x86-64-v4 build" in str(c) for c in unchecked)
    assert not all(c.passed for c in checks("")), "the line that must be absent passed with the build"


def test_a_run_that_cannot_match_its_reference_says_why_for_each_check(tmp_path):
    """LAMMPS 2025's SPC/E run (not_checked_on its version): every check is
    printed as not checked with the problem's reason; a 2021 flavor's run of
    the same problem is checked, and an empty output fails it."""
    newer, older = (stack.load().flavor(m) for m in ("lmp/openblas-mpich-omp", "lmp/openblas-mpich/20210929.2"))

    def checks(flavor):
        problem = problems.of_flavor(flavor, "spce")
        return runner.Outcome(problem, runner.How(), 0, "", "", tmp_path, tmp_path).checks()

    unchecked = checks(newer)
    assert unchecked and all(isinstance(c, check.Unchecked) and "since 2021" in str(c) for c in unchecked)
    (tmp_path / problems.load("lmp")["spce"]["reference"]).parent.mkdir(parents=True)
    (tmp_path / problems.load("lmp")["spce"]["reference"]).write_text("5000 -7625.8\n")
    assert not all(c.passed for c in checks(older)), "a 2021 run with no energy printed passed"


def _perturbed_own_level(problem, output: str) -> str:
    """The output with each own_level check's absent line added."""
    lines = [re.sub(r"\\(.)", r"\1", h["pattern"]) for h in problem["checks"].values() if h.get("own_level")]
    return output + "".join(f"\n{line}\n" for line in lines)


@pytest.mark.parametrize("app,case", CASES[:1] + [c for c in CASES if c[0] == "hpl"], ids=lambda c: str(c))
def test_the_images_checker_gives_the_same_verdict(app, case, tmp_path):
    """check.py run as the image runs it, on the literal the image carries."""
    problem = problems.load(app, benchmarks=True)[case]
    output, reference = _recorded(app, case)
    (tmp_path / "checks.txt").write_text(problem.checker_spec())
    (tmp_path / "reference").write_text(reference)
    for text, verdict in ((output, 0), (_perturbed(problem["checks"], output), 1)):
        (tmp_path / "output").write_text(text)
        proc = subprocess.run(
            [
                sys.executable,
                check.__file__,
                str(tmp_path / "checks.txt"),
                str(tmp_path / "output"),
                str(tmp_path / "reference"),
            ],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == verdict, proc.stdout + proc.stderr


def test_a_missing_value_fails_and_durations_read_in_seconds():
    """QE prints 1m 2.16s past a minute: the benchmark must not choke on it."""
    problem = problems.load("qe")["pw_scf-ncpp"]
    reference = "!    total energy              =     -15.83976536 Ry\n     P=  -54.09\n"
    assert not all(c.passed for c in check.compare(problem["checks"], "no energy printed\n", reference))
    pattern = problem["figures"]["wall_time"]["pattern"]
    lines = {
        "     PWSCF        :     40.80s CPU     59.84s WALL": 59.84,
        "     PWSCF        :   1m11.79s CPU   1m 2.16s WALL": 62.16,
        "     PWSCF        :   1h 2m CPU   1h 3m WALL": 3780.0,
    }
    for line, seconds in lines.items():
        assert check.values(pattern, line) == [seconds]
    with pytest.raises(ValueError, match="not a number or a duration"):
        check.number("soon")


def test_the_image_test_script_is_shell_for_every_problem(tmp_path):
    """Generated from the same problem files (it needs their source files,
    which the fast tier has not: the problems that write their own input)."""
    for app, case in CASES:
        problem = problems.load(app, benchmarks=True)[case]
        if "source" in problem.spec:
            continue
        out = tmp_path / app / case
        runner.image_test(problem, out, "/opt/onestack/test")
        assert subprocess.run(["sh", "-n", str(out / "run")]).returncode == 0
        assert (out / "check.py").read_text() == Path(check.__file__).read_text()


def test_a_rank_host_line_is_found_between_pieces_of_another_ranks_long_line():
    """srun forwards a long line (LD_DEBUG's search path) in pieces, and a
    rank's host line can land between them (CI run of 2026-11-27)."""
    output = (
        "onestack-rank-host: osct-n1\n"
        "     13004:\t search path=/opt/a:/opt/b:/opt/mpi-runonestack-rank-host: osct-n2\n"
        "time/impi/lib:/opt/c\n"
    )
    assert check.hosts(output) == ["osct-n1", "osct-n2"]
    assert check.hosts("the host: onestack-rank-host: osct-n2 and more\n") == []
