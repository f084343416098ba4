"""MKL's code path on the machine's CPU, through `module load`: an MKL
flavor's module preloads onestack-mkl-cpu-path (environments/components.yaml,
mkl `preload`), and MKL then names the instruction set its path uses
(MKL_VERBOSE) on any vendor's CPU with AVX2; without the library, on a CPU
not made by Intel, MKL 2020.4 names none: its generic path."""

import re
from pathlib import Path

import pytest

from onestack import problems, stack
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
    problem = next(iter(problems.load(stack.load().flavor(module).app.module).values()))
    ran = problems.execute(problem, problems.How(modules=(module,), env=(VERBOSE,), unset=unset), workdir, init)
    assert ran.exit == 0, ran.printed[-2000:]
    found = PATH_LINE.search(ran.printed)
    assert found, f"{module}: MKL named no code path:\n{ran.printed[-2000:]}"
    return found.group(1)


def test_an_mkl_flavor_runs_mkls_path_for_the_cpus_instruction_sets(tmp_path, init_script, published_flavors):
    mkl = [m for m in published_flavors if stack.load().flavor(m).math == "mkl"]
    if not mkl:
        pytest.skip("no MKL flavor is published here")
    module = mkl[0]
    env = lmod.clean_shell(init_script, f"module load {module}\necho $LD_PRELOAD").stdout
    assert "libonestack-mkl-cpu-path.so" in env, env
    cpu = _cpu()
    with_library = _mkl_path(module, tmp_path / "with", init_script)
    without = _mkl_path(module, tmp_path / "without", init_script, unset=("LD_PRELOAD",))
    print(f"{module} on a {cpu['vendor']} CPU: with the library: {with_library}; without: {without}")
    if cpu["avx2"]:
        assert "Advanced Vector Extensions" in with_library, with_library
    if cpu["vendor"] != "GenuineIntel":
        assert without == "Intel(R) Architecture processors", f"MKL gave this {cpu['vendor']} CPU: {without}"
