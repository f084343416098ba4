"""The exec-time CPU dispatcher as its tests build and lay it out: compiled
from the recipe's C file with the recipe's own flags, a dispatch folder
(levels.conf, bin/ of entry points) over per-level bin folders, and the
CPUID test vectors of dispatch/cases/ (EESSI archdetect style: a recorded
CPU report `<case>.cpuid` and the level it must give, `<case>.output`)."""

import ast
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List

from onestack import paths

RECIPE_DIR = paths.REPO / "packages" / "spack_repo" / "onestack" / "packages" / "onestack_dispatch"
SOURCE = RECIPE_DIR / "onestack-dispatch.c"
PROGRAMS = paths.REPO / "dispatch" / "programs"
CASES = paths.REPO / "dispatch" / "cases"
LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")
# The dispatcher's exit codes (its header comment).
EXIT_UNDECIDED, EXIT_BELOW_BASELINE, EXIT_CANNOT_RUN = 125, 126, 127
CHECK_NAME = "onestack-cpu-check"
# The x86-64 ABI's program interpreter: glibc's own reading of the CPU
# (`--help` lists the glibc-hwcaps levels it finds supported).
GLIBC_LOADER = "/lib64/ld-linux-x86-64.so.2"
# Core 2: x86-64 without v2's POPCNT, SSE4.2, CMPXCHG16B.
BELOW_BASELINE_CPU = "Conroe"
# What ONESTACK_CPU_VERBOSE=1 prints: the CPU's level, the build chosen, its path.
VERBOSE_LINE = re.compile(r"^onestack: CPU (\S+); running the (\S+) build: (.+)$", re.M)
# The dispatcher's own variables: a test starts without any the caller set.
DISPATCH_VARIABLES = ("ONESTACK_CPU_LEVEL", "ONESTACK_CPU_VERBOSE", "ONESTACK_CPUID_FILE")


# qemu 7.2's TCG emulates no AVX-512: it filters avx512f/bw/cd/dq/vl out of
# an AVX-512 model (Skylake-Server), warning so, and XCR0 has no opmask/ZMM
# state; the CPU it emulates is v3, and the dispatcher rightly says so.
QEMU_HIGHEST_LEVEL = "x86-64-v3"


def recipe_constant(name: str):
    """A module-level constant of the recipe's package.py, read without
    importing it (that needs Spack)."""
    tree = ast.parse((RECIPE_DIR / "package.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(f"{RECIPE_DIR / 'package.py'}: no constant {name}")


def compile_c(source: Path, exe: Path, *flags: str) -> Path:
    proc = subprocess.run(["gcc", *flags, "-o", str(exe), str(source)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"gcc {' '.join(flags)} {source}:\n{proc.stderr}"
    return exe


def compile_dispatcher(folder: Path) -> Path:
    """The dispatcher as the recipe compiles it, warnings made errors."""
    return compile_c(SOURCE, folder / "onestack-dispatch", *recipe_constant("COMPILE_FLAGS"), "-Werror")


def lay_out(root: Path, dispatcher: Path, builds: Dict[str, Path], programs: Iterable[str]) -> Path:
    """<root>/levels.conf listing builds ({level: bin folder}, lowest first)
    and <root>/bin/ with a hard link of the dispatcher per program name and
    onestack-cpu-check; returns <root>/bin."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name in [*programs, CHECK_NAME]:
        os.link(dispatcher, bin_dir / name)
    write_table(root, "".join(f"{level} {folder}\n" for level, folder in builds.items()))
    return bin_dir


def write_table(root: Path, text: str) -> Path:
    (root / "levels.conf").write_text(text)
    return root / "levels.conf"


def run(command: List, env: Dict[str, str] = None, argv0: str = None) -> subprocess.CompletedProcess:
    """A command (e.g. an entry point and its arguments, or qemu-x86_64 and
    its), argv[0] replaced by argv0 if given, with the caller's environment
    less the dispatcher's variables, plus env."""
    args = [str(c) for c in command]
    executable = args[0]
    if argv0:
        args[0] = argv0
    base = {k: v for k, v in os.environ.items() if k not in DISPATCH_VARIABLES}
    return subprocess.run(
        args, executable=executable, env={**base, **(env or {})}, capture_output=True, text=True, timeout=60
    )


def cases() -> List[Path]:
    return sorted(CASES.glob("*/*.cpuid"))


def case(name: str) -> Path:
    """A recorded CPU by its name under dispatch/cases/, e.g. intel/haswell."""
    path = CASES / f"{name}.cpuid"
    assert path.is_file(), f"no test vector {path}"
    return path


def expected_level(case_file: Path) -> str:
    return case_file.with_suffix(".output").read_text().strip()


def records(text: str) -> List[str]:
    """The record lines of a CPU report (comments and blank lines dropped)."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def brand_records(brand: str) -> List[str]:
    """CPUID leaves 0x80000002-4 as a CPU with that brand string reports
    them: 48 bytes of ASCII, NUL-padded, four bytes a register, little-endian."""
    raw = brand.encode("ascii").ljust(48, b"\0")
    words = [int.from_bytes(raw[i : i + 4], "little") for i in range(0, 48, 4)]
    return [
        f"0x{0x80000002 + leaf:08x} 0x00: "
        + " ".join(f"{reg}=0x{words[4 * leaf + i]:08x}" for i, reg in enumerate(("eax", "ebx", "ecx", "edx")))
        for leaf in range(3)
    ]


def variant(name: str, out: Path, brand: str = None, signature: int = None) -> Path:
    """A recorded CPU with another brand string, or another family and model
    (leaf 1's EAX), written to out: the same CPU in another model's name."""
    lines = records(case(name).read_text())
    if brand is not None:
        lines = [line for line in lines if not line.startswith(("0x80000002", "0x80000003", "0x80000004"))]
        lines += brand_records(brand)
    if signature is not None:
        lines = [re.sub(r"^(0x00000001 0x00: eax=)0x[0-9a-f]{8}", rf"\g<1>0x{signature:08x}", line) for line in lines]
    out.write_text("\n".join(lines) + "\n")
    return out


def glibc_hwcaps_level(prefix: List[str] = ()) -> str:
    """The highest glibc-hwcaps level the dynamic loader marks supported on
    this CPU (or under a prefix command such as qemu), x86-64 if none."""
    out = subprocess.run([*prefix, GLIBC_LOADER, "--help"], capture_output=True, text=True, timeout=60).stdout
    supported = [
        line.split()[0] for line in out.splitlines() if line.strip().startswith("x86-64-v") and "(supported" in line
    ]
    return max(supported, default="x86-64", key=LEVELS.index)


def emulated_level(generation: dict) -> str:
    """The level of a cpus.yaml generation's CPU as qemu emulates it."""
    return min(f"x86-64-{generation['x86_64_level']}", QEMU_HIGHEST_LEVEL, key=LEVELS.index)


def died_of_sigill(proc: subprocess.CompletedProcess) -> bool:
    return proc.returncode in (-signal.SIGILL, 128 + signal.SIGILL)
