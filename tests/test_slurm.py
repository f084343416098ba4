"""The test problems as users' batch jobs: a real single-node Slurm (Debian's
slurm-wlm, started on loopback for this module and stopped after it), a job
script that loads the flavor's module, and srun starting the ranks with the
PMI plugin the module names (SLURM_MPI_TYPE)."""

from typing import List

import pytest

from onestack import problems, slurm, stack

CASES = [(app, case) for app in problems.apps() for case in sorted(problems.load(app))]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with slurm.single_node(tmp_path_factory.mktemp("slurm")) as running:
        yield running


def one_per_mpi(modules: List[str]) -> List[str]:
    """What srun adds to a run depends on the flavor's MPI (its PMI plugin,
    its binding), not on its math library: one flavor of each MPI is
    enough here (tests/test_problems.py runs every flavor under mpirun)."""
    mpi_of = {f.module_name: f.mpi for f in stack.load().flavors}
    chosen = {}
    for module in modules:
        chosen.setdefault(mpi_of[module], module)
    return sorted(chosen.values())


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_batch_job_matches_reference(app, case, cluster, init_script, published_flavors, tmp_path):
    modules = one_per_mpi([m for m in published_flavors if m.startswith(f"{app}/")])
    assert modules, f"no {app} flavor is published"
    problem = problems.load(app)[case]
    for module in modules:
        checks = problems.run(problem, problems.How(modules=(module,), launcher=("srun",)),
                              tmp_path / module.replace("/", "_"), init_script, submit=cluster.submitter(problem["ranks"]))
        report = "\n".join(str(c) for c in checks)
        print(f"{module} {case} (sbatch + srun):\n{report}")
        assert all(c.passed for c in checks), report


def test_srun_without_the_modules_pmi_starts_singletons(cluster, init_script, published_flavors, tmp_path):
    """The module's SLURM_MPI_TYPE is what makes srun's ranks one MPI job: the
    ranks check catches the one-rank jobs srun starts without it."""
    module = next(m for m in published_flavors if m.startswith("hpl/") and m.endswith("-mpich"))
    problem = problems.load("hpl")["hpl"]
    with pytest.raises(problems.ProblemError, match="expected one job of 2 ranks"):
        problems.run(problem, problems.How(modules=(module,), unset=("SLURM_MPI_TYPE",), launcher=("srun",)), tmp_path,
                     init_script, submit=cluster.submitter(problem["ranks"]))
