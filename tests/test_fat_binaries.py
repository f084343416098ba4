"""One executable per flavor for every CPU generation of the site
(environments/cpus.yaml): each published flavor's pw.x runs QE's test problem
under qemu emulating each generation, without an illegal instruction, with
the right energy, and shows which code path its math library chose there.
A control built for Haswell only dies with SIGILL on the older CPUs, and
the native twin of an HPL flavor (built for this machine's CPU) dies on them
where the flavor's fat build passes HPL's check."""

import gzip
import json
import signal
import subprocess
from pathlib import Path

import pytest

from onestack import flavors, lmod, problems, spack

GENERATIONS = flavors.cpu_generations()
PROGRAMS = Path(__file__).parent / "programs"
# How each math library names the code path it dispatched to on this CPU.
DISPATCH = {
    "openblas": ("OPENBLAS_VERBOSE=2", "Core: "),
    "mkl": ("MKL_VERBOSE=1", "enabled processors"),
}


def _qemu(cpu: str, argv, env_lines="", init=None, module=None, cwd=None):
    load = f"module load {module}\n" if module else ""
    script = f"{load}{env_lines}\ncd '{cwd}'\nqemu-x86_64 -cpu {cpu} {' '.join(map(str, argv))}"  # qemu-user does not search PATH
    return lmod.clean_shell(init, script)


@pytest.fixture(scope="module")
def ncpp_case(tmp_path_factory):
    problem = problems.load("qe")["pw_scf-ncpp"]
    work = tmp_path_factory.mktemp("ncpp")
    problems.prepare(problem, work)
    return problem, work


@pytest.mark.parametrize("cpu", GENERATIONS, ids=[g["name"] for g in GENERATIONS])
def test_every_flavor_runs_on_every_cpu_generation(cpu, ncpp_case, init_script, published_flavors):
    problem, work = ncpp_case
    reference = (work / problem["reference"]).read_text()
    for module in (m for m in published_flavors if m.startswith("qe/")):
        math = module.split("/")[1].split("-")[0]
        verbose, marker = DISPATCH[math]
        proc = _qemu(cpu["qemu"], ["$(command -v pw.x)", "-in", Path(problem["input"]).name],
                     env_lines=f"export {verbose}\n{problems.exports(problem, work)}",
                     init=init_script, module=module, cwd=(work / problem["input"]).parent)
        assert proc.returncode == 0, f"{module} on {cpu['qemu']}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
        checks = problems.compare(problem, proc.stdout, reference)
        assert all(c.passed for c in checks), "\n".join(map(str, checks))
        path = next((line.strip() for line in (proc.stdout + proc.stderr).splitlines() if marker in line), None)
        assert path, f"{module} on {cpu['qemu']}: the math library did not name its code path"
        print(f"{module:22} {cpu['qemu']:15} {path.split(' architecture ')[-1][:90]}")


def test_single_path_control_dies_with_sigill_on_older_cpus(tmp_path, init_script):
    exe = tmp_path / "avx2_only"
    subprocess.run(["gcc", "-O3", "-march=haswell", "-o", str(exe), str(PROGRAMS / "avx2_only.c")], check=True)
    outcomes = {g["qemu"]: _qemu(g["qemu"], [exe], init=init_script, cwd=tmp_path).returncode
                for g in GENERATIONS}
    print(outcomes)
    killed = (-signal.SIGILL, 128 + signal.SIGILL)  # by the signal itself, or through the shell
    assert outcomes["Nehalem"] in killed and outcomes["SandyBridge"] in killed, outcomes
    assert outcomes["Haswell"] == 0, outcomes


def test_nothing_is_built_for_the_build_host(published_flavors, init_script):
    """Spack compiled each flavor for the site's oldest generation, never -march=native."""
    baseline = GENERATIONS[0]["spack_target"].replace("_", "-")
    for module in (m for m in published_flavors if m.startswith("qe/")):
        prefix = lmod.clean_shell(init_script, f"module load {module}\necho $QUANTUM_ESPRESSO_ROOT").stdout.strip()
        build_env = (Path(prefix) / ".spack" / "spack-build-env.txt").read_text()
        assert f"SPACK_TARGET_ARGS_FORTRAN='-march={baseline} -mtune=generic'" in build_env, module
        with gzip.open(Path(prefix) / ".spack" / "spack-build-out.txt.gz", "rt") as log:
            assert "-march=native" not in log.read(), module


def test_native_twin_dies_where_the_fat_flavor_runs(tmp_path, init_script, published_flavors):
    """HPL on one rank under qemu (tiny N so emulation stays fast): the
    published flavor passes HPL's check on every generation; its twin built
    for this machine's CPU dies on each (qemu has none of the host's AVX-512)."""
    twin = next(f for f in flavors.load() if f.native)
    fat = twin.module_name[: -len("-native")]
    assert fat in published_flavors, f"{fat} is not published"
    root = spack.query("flavor_roots", json.dumps([twin.spack_spec()]))[twin.spack_spec()]
    assert root and root["installed"], f"{twin.module_name} is not built: `make stack-for-tests` builds it"
    problem = {**problems.load("hpl")["hpl"], "params": {"N": 200, "NB": 32, "P": 1, "Q": 1}}
    for g in GENERATIONS:
        work = tmp_path / g["qemu"]
        problems.prepare(problem, work)
        ran = _qemu(g["qemu"], ["$(command -v hpcc)"], init=init_script, module=fat, cwd=work)
        assert ran.returncode == 0, f"{fat} on {g['qemu']}: exit {ran.returncode}"
        checks = problems.compare(problem, (work / "hpccoutf.txt").read_text())
        assert all(c.passed for c in checks), "\n".join(map(str, checks))
        (work / "hpccoutf.txt").unlink()
        died = _qemu(g["qemu"], [f"{root['prefix']}/bin/hpcc"], init=init_script, module=fat, cwd=work)
        print(f"{g['qemu']:15} {fat}: passed; {twin.module_name} (target {root['target']}): exit {died.returncode}")
        # MPICH's UCX catches the SIGILL, names it, then dies of a SIGSEGV.
        sigill = died.returncode in (-signal.SIGILL, 128 + signal.SIGILL) or "Illegal instruction" in died.stderr
        assert died.returncode != 0 and sigill, f"{twin.module_name} on {g['qemu']}: exit {died.returncode}"


def test_intel_and_nvhpc_flavors_ask_their_compiler_for_every_path():
    """Built only where those compilers exist: what Spack is asked for is
    Intel's -ax dispatch over every generation (never -fast), and for NVHPC,
    whose -tp takes one target, the baseline generation's."""
    cells = {f.compiler: f.spack_spec() for f in flavors.load() if f.compiler in ("intel", "nvhpc")}
    ax = flavors.intel_ax_flag(GENERATIONS)
    assert ax == "-axCORE-AVX512,CORE-AVX2,AVX,SSE4.2"
    for flags in ("cflags", "cxxflags", "fflags"):
        assert f'{flags}="-O3 -ip {ax}"' in cells["intel"], cells["intel"]
        assert f'{flags}="-O3 -tp={GENERATIONS[0]["nvhpc_tp"]}"' in cells["nvhpc"], cells["nvhpc"]
    assert "-fast" not in cells["intel"]
