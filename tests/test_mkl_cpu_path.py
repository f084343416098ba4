"""MKL's code path on the machine's CPU, through `module load`: an MKL
flavor's module preloads onestack-mkl-cpu-path (environments/components.yaml,
mkl `preload`), and MKL then names the instruction set its path uses
(MKL_VERBOSE) on any vendor's CPU with AVX2; without the library, on a CPU
not made by Intel, MKL 2020.4 names none: its generic path. On that path MKL
reads the CPU's data caches as Intel's CPUs report them; with the library it
knows them on AMD's too (without, QE 7.5's lda+U case went wrong on one
rank)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import UNCHECKED, require_published, run_flavors

from onestack import host, problems, spack, stack
from onestack.modules import lmod

VERBOSE = ("MKL_VERBOSE", "1")
PATH_LINE = re.compile(r"MKL_VERBOSE Intel\(R\) MKL .* for Intel\(R\) 64 architecture (.*?), Lnx")


def _cpu() -> dict:
    info = Path("/proc/cpuinfo").read_text()
    return {
        "vendor": re.search(r"vendor_id\s*:\s*(\S+)", info).group(1),
        "avx2": re.search(r"^flags\s*:.*\bavx2\b", info, re.M) is not None,
    }


def _mkl_path(module: str, workdir: Path, init: Path, unset: tuple = ()) -> str:
    flavor = stack.load().flavor(module)
    problem = problems.of_flavor(flavor, next(iter(problems.load(flavor.app.module))))
    ran = problems.execute(problem, problems.How(modules=(module,), env=(VERBOSE,), unset=unset), workdir, init)
    assert ran.exit == 0, f"{module}: exit {ran.exit}\n{ran.printed[-2000:]}"
    found = PATH_LINE.search(ran.printed)
    assert found, f"{module}: MKL named no code path:\n{ran.printed[-2000:]}"
    return found.group(1)


@pytest.fixture(scope="module")
def mkl(published_flavors) -> str:
    """The first MKL flavor of this run's build lists."""
    found = [f.module_name for f in run_flavors() if f.math == "mkl"]
    if not found:
        pytest.skip("no MKL flavor is in this run's build lists (`make stack` builds them)")
    require_published(found[0], published_flavors)
    return found[0]


def test_an_mkl_flavor_runs_mkls_path_for_the_cpus_instruction_sets(mkl, tmp_path, init_script):
    env = lmod.clean_shell(init_script, f"module load {mkl}\necho $LD_PRELOAD").stdout
    assert "libonestack-mkl-cpu-path.so" in env, env
    cpu = _cpu()
    with_library = _mkl_path(mkl, tmp_path / "with", init_script)
    without = _mkl_path(mkl, tmp_path / "without", init_script, unset=("LD_PRELOAD",))
    print(f"{mkl} on a {cpu['vendor']} CPU: with the library: {with_library}; without: {without}")
    if cpu["avx2"]:
        assert "Advanced Vector Extensions" in with_library, f"{mkl}: {with_library}"
    else:
        UNCHECKED.append(f"{mkl}: MKL's AVX path with the library: this CPU has no AVX2 ({with_library})")
    if cpu["vendor"] == "GenuineIntel":
        pytest.skip(f"{mkl}: on an Intel CPU MKL picks its path without the library: its effect is not shown here")
    assert without == "Intel(R) Architecture processors", f"{mkl}: MKL gave this {cpu['vendor']} CPU: {without}"


# MKL's own answer (mkl_serv_get_cache_size: 1 is the first data cache's
# size in bytes, -1 none), through libmkl_rt as a program of the flavor finds it.
CACHE_PROBE = """
import ctypes, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL).MKL_Get_Max_Threads()
size = ctypes.CDLL(None).mkl_serv_get_cache_size
size.restype, size.argtypes = ctypes.c_long, [ctypes.c_int]
print(size(1))
"""


def _mkl_rt(module: str) -> Path:
    """libmkl_rt beside the libmkl_core the flavor's program loads."""
    flavor = stack.load().flavor(module)
    program = Path(spack.installed([flavor])[1][flavor.spack_spec]["prefix"]) / "bin" / flavor.app.program
    ldd = subprocess.run(["ldd", str(program)], text=True, capture_output=True, check=True).stdout
    core = next(line.split("=>")[1].split()[0] for line in ldd.splitlines() if "libmkl_core" in line)
    return Path(os.path.realpath(core)).with_name("libmkl_rt.so")


def test_an_mkl_flavor_knows_the_cpus_data_caches(mkl, init_script):
    l1 = int(subprocess.run(["getconf", "LEVEL1_DCACHE_SIZE"], text=True, capture_output=True, check=True).stdout)
    probe = f"MKL_THREADING_LAYER=SEQUENTIAL python3 -c {shlex.quote(CACHE_PROBE)} {shlex.quote(str(_mkl_rt(mkl)))}"
    ran = lmod.clean_shell(init_script, f"module load {mkl}\n{probe}\nunset LD_PRELOAD\n{probe}")
    assert ran.returncode == 0, ran.stderr
    with_library, without = (int(v) for v in ran.stdout.split())
    print(f"{mkl}: MKL's first data cache {with_library} bytes with the library, {without} without; the CPU's {l1}")
    assert with_library == l1, f"{mkl}: MKL holds the first data cache is {with_library} bytes, the CPU's is {l1}"
    if host.vendor() == "GenuineIntel":
        pytest.skip(f"{mkl}: on an Intel CPU MKL knows its caches without the library: its effect is not shown here")
    assert without != l1, f"{mkl}: MKL knows the caches without the library too ({without} bytes): it shows nothing"
