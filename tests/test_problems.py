"""Real test problems through `module load`, as users run them: every
published flavor of an application runs each of its problems, and every
checked quantity must match the published reference within tolerance."""

import pytest

from onestack import problems, status

QE_PROBLEMS = problems.load("qe")
CASES = [(app, case) for app in problems.apps() for case in sorted(problems.load(app))]


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_problem_matches_reference(app, case, init_script, published_flavors, tmp_path):
    modules = [m for m in published_flavors if m.startswith(f"{app}/")]
    assert modules, f"no {app} flavor is published"
    problem = problems.load(app)[case]
    for module in modules:
        checks = problems.run(init_script, module, problem, tmp_path / module.replace("/", "_"))
        report = "\n".join(str(c) for c in checks)
        print(f"{module} {case}:\n{report}")
        status.record_result(module, case, all(c.passed for c in checks), [str(c) for c in checks])
        assert all(c.passed for c in checks), report


def test_checker_rejects_a_perturbed_reference():
    """The checker can fail: a reference energy moved by 1 mRy is a failure."""
    problem = QE_PROBLEMS["pw_scf-ncpp"]
    output = "!    total energy              =     -15.83976399 Ry\n     P=  -54.09\n"
    good = "!    total energy              =     -15.83976536 Ry\n     P=  -54.09\n"
    perturbed = "!    total energy              =     -15.84076536 Ry\n     P=  -54.09\n"
    assert all(c.passed for c in problems.compare(problem, output, good))
    assert not all(c.passed for c in problems.compare(problem, output, perturbed))
    assert not all(c.passed for c in problems.compare(problem, "no energy printed\n", good))


def test_checker_rejects_a_residual_above_the_bound():
    """HPL's check: PASSED with a residual under 16 passes; FAILED does not."""
    problem = problems.load("hpl")["hpl"]
    line = "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        {} ...... {}\n"
    assert all(c.passed for c in problems.compare(problem, line.format("0.0027586", "PASSED")))
    assert not all(c.passed for c in problems.compare(problem, line.format("17.2", "FAILED")))


def test_durations_past_a_minute_are_read_in_seconds():
    """QE prints 1m 2.16s past a minute: the benchmark must not choke on it."""
    pattern = problems.load("qe")["pw_scf-ncpp"]["figures"]["wall_time"]["pattern"]
    lines = {"     PWSCF        :     40.80s CPU     59.84s WALL": 59.84,
             "     PWSCF        :   1m11.79s CPU   1m 2.16s WALL": 62.16,
             "     PWSCF        :   1h 2m CPU   1h 3m WALL": 3780.0}
    for line, seconds in lines.items():
        assert problems.values(pattern, line) == [seconds]
    with pytest.raises(ValueError, match="not a number or a duration"):
        problems.number("soon")
