"""One executable per flavor for every CPU generation of the site
(environments/cpus.yaml): each published flavor's pw.x runs QE's test problem
under qemu emulating each generation, without an illegal instruction, with
the right energy, and shows which code path its math library chose there.
A control built for Haswell only dies with SIGILL on the older CPUs."""

import gzip
import signal
import subprocess
from pathlib import Path

import pytest

from onestack import flavors, lmod, problems

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
