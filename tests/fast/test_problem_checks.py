"""Every test problem's checks on outputs recorded from real runs
(tests/fast/recorded/<app>/<case>.output, and the published reference's
lines the checks read, <case>.reference): each passes as recorded, and each
check fails alone when its value moves beyond its tolerance, or as far as a
wrong answer (a tolerance that wide is one). The same checker runs in every
container image (check.py as a script): it gives the same verdicts, and the
image's test script is shell for every problem."""

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from onestack import problems, stack
from onestack.problems import Problem, check, recorded, runner

RECORDED = Path(__file__).parent / "recorded"
CASES = [(app, case) for app in problems.apps() for case in sorted(problems.load(app, benchmarks=True))]


def _recorded(app: str, case: str):
    output = RECORDED / app / f"{case}.output"
    assert output.is_file(), f"no recorded output {output}: record one (tests/fast/recorded/README.md)"
    reference = RECORDED / app / f"{case}.reference"
    return output.read_text(), reference.read_text() if reference.is_file() else ""


def _judged(app: str, case: str) -> dict:
    """The checks a recording can judge: its `own_level` ones only where the
    recorded run was the CPU's own level's build (its header says otherwise:
    recorded.NO_OWN_LEVEL)."""
    checks = problems.load(app, benchmarks=True)[case]["checks"]
    if recorded.NO_OWN_LEVEL in _recorded(app, case)[0]:
        return {name: how for name, how in checks.items() if not how.get("own_level")}
    return checks


# How far a value moves to be a wrong answer, whatever its check's tolerance
# says: a tenth of itself, and at least 2 (a value near zero, such as a
# pressure in kbar). A check whose tolerance is as wide lets it pass.
WRONG_FRACTION, WRONG_AT_LEAST = 0.1, 2.0


def _shift(how: dict, value: float) -> float:
    """Ten tolerances, or a wrong answer's distance where that is less."""
    tolerance = max(how["tolerance"], how.get("relative_tolerance", 0) * abs(value), 1e-4)
    return min(10 * tolerance, max(WRONG_FRACTION * abs(value), WRONG_AT_LEAST))


def _perturbed(how: dict, output: str) -> str:
    """The output with one check's value moved (_shift) or past its bound,
    with the line it must not find added (an `absent` check), or with the
    run's vector of the first pair a comparison lists turned round (a
    `min_cosine` check)."""
    if "min_cosine" in how:
        match = re.search(how["pattern"], output, re.MULTILINE)
        assert match, f"{how['pattern']!r}: the recorded output lists no pair to turn: record a run that lists some"
        turned = " ".join(repr(-float(x)) for x in match.group(2).split())
        return output[: match.start(2)] + turned + output[match.end(2) :]
    if how.get("absent"):
        line = re.sub(r"\\(.)", r"\1", how["pattern"])
        assert re.search(how["pattern"], line), f"{how['pattern']!r}: an `absent` pattern must be plain text"
        return f"{output}\n{line}\n"

    def move(match):
        value = float(match.group(1))
        moved = how["at_most"] + 1 if "at_most" in how else value + _shift(how, value)
        start, end = (i - match.start() for i in match.span(1))
        return match.group(0)[:start] + repr(moved) + match.group(0)[end:]

    return re.sub(how["pattern"], move, output, flags=re.MULTILINE)


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_recorded_output_passes(app, case):
    problem = problems.load(app, benchmarks=True)[case]
    output, reference = _recorded(app, case)
    assert check.ranks_error(problem["ranks_pattern"], problem["ranks"], output) == ""
    checks = check.compare(_judged(app, case), output, reference)
    assert checks and all(c.passed for c in checks), "\n".join(map(str, checks))
    assert check.ranks_error(problem["ranks_pattern"], problem["ranks"] + 1, output), "a wrong rank count passed"


CHECKS = [(app, case, name) for app, case in CASES for name in problems.load(app, benchmarks=True)[case]["checks"]]
CHECK_IDS = [f"{a}/{c}:{n}" for a, c, n in CHECKS]


@pytest.mark.parametrize("app,case,name", CHECKS, ids=CHECK_IDS)
def test_a_moved_value_fails_its_check_alone(app, case, name):
    """Each check's value moved alone (none hides behind another), by ten
    tolerances or a wrong answer's distance: that check fails, no other."""
    problem = problems.load(app, benchmarks=True)[case]
    output, reference = _recorded(app, case)
    judged = _judged(app, case)
    if name not in judged:
        # Not the CPU's own level's build: the line it must not print is there, rightly, and fails the check.
        assert not check.compare({name: problem["checks"][name]}, output)[0].passed, f"{app}/{case}:{name} passed"
        return
    moved = check.compare(judged, _perturbed(judged[name], output), reference)
    failed = [c.name for c in moved if not c.passed]
    assert failed == [name], f"{app}/{case}:{name}: its value moved, the checks that failed: {failed or 'none'}"


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


# GROMACS's line where its timing counted one AVX-512 FMA unit, as a run of
# the x86-64-v4 build on the Xeon of docs/results.md printed it (2026-11-30).
ONE_FMA_UNIT = "    Number of AVX-512 FMA units: 1 (For Intel, AVX2 is faster w/o 2 AVX-512 FMA units)"
FMA_TIMED = [
    (case, name)
    for case, problem in problems.load("gromacs", True).items()
    for name, how in problem["checks"].items()
    if "not_checked_when" in how
]


@pytest.mark.parametrize("case,name", FMA_TIMED, ids=[f"gromacs/{c}:{n}" for c, n in FMA_TIMED])
def test_gromacs_simd_note_is_not_judged_where_its_fma_timing_contradicts_its_cpu_table(case, name):
    """The note beside a timing that read one FMA unit on a CPU GROMACS's
    own table gives two: printed as not checked, with why; the same note on
    a CPU the table gives one fails, as it does without that timing."""
    how = problems.load("gromacs", True)[case]["checks"][name]
    output = _perturbed(how, _recorded("gromacs", case)[0])
    timed = re.sub(r"^ *Number of AVX-512 FMA units:.*$", ONE_FMA_UNIT, output, flags=re.MULTILINE)
    assert timed != output and "avx512secondFMA" in timed, "record a run on a CPU with AVX-512 (tests/fast/recorded)"

    def verdict(text):
        return check.compare({name: how}, text)[0]

    excused = verdict(timed)
    assert isinstance(excused, check.Unchecked) and "timing" in str(excused), str(excused)
    assert not verdict(timed.replace(" avx512secondFMA", "")).passed, "a CPU with one FMA unit was excused"
    assert not verdict(output).passed, "the note passed without the timing that excuses it"


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
    for how in problem["checks"].values():
        output = _perturbed(how, output) if how.get("own_level") else output
    return output


def _images_checker(problem, output: str, reference: str, folder: Path) -> subprocess.CompletedProcess:
    """check.py run as the image runs it, on the literal the image carries."""
    files = {"checks.txt": problem.checker_spec(), "output": output, "reference": reference}
    for name, text in files.items():
        (folder / name).write_text(text)
    return subprocess.run(
        [sys.executable, check.__file__, *(str(folder / name) for name in files)], capture_output=True, text=True
    )


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_the_images_checker_passes_the_recorded_output(app, case, tmp_path):
    problem = problems.load(app, benchmarks=True)[case]
    proc = _images_checker(problem, *_recorded(app, case), tmp_path)
    assert proc.returncode == 0, f"{app}/{case}: {proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("app,case,name", CHECKS, ids=CHECK_IDS)
def test_the_images_checker_fails_a_moved_value_by_its_check_alone(app, case, name, tmp_path):
    """The verdict of test_a_moved_value_fails_its_check_alone; but an
    own_level check, which an image leaves out (Problem.checker_spec), is
    printed as not checked, and the run passes."""
    problem = problems.load(app, benchmarks=True)[case]
    output, reference = _recorded(app, case)
    how = problem["checks"][name]
    proc = _images_checker(problem, _perturbed(how, output), reference, tmp_path)
    said = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    if how.get("own_level"):
        assert proc.returncode == 0 and said.get(name, "").startswith("not checked"), (
            f"{app}/{case}:{name}: an image checked it: {proc.stdout}{proc.stderr}"
        )
        return
    failed = [check_name for check_name, verdict in said.items() if verdict.endswith("FAILED")]
    assert proc.returncode == 1 and failed == [name], (
        f"{app}/{case}:{name}: its value moved, the image's checker failed {failed or 'none'}: {proc.stdout}"
    )


def test_listed_vectors_fail_off_their_direction_or_when_the_comparison_did_not_read_both_files():
    """GROMACS's forces as `gmx check` lists them, judged by gmxtest.pl's
    rule: a direction within the angle, both files read whole; a force of
    zero length beside one that is not is off, two of zero length are not."""
    how = problems.load("gromacs")["nbnxn_pme"]["checks"]["forces"]
    listed = "f[    7] ( 1.00000e+02  0.00000e+00  0.00000e+00) - ({})\n\nBoth files read correctly\n"

    def verdict(run_vector: str, output: str = listed) -> bool:
        return check.compare({"forces": how}, output.format(run_vector))[0].passed

    assert verdict(" 1.00000e+02  4.00000e+00  0.00000e+00"), "a force 2.3 degrees off failed"
    assert not verdict(" 1.00000e+02  5.00000e+00  0.00000e+00"), "a force 2.9 degrees off passed"
    assert not verdict(" 0.00000e+00  0.00000e+00  0.00000e+00"), "a zero force beside a non-zero one passed"
    zeros = listed.replace("1.00000e+02", "0.00000e+00")
    assert verdict(" 0.00000e+00  0.00000e+00  0.00000e+00", zeros), "two zero forces failed"
    assert verdict("-1.00000e+02  4.00000e+00  0.00000e+00", listed.replace("( 1.0", "(-1.0")), "negatives failed"
    assert not verdict(" 1.00000e+02  nan  0.00000e+00"), "a force that is not a number passed"
    assert not verdict(" 1.00000e+02  0.00000e+00"), "a force of 2 numbers passed"
    wide = listed.replace("f[    7]", "f[12345]")
    assert check.compare({"forces": how}, wide.format(" 0.0 1.0 0.0"))[0].off == 1, "a 5-digit index was not read"
    right = " 1.00000e+02  0.00000e+00  0.00000e+00"
    unread = listed.replace("Both files read correctly", "End of file on traj.trr but not on reference_s.trr")
    found = check.compare({"forces": how}, unread.format(right))[0]
    assert not found.passed and "did not read both files whole" in str(found)
    for line in ("bF (true - false)", "natoms (2400 - 2399)", "step (20 - 10)", "box[    0] (3 0 0) - (4 0 0)"):
        found = check.compare({"forces": how}, f"{line}\n{listed.format(right)}")[0]
        assert not found.passed and line in str(found), f"{line!r}: a mismatch of the files passed"
    assert verdict(right, f"x[    3] (1 2 3) - (3 2 1)\n{listed}"), "a position listed (the suite ignores it) failed"
    assert not check.compare({"forces": how}, "")[0].passed, "a run with no comparison passed"


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


def _without_source_files(problem: Problem) -> Problem:
    """The problem less the files of its source archive and the edits to
    them: what the fast tier can lay out (the archive is found by the
    sha256 its recipe declares, which needs Spack)."""
    return Problem(problem.app, problem.case, {**{k: v for k, v in problem.spec.items() if k != "source"}, "edits": {}})


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_the_image_test_script_is_shell(app, case, tmp_path, monkeypatch):
    """Generated from the same problem files, its environment, reference and
    prepare steps included; the files are laid out without the source archive's
    (_without_source_files), the script rendered from the whole problem."""
    problem = problems.load(app, benchmarks=True)[case]
    lay_out = runner.prepare
    monkeypatch.setattr(runner, "prepare", lambda laid, workdir: lay_out(_without_source_files(laid), workdir))
    runner.image_test(problem, tmp_path, "/opt/onestack/test")
    proc = subprocess.run(["sh", "-n", str(tmp_path / "run")], capture_output=True, text=True)
    assert proc.returncode == 0, f"{problem.name}: its image test script is not shell: {proc.stderr}"
    script = (tmp_path / "run").read_text()
    wanted = [f"export {name}=" for name in problem["env"]]
    wanted += [problem["reference"]] if "reference" in problem.spec else []
    wanted += [shlex.join(problem.argv(step)) for step in problem["prepare"]]
    assert all(text in script for text in wanted), f"{problem.name}: its script lacks one of {wanted}:\n{script}"
    assert (tmp_path / "check.py").read_text() == Path(check.__file__).read_text()


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


def test_under_qemu_own_level_checks_are_judged_only_on_a_named_build():
    """Through a flavor's entry point under qemu, the build that ran is the
    dispatcher's pick, which the caller did not name: not judged, said why.
    A run that names its build (`path`) says itself whether it is the
    emulated CPU's own level (no_own_level)."""
    assert runner.How(emulate="Haswell").own_level_unchecked.startswith("under qemu (Haswell) through the entry point")
    assert runner.How(emulate="Haswell", path=("/builds/v3/bin",)).own_level_unchecked == ""
    named = runner.How(emulate="SandyBridge", path=("/builds/v2/bin",), no_own_level="beyond x86-64-v2's code")
    assert named.own_level_unchecked == "beyond x86-64-v2's code"
    assert runner.How().own_level_unchecked == "" and runner.How(no_own_level="no v4 build").own_level_unchecked


# GROMACS 2022.5's log of its AVX_512 build on an AMD Zen 4, as its
# simdCheck and hardware report write it (src/gromacs/simd/support.cpp).
ZEN4_2022 = """    Vendor: AMD
    Brand:  AMD EPYC 9654 96-Core Processor
Highest SIMD level supported by all nodes in run: AVX2_256
SIMD instructions selected at compile time:       AVX_512
This program was compiled for different hardware than you are running on,
"""


@pytest.mark.parametrize("case,name", FMA_TIMED, ids=[f"gromacs/{c}:{n}" for c, n in FMA_TIMED])
def test_gromacs_2022_simd_advice_on_amd_avx512_is_not_judged(case, name):
    """GROMACS 2022.5 advises AVX2_256 on every AMD CPU: beside its AVX_512
    build on a Zen 4 its note is printed as not checked, with why; the same
    note on an Intel CPU, or beside another build, fails."""
    how = problems.load("gromacs", True)[case]["checks"][name]

    def verdict(text):
        return check.compare({name: how}, text)[0]

    excused = verdict(ZEN4_2022)
    assert isinstance(excused, check.Unchecked) and "2022.5" in str(excused), str(excused)
    assert not verdict(ZEN4_2022.replace("Vendor: AMD", "Vendor: Intel")).passed, "an Intel CPU was excused"
    other_build = ZEN4_2022.replace("time:       AVX_512", "time:       SSE4.1")
    assert not verdict(other_build).passed, "another build was excused"


def test_a_capture_that_is_no_number_fails_its_check_alone():
    """QE prints ******** where a value overflows its format: that check
    fails, read as no number; the others are still judged."""
    checks = {
        "pressure": {"pattern": r"P=\s*(\S+)", "expected": 0.0, "tolerance": 1.0},
        "energy": {"pattern": r"^!\s+total energy\s+=\s+(\S+) Ry", "expected": -15.8, "tolerance": 0.1},
    }
    found = {c.name: c.passed for c in check.compare(checks, "!    total energy   =   -15.83 Ry\n  P= ********\n")}
    assert found == {"pressure": False, "energy": True}, found


def test_an_images_checks_follow_the_flavors_version():
    """An image carries its case as its flavor runs it (problems.of_flavor):
    LAMMPS 2025's SPC/E run, which cannot match the 2021 reference, prints
    each check as not checked, with why, rather than failing it."""
    problem = problems.of_flavor(stack.load().flavor("lmp/openblas-mpich-omp"), "spce")
    spec = ast.literal_eval(problem.checker_spec())
    assert not spec["checks"] and "2025" in spec["unchecked"]["total_energy"], spec["unchecked"]


AFTER_A_COMPARISON = [
    (app, case, name)
    for app, case in CASES
    for name, how in problems.load(app, benchmarks=True)[case]["checks"].items()
    if how.get("absent") and "complete" in how
]


@pytest.mark.parametrize("app,case,name", AFTER_A_COMPARISON, ids=[f"{a}/{c}:{n}" for a, c, n in AFTER_A_COMPARISON])
def test_a_line_a_comparison_would_print_fails_where_the_comparison_never_ended(app, case, name):
    """A job ended before its `after` comparison lists nothing either: the
    comparison's last line must be there, or the check fails, saying so."""
    how = problems.load(app, benchmarks=True)[case]["checks"][name]
    output = _recorded(app, case)[0]
    assert check.compare({name: how}, output)[0].passed, f"{app}/{case}:{name} fails as recorded"
    cut = re.sub(how["complete"], "", output, flags=re.MULTILINE)
    verdict = check.compare({name: how}, cut)[0]
    assert not verdict.passed and "did not run to its end" in str(verdict), str(verdict)


@pytest.mark.parametrize("case", ["nbnxn_pme", "nbnxn_rf"])
def test_gromacs_energies_pass_with_the_runs_frames_left_over_never_the_references(case):
    """gmxtest.pl counts no error where the run's energy file holds more
    frames than the reference's; a run's file that ends first (a run cut
    short) is no comparison to its end."""
    how = problems.load("gromacs", True)[case]["checks"]["energies"]
    output = _recorded("gromacs", case)[0]
    assert "Files read successfully" in output

    def verdict(last_line):
        return check.compare({"energies": how}, output.replace("Files read successfully", last_line))[0]

    assert verdict("End of file on reference_s.edr but not on ener.edr").passed
    assert not verdict("End of file on ener.edr but not on reference_s.edr").passed


@pytest.mark.parametrize("case", ["nbnxn_pme", "nbnxn_rf"])
def test_a_run_ended_before_its_comparisons_fails_only_checks_that_never_ran(case):
    """Debian's MPICH that hangs in MPI_Finalize across nodes is tolerated
    where the run printed all its results and only the time limit's kill cut
    the `after` steps off (tests/cluster/test_flavors_across_nodes.py): the
    energies' comparison, added later than that rule, failed it, and a hung
    GROMACS run failed the test."""
    output, reference = _recorded("gromacs", case)
    cut = output[: output.index("Finished mdrun")] + "Finished mdrun on rank 0\n"
    found = check.compare(_judged("gromacs", case), cut, reference)
    failed = [c for c in found if not c.passed]
    assert failed and all(check.never_reached(c) for c in failed), [str(c) for c in failed]
    assert {c.name for c in failed} == {"energies", "forces"}
    whole = [c for c in check.compare(_judged("gromacs", case), output, reference) if not c.passed]
    assert whole == [], [str(c) for c in whole]
