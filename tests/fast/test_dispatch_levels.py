"""The exec-time CPU dispatcher (packages/spack_repo/onestack/packages/
onestack_dispatch/onestack-dispatch.c), fast: compiled with gcc as its
recipe compiles it, run natively on recorded CPU reports (dispatch/cases/,
through its ONESTACK_CPUID_FILE test input) over a stand-in program in each
per-level bin folder. No Spack, no Lmod, no emulation."""

import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from onestack.modules import dispatch
from onestack.report import start_cost
from tests.fast import dispatch_tree as tree
from tests.fast.dispatch_tree import EXIT_BELOW_BASELINE, EXIT_CANNOT_RUN, EXIT_UNDECIDED

PROGRAM = "probe"
BUILT_LEVELS = ("x86-64-v2", "x86-64-v3", "x86-64-v4")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> SimpleNamespace:
    folder = tmp_path_factory.mktemp("dispatch-built")
    return SimpleNamespace(
        dispatcher=tree.compile_dispatcher(folder),
        probe=tree.compile_c(tree.PROGRAMS / "run_report.c", folder / PROGRAM, "-O1"),
    )


def make_stack(root: Path, built, levels=BUILT_LEVELS) -> SimpleNamespace:
    """Per-level bin folders each holding the probe, and a dispatch folder over them."""
    builds = {}
    for level in levels:
        builds[level] = root / level / "bin"
        builds[level].mkdir(parents=True)
        shutil.copy(built.probe, builds[level] / PROGRAM)
    bin_dir = tree.lay_out(root / "dispatch", built.dispatcher, builds, [PROGRAM])
    return SimpleNamespace(
        bin=bin_dir,
        entry=bin_dir / PROGRAM,
        builds=builds,
        table=root / "dispatch" / "levels.conf",
        marker=root / "ran",
    )


@pytest.fixture
def stack(tmp_path, built) -> SimpleNamespace:
    return make_stack(tmp_path, built)


def on(cpu: str, stack, **env) -> dict:
    """The environment of a run on a recorded CPU, with the probe's marker file."""
    return {"ONESTACK_CPUID_FILE": str(tree.case(cpu)), "DISPATCH_TEST_MARKER": str(stack.marker), **env}


def ran_build(proc) -> str:
    """Which level's probe ran, from the path it printed."""
    assert proc.returncode == 0, proc.stderr
    exe = next(line[len("exe=") :] for line in proc.stdout.splitlines() if line.startswith("exe="))
    return Path(exe).parent.parent.name


def message(proc) -> str:
    """The dispatcher's own message: its stderr less the test-input notice."""
    return "\n".join(line for line in proc.stderr.splitlines() if "test input" not in line)


# ---- the level of each recorded CPU ----


@pytest.mark.parametrize("case_file", tree.cases(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_recorded_cpu_gives_its_level(case_file, built):
    proc = tree.run([built.dispatcher, "--level"], env={"ONESTACK_CPUID_FILE": str(case_file)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == tree.expected_level(case_file), case_file.read_text()
    assert f"test input: the CPU's report is read from ONESTACK_CPUID_FILE={case_file}" in proc.stderr


def test_the_cases_cover_every_level_and_the_briefed_cpus():
    names = {f"{p.parent.name}/{p.stem}" for p in tree.cases()}
    assert {
        "intel/conroe",
        "intel/nehalem",
        "intel/sandybridge",
        "intel/haswell",
        "intel/skylake-avx512",
        "amd/zen2-epyc-rome",
        "amd/zen3-epyc-milan",
        "amd/zen4-epyc-genoa",
        "amd/zen4-os-without-avx512-state",
        "intel/xeon-avx512-amx",
        "intel/icelake-server-under-qemu",
        # bare-metal reports of the site's server generations (from_aida64.py)
        "amd/zen3-epyc-7713",
        "amd/zen4-epyc-9654",
        "amd/zen5-epyc-9655",
        "intel/xeon-silver-4214-cascade-lake",
        "intel/xeon-w7-2475x-sapphire-rapids",
        "intel/xeon-6-granite-rapids",
    } <= names
    assert {tree.expected_level(p) for p in tree.cases()} == set(tree.LEVELS)


def test_this_cpu_gives_the_level_glibc_finds(built):
    """glibc's loader reads the same CPUID and XCR0 bits for its glibc-hwcaps
    levels: an independent reading of this machine's CPU."""
    proc = tree.run([built.dispatcher, "--level"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == tree.glibc_hwcaps_level()


def test_a_recorded_report_gives_what_the_cpu_itself_gives(built, tmp_path):
    record = tree.run([built.dispatcher, "--cpuid"])
    assert record.returncode == 0, record.stderr
    (tmp_path / "this.cpuid").write_text(record.stdout)
    replayed = tree.run([built.dispatcher, "--level"], env={"ONESTACK_CPUID_FILE": str(tmp_path / "this.cpuid")})
    assert replayed.stdout == tree.run([built.dispatcher, "--level"]).stdout


def aida64_dump(record_lines: list) -> str:
    """A CPU report as AIDA64 dumps it (InstLatx64's collection): a block of
    `CPUID <leaf>: EAX-EBX-ECX-EDX [SL nn]` lines a logical CPU, XCR0's
    supported states in leaf 0xd. A second logical CPU, reporting no
    AVX-512, must be ignored."""

    def block(number: int, lines: list) -> str:
        return f"------[ CPUID Registers / Logical CPU #{number} ]------\n\n" + "\n".join(lines) + "\n\n"

    dump = []
    for line in record_lines:
        if line.startswith("xcr0="):
            xcr0 = int(line[len("xcr0=") :], 16)
            dump.append(f"CPUID 0000000D: {xcr0 & 0xFFFFFFFF:08X}-00000340-00000988-{xcr0 >> 32:08X} [SL 00] [x87]")
            continue
        leaf, subleaf, *regs = re.findall(r"0x([0-9a-f]+)", line)
        dump.append(f"CPUID {leaf.upper()}: " + "-".join(r.upper() for r in regs) + f" [SL {subleaf.upper()}]")
    other = [re.sub(r"^(CPUID 00000007: \w{8})-\w{8}", r"\1-00000000", line) for line in dump]
    return block(0, dump) + block(1, other)


def test_an_aida64_dump_gives_the_record_the_cpu_itself_gives(built, tmp_path):
    """dispatch/cases/from_aida64.py, which made the bare-metal reports, on
    this machine's own report written as AIDA64 writes one."""
    own = tree.run([built.dispatcher, "--cpuid"])
    (tmp_path / "dump.txt").write_text(aida64_dump(tree.records(own.stdout)))
    converted = tree.run([sys.executable, tree.CASES / "from_aida64.py", tmp_path / "dump.txt", "this CPU", "here"])
    assert converted.returncode == 0, converted.stderr
    assert sorted(tree.records(converted.stdout)) == sorted(tree.records(own.stdout))
    (tmp_path / "this.cpuid").write_text(converted.stdout)
    level = tree.run([built.dispatcher, "--level"], env={"ONESTACK_CPUID_FILE": str(tmp_path / "this.cpuid")})
    assert level.stdout == tree.run([built.dispatcher, "--level"]).stdout


def test_a_file_that_is_no_aida64_dump_is_refused_by_name(tmp_path):
    (tmp_path / "lscpu.txt").write_text("Architecture: x86_64\n")
    proc = tree.run([sys.executable, tree.CASES / "from_aida64.py", tmp_path / "lscpu.txt", "a", "b"])
    assert proc.returncode == 1 and not proc.stdout
    assert f"{tmp_path / 'lscpu.txt'}: no CPUID leaf 0x00000000, 0x00000001, 0x0000000d" in proc.stderr


# ---- which build runs ----


@pytest.mark.parametrize(
    "cpu, levels, expected",
    [
        ("intel/nehalem", BUILT_LEVELS, "x86-64-v2"),
        ("intel/sandybridge", BUILT_LEVELS, "x86-64-v2"),
        ("intel/haswell", BUILT_LEVELS, "x86-64-v3"),
        ("intel/skylake-avx512", BUILT_LEVELS, "x86-64-v4"),
        ("intel/skylake-server-under-qemu", BUILT_LEVELS, "x86-64-v3"),
        ("amd/zen2-epyc-rome", BUILT_LEVELS, "x86-64-v3"),
        ("amd/zen3-epyc-milan", BUILT_LEVELS, "x86-64-v3"),
        ("amd/zen3-epyc-7713", BUILT_LEVELS, "x86-64-v3"),
        ("amd/zen4-epyc-9654", BUILT_LEVELS, "x86-64-v4"),
        ("amd/zen5-epyc-9655", BUILT_LEVELS, "x86-64-v4"),
        ("intel/xeon-w7-2475x-sapphire-rapids", BUILT_LEVELS, "x86-64-v4"),
        ("intel/xeon-6-granite-rapids", BUILT_LEVELS, "x86-64-v4"),
        ("intel/xeon-avx512-amx", BUILT_LEVELS, "x86-64-v4"),
        ("intel/icelake-server-under-qemu", BUILT_LEVELS, "x86-64-v3"),
        ("amd/zen4-epyc-genoa", BUILT_LEVELS, "x86-64-v4"),
        ("amd/zen4-os-without-avx512-state", BUILT_LEVELS, "x86-64-v3"),
        ("intel/haswell-os-without-xsave", BUILT_LEVELS, "x86-64-v2"),
        ("intel/haswell", ("x86-64-v2", "x86-64-v4"), "x86-64-v2"),
        ("amd/zen4-epyc-genoa", ("x86-64", "x86-64-v2"), "x86-64-v2"),
        ("intel/conroe", ("x86-64", "x86-64-v2"), "x86-64"),
    ],
)
def test_the_highest_build_not_above_the_cpu_runs(cpu, levels, expected, tmp_path, built):
    stack = make_stack(tmp_path, built, levels)
    assert ran_build(tree.run([stack.entry], env=on(cpu, stack))) == expected


def test_arguments_argv0_and_environment_pass_through(stack):
    env = on("intel/haswell", stack, DISPATCH_TEST_VALUE="kept", PATH=f"{stack.bin}:/usr/bin:/bin")
    proc = tree.run([PROGRAM, "-in", "scf in", ""], env=env)
    assert proc.stdout.splitlines() == [
        f"exe={stack.builds['x86-64-v3'] / PROGRAM}",
        f"argv0={PROGRAM}",
        "arg=-in",
        "arg=scf in",
        "arg=",
        "value=kept",
    ]
    assert "argv0=./typed/as" in tree.run([stack.entry], env=env, argv0="./typed/as").stdout


def test_verbose_names_the_cpu_level_and_the_build(stack):
    proc = tree.run([stack.entry], env=on("intel/haswell", stack, ONESTACK_CPU_VERBOSE="1"))
    assert message(proc) == f"onestack: CPU x86-64-v3; running the x86-64-v3 build: {stack.builds['x86-64-v3']}/probe"
    quiet = tree.run([stack.entry], env=on("intel/haswell", stack, ONESTACK_CPU_VERBOSE="0"))
    assert quiet.returncode == 0 and message(quiet) == ""


def test_a_forced_level_runs_that_build(stack):
    proc = tree.run(
        [stack.entry], env=on("amd/zen4-epyc-genoa", stack, ONESTACK_CPU_LEVEL="x86-64-v2", ONESTACK_CPU_VERBOSE="1")
    )
    assert ran_build(proc) == "x86-64-v2"
    assert message(proc) == (
        f"onestack: CPU x86-64-v4; running the x86-64-v2 build (ONESTACK_CPU_LEVEL): {stack.builds['x86-64-v2']}/probe"
    )


def test_a_forced_level_above_the_cpu_is_refused(stack):
    proc = tree.run([stack.entry], env=on("intel/haswell", stack, ONESTACK_CPU_LEVEL="x86-64-v4"))
    assert proc.returncode == EXIT_UNDECIDED
    assert message(proc) == (
        "onestack: ONESTACK_CPU_LEVEL=x86-64-v4: this CPU is x86-64-v3, it lacks AVX512F, AVX512BW, AVX512CD, "
        "AVX512DQ, AVX512VL, XCR0 opmask+ZMM state (OS-enabled); unset it, or pick a level of "
        f"{stack.table} (x86-64-v2, x86-64-v3, x86-64-v4) not above x86-64-v3"
    )
    assert not stack.marker.exists()


@pytest.mark.parametrize("forced", ["x86-64-v4", "haswell"])
def test_a_forced_level_not_in_the_table_is_refused(forced, tmp_path, built):
    stack = make_stack(tmp_path, built, ("x86-64-v2", "x86-64-v3"))
    proc = tree.run([stack.entry], env=on("intel/skylake-avx512", stack, ONESTACK_CPU_LEVEL=forced))
    assert proc.returncode == EXIT_UNDECIDED
    assert message(proc) == (
        f"onestack: ONESTACK_CPU_LEVEL={forced}: no such build in {stack.table}; it has: x86-64-v2, x86-64-v3"
    )
    assert not stack.marker.exists()


# ---- refusals ----


@pytest.mark.parametrize(
    "cpu, lacks",
    [
        ("intel/conroe", "CMPXCHG16B, POPCNT, SSE4.1, SSE4.2"),
        ("intel/penryn", "POPCNT, SSE4.2"),
    ],
)
def test_a_cpu_below_the_baseline_is_refused_without_running(cpu, lacks, stack):
    proc = tree.run([stack.entry, "-in", "scf.in"], env=on(cpu, stack))
    assert proc.returncode == EXIT_BELOW_BASELINE
    assert message(proc) == (
        f"onestack: probe cannot run on this CPU: it is x86-64 (v1), below the stack's "
        f"baseline x86-64-v2 (it lacks {lacks}); use a node with a newer CPU"
    )
    assert proc.stdout == "" and not stack.marker.exists()


def test_the_baseline_is_the_lowest_level_of_the_table(tmp_path, built):
    stack = make_stack(tmp_path, built, ("x86-64-v3", "x86-64-v4"))
    proc = tree.run([stack.entry], env=on("intel/sandybridge", stack))
    assert proc.returncode == EXIT_BELOW_BASELINE
    assert (
        "it is x86-64-v2, below the stack's baseline x86-64-v3 (it lacks AVX2, BMI1, BMI2, F16C, FMA, "
        "LZCNT, MOVBE)" in message(proc)
    )
    assert not stack.marker.exists()


def test_the_cpu_check_for_module_load(stack):
    check = stack.bin / tree.CHECK_NAME
    fits = tree.run([check], env=on("intel/haswell", stack))
    assert fits.returncode == 0, fits.stderr
    assert (
        fits.stdout
        == f"onestack: CPU x86-64-v3; programs here run the x86-64-v3 build in {stack.builds['x86-64-v3']}\n"
    )
    old = tree.run([check], env=on("intel/conroe", stack))
    assert old.returncode == EXIT_BELOW_BASELINE and old.stdout == ""
    assert message(old).startswith(
        "onestack: this stack's programs cannot run on this CPU: it is x86-64 (v1), "
        "below the stack's baseline x86-64-v2"
    )
    shutil.rmtree(stack.builds["x86-64-v3"])
    gone = tree.run([check], env=on("intel/haswell", stack))
    assert gone.returncode == EXIT_CANNOT_RUN
    assert message(gone) == (
        f"onestack: the x86-64-v3 build's folder {stack.builds['x86-64-v3']} is missing ({stack.table}:2)"
    )


def test_a_missing_program_is_named_with_its_build(stack):
    (stack.builds["x86-64-v3"] / PROGRAM).unlink()
    proc = tree.run([stack.entry], env=on("intel/haswell", stack))
    assert proc.returncode == EXIT_CANNOT_RUN
    assert message(proc) == (
        f"onestack: the x86-64-v3 build has no program probe ({stack.builds['x86-64-v3']}/probe: "
        f"No such file or directory; {stack.table}:2)"
    )


def test_a_build_folder_that_is_the_dispatch_folder_is_refused(stack):
    """Otherwise the dispatcher would exec itself forever."""
    tree.write_table(stack.table.parent, f"x86-64-v2 {stack.bin}\n")
    proc = tree.run([stack.entry], env=on("intel/haswell", stack))
    assert proc.returncode == EXIT_CANNOT_RUN
    assert message(proc) == f"onestack: {stack.table}:1: the x86-64-v2 build's {stack.entry} is this dispatcher itself"


# ---- the table ----


@pytest.mark.parametrize(
    "text, line, error",
    [
        ("x86-64-v2 /a\nhaswell /b\n", 2, "unknown level 'haswell'; allowed: x86-64, x86-64-v2, x86-64-v3, x86-64-v4"),
        (
            "x86-64-v2 relative/bin\n",
            1,
            "expected `x86-64-v2 <absolute bin folder>`, got no absolute folder after the level",
        ),
        ("# the builds\nx86-64-v2\n", 2, "expected `x86-64-v2 <absolute bin folder>`"),
        ("x86-64-v3 /a\nx86-64-v2 /b\n", 2, "x86-64-v2 after x86-64-v3 (line 1): list each level once, lowest first"),
        ("x86-64-v2 /a\n\nx86-64-v2 /b\n", 3, "x86-64-v2 after x86-64-v2 (line 1): list each level once, lowest first"),
        ("x86-64-v2 /" + "a" * 5000 + "\n", 1, "line longer than 4094 characters"),
        (
            "x86-64-v2 /a\nat-most x86-64-v3 some_class GenuineIntel 6\n",
            2,
            "expected `at-most <level> <class> <vendor> <family> <model> [<brand prefix>]`",
        ),
        ("x86-64-v2 /a\nat-most haswell c GenuineIntel 6 0x55\n", 2, "unknown level 'haswell'; allowed: x86-64, "),
        ("x86-64-v2 /a\nat-most x86-64-v3 c GenuineIntel 6 0x55 " + "B" * 49 + "\n", 2, "a brand prefix longer"),
        ("x86-64-v2 /a\nat-most x86-64 c GenuineIntel 6 0x55\n", 2, "at most x86-64 (v1) is below the table's lowest"),
    ],
)
def test_a_malformed_table_line_is_refused_with_its_file_and_line(text, line, error, stack):
    tree.write_table(stack.table.parent, text)
    proc = tree.run([stack.entry], env=on("intel/haswell", stack))
    assert proc.returncode == EXIT_UNDECIDED
    assert message(proc).startswith(f"onestack: {stack.table}:{line}: {error}"), message(proc)
    assert not stack.marker.exists()


@pytest.mark.parametrize(
    "text, error",
    [
        ("# generated at publish time\n\n", "lists no build (lines `x86-64-v2 <absolute bin folder>`)"),
        (
            None,
            "No such file or directory (the table of this dispatcher's builds, made when the module tree is published)",
        ),
    ],
)
def test_an_empty_or_missing_table_is_refused(text, error, stack):
    if text is None:
        stack.table.unlink()
    else:
        tree.write_table(stack.table.parent, text)
    proc = tree.run([stack.entry], env=on("intel/haswell", stack))
    assert proc.returncode == EXIT_UNDECIDED
    assert message(proc) == f"onestack: {stack.table}: {error}"


def test_comments_blanks_tabs_and_folders_with_blanks(tmp_path, built):
    stack = make_stack(tmp_path / "a b", built)
    v2, v3 = stack.builds["x86-64-v2"], stack.builds["x86-64-v3"]
    tree.write_table(stack.table.parent, f"  # levels.conf\n\n\tx86-64-v2 \t{v2}  \r\n# v3 next\nx86-64-v3\t{v3}\n")
    assert ran_build(tree.run([stack.entry], env=on("amd/zen4-epyc-genoa", stack))) == "x86-64-v3"


# ---- a lower level on some CPU models: the table's `at-most` lines ----

SILVER = "intel/xeon-silver-4114"


def at_most(stack, *lines: str) -> None:
    """The stack's table with `at-most` lines after its builds."""
    builds = "".join(f"{level} {folder}\n" for level, folder in stack.builds.items())
    tree.write_table(stack.table.parent, builds + "".join(f"at-most {line}\n" for line in lines))


def test_an_at_most_line_lowers_the_level_on_its_cpu_model_and_says_why(stack):
    at_most(stack, "x86-64-v3 one_fma GenuineIntel 6 0x55 Intel(R) Xeon(R) Silver")
    proc = tree.run([stack.entry], env=on(SILVER, stack, ONESTACK_CPU_VERBOSE="1"))
    assert ran_build(proc) == "x86-64-v3"
    assert f"running the x86-64-v3 build (one_fma: at most x86-64-v3 on this CPU ({stack.table}:4)): " in proc.stderr
    check = tree.run([stack.bin / tree.CHECK_NAME], env=on(SILVER, stack))
    assert check.stdout.splitlines()[1] == f"onestack: one_fma: at most x86-64-v3 on this CPU ({stack.table}:4)"
    forced = tree.run([stack.entry], env=on(SILVER, stack, ONESTACK_CPU_LEVEL="x86-64-v4"))
    assert ran_build(forced) == "x86-64-v4"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("x86-64-v3 c GenuineIntel 6 0x55 Intel(R) Xeon(R) Gold", "x86-64-v4"),  # another brand
        ("x86-64-v3 c GenuineIntel 6 0x56", "x86-64-v4"),  # another model
        ("x86-64-v3 c GenuineIntel 15 0x55", "x86-64-v4"),  # another family
        ("x86-64-v3 c AuthenticAMD 6 0x55", "x86-64-v4"),  # another vendor
        ("x86-64-v3 c GenuineIntel 6 85", "x86-64-v3"),  # the model in decimal, no brand: any
        ("x86-64-v3 c GenuineIntel 6 0x55 Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", "x86-64-v3"),  # all of it
    ],
)
def test_an_at_most_line_matches_vendor_family_model_and_brand_start(line, expected, stack):
    at_most(stack, line)
    assert ran_build(tree.run([stack.entry], env=on(SILVER, stack))) == expected


def test_an_amd_family_above_15_is_matched_with_its_extended_family(stack):
    """A Zen 5 (family 0x1a: base family 0xf plus extended 0xb; model 0x02,
    Turin), as its bare-metal report gives it. Its line matches by the family
    AMD's manuals give; Zen 4's family does not."""
    at_most(stack, "x86-64-v3 zen5 AuthenticAMD 26 0x02")
    assert ran_build(tree.run([stack.entry], env=on("amd/zen5-epyc-9655", stack))) == "x86-64-v3"
    at_most(stack, "x86-64-v3 zen4 AuthenticAMD 25 0x02")
    assert ran_build(tree.run([stack.entry], env=on("amd/zen5-epyc-9655", stack))) == "x86-64-v4"


def test_the_lowest_of_several_matching_lines_wins_and_a_higher_one_lowers_nothing(stack):
    at_most(stack, "x86-64-v3 a GenuineIntel 6 0x55", "x86-64-v2 b GenuineIntel 6 0x55 Intel(R) Xeon(R)")
    assert ran_build(tree.run([stack.entry], env=on(SILVER, stack))) == "x86-64-v2"
    at_most(stack, "x86-64-v4 a GenuineIntel 6 0x55")
    check = tree.run([stack.bin / tree.CHECK_NAME], env=on(SILVER, stack))
    assert len(check.stdout.splitlines()) == 1 and "run the x86-64-v4 build" in check.stdout


def test_a_brand_line_needs_the_brand_leaves_and_a_table_without_one_reads_none(stack):
    """The brand string is read only for a table whose lines name one: the
    older recorded CPUs have no such leaves, and need none."""
    at_most(stack, "x86-64-v3 c GenuineIntel 6 0x55 Intel(R) Xeon(R) Silver")
    proc = tree.run([stack.entry], env=on("intel/skylake-avx512", stack))
    assert proc.returncode == EXIT_UNDECIDED and "no record of CPUID leaf 0x80000002 subleaf 0x00" in proc.stderr
    at_most(stack, "x86-64-v3 c GenuineIntel 6 0x55")
    assert ran_build(tree.run([stack.entry], env=on("intel/skylake-avx512", stack))) == "x86-64-v3"


# ---- names and links ----


def test_a_symbolic_link_to_an_entry_point_runs_its_program(stack, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "alias").symlink_to(stack.entry)
    assert ran_build(tree.run([tmp_path / "elsewhere" / "alias"], env=on("intel/haswell", stack))) == "x86-64-v3"


def test_a_symbolic_link_to_the_dispatcher_itself_is_refused(stack, built, tmp_path):
    """/proc/self/exe resolves it to onestack-dispatch: no program name."""
    (stack.bin / "linked").symlink_to(built.dispatcher)
    proc = tree.run([stack.bin / "linked"], env=on("intel/haswell", stack))
    assert proc.returncode == EXIT_UNDECIDED
    assert "usage: onestack-dispatch --level | --cpuid; to run a program, execute a hard link or copy" in proc.stderr


# ---- the test input itself ----


@pytest.mark.parametrize(
    "text, error",
    [
        ("0x00000000 0x00: eax=0x0000000d\n", ":1: not a record: expected `0x<leaf> 0x<subleaf>: eax=0x.."),
        (
            "0x00000000 0x00: eax=0x0000000d ebx=0x0 ecx=0x0 edx=0x0\n",
            ": no record of CPUID leaf 0x00000001 subleaf 0x00",
        ),
    ],
)
def test_a_bad_cpuid_record_is_refused(text, error, built, tmp_path):
    (tmp_path / "bad.cpuid").write_text(text)
    proc = tree.run([built.dispatcher, "--level"], env={"ONESTACK_CPUID_FILE": str(tmp_path / "bad.cpuid")})
    assert proc.returncode == EXIT_UNDECIDED
    assert f"onestack: {tmp_path / 'bad.cpuid'}{error}" in proc.stderr


def test_an_xsave_cpu_record_without_xcr0_is_refused(built, tmp_path):
    haswell = [line for line in tree.case("intel/haswell").read_text().splitlines() if not line.startswith("xcr0=")]
    (tmp_path / "no-xcr0.cpuid").write_text("\n".join(haswell) + "\n")
    proc = tree.run([built.dispatcher, "--level"], env={"ONESTACK_CPUID_FILE": str(tmp_path / "no-xcr0.cpuid")})
    assert proc.returncode == EXIT_UNDECIDED
    assert "no `xcr0=0x..` record, and CPUID says OSXSAVE" in proc.stderr


def test_the_dispatcher_under_its_own_name_shows_its_usage(built):
    proc = tree.run([built.dispatcher])
    assert proc.returncode == EXIT_UNDECIDED and proc.stderr.startswith("onestack: usage: onestack-dispatch")


# ---- the recipe ----


def test_the_dispatcher_is_static_and_plain_x86_64(built):
    """No program interpreter (PT_INTERP) in its ELF program headers, and
    compiled for the x86-64 baseline."""
    assert "-march=x86-64" in tree.recipe_constant("COMPILE_FLAGS")
    elf = built.dispatcher.read_bytes()
    assert elf[:4] == b"\x7fELF" and elf[4] == 2, "not a 64-bit ELF"
    phoff = int.from_bytes(elf[32:40], "little")
    phentsize, phnum = int.from_bytes(elf[54:56], "little"), int.from_bytes(elf[56:58], "little")
    types = [int.from_bytes(elf[phoff + i * phentsize : phoff + i * phentsize + 4], "little") for i in range(phnum)]
    assert 3 not in types, "the dispatcher has a program interpreter: it is dynamically linked"


# ---- the report's start cost (onestack/report/start_cost.py) ----


def test_the_report_finds_the_build_the_dispatcher_runs_and_times_its_start(tmp_path, built):
    """On a one-level table every CPU of the baseline runs that build; the
    report's start cost comes from a copy of the same dispatcher and table."""
    one = make_stack(tmp_path, built, levels=("x86-64-v2",))
    chosen = str(one.builds["x86-64-v2"])
    assert dispatch.choice_here(one.bin) == ("x86-64-v2", chosen, "")
    assert start_cost.same_build(one.bin, chosen) == chosen
    assert start_cost.same_build(one.bin, str(tmp_path)) is None
    cost = start_cost.measure(one.bin, starts=40)
    assert cost["starts"] == 40 and cost["low_ms"] <= cost["ms"] <= cost["high_ms"], cost
    # Milliseconds, not seconds, either way: one start stalled by a loaded
    # machine moves the mean of 40 pairs by milliseconds.
    assert abs(cost["ms"]) < 50, f"an exec of a static program: milliseconds, not {cost['ms']} ms"
