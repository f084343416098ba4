"""Every published flavor across 2 nodes of the virtual cluster, as a
site's users run it: a batch job that loads the flavor's module and starts
its ranks with srun, and the same with the MPI's own mpirun inside the
allocation. Each run is checked: its reference result, one job of N ranks
on 2 distinct hosts (each rank names its host before the program starts),
and bytes that really crossed the nodes' interfaces. The MPICH ABI swap
(mpi-runtime/impi) across nodes too."""

import pytest

from onestack import problems, stack
from onestack.problems import check

CASES = [(app, case) for app in problems.apps() for case in sorted(problems.load(app))]
# Slurm's own traffic for a job (controller <-> slurmd, PMI) is a few
# kilobytes per node; a problem's exchange between 2 ranks is far more.
MIN_CROSSING_BYTES = 200_000
LAUNCHERS = {"srun": ("srun",), "mpirun": ("mpirun", "-n", "{ranks}")}


def _crossed(before: dict, after: dict) -> int:
    """The fewest bytes any node received during the run."""
    return min(after[n].rx_bytes - before[n].rx_bytes for n in before)


def _run(cluster, problem, how, workdir, init_script):
    before = cluster.counters()
    outcome = problems.execute(problem, how, workdir, init_script,
                               submit=cluster.submitter(nodes=2, ranks=problem["ranks"]))
    crossed = _crossed(before, cluster.counters())
    assert not outcome.failure(), outcome.failure()
    checks = outcome.checks()
    hosts = check.hosts(outcome.printed)
    print(f"{' '.join(how.modules)} {problem.name} ({how.launcher[0]}): hosts {hosts}, {crossed / 1e6:.1f} MB "
          f"crossed; " + "; ".join(map(str, checks)))
    assert all(c.passed for c in checks), "\n".join(map(str, checks))
    assert len(hosts) == 2, f"the ranks ran on {hosts}, not on 2 hosts"
    assert crossed > MIN_CROSSING_BYTES, f"only {crossed} bytes crossed the network"


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_every_flavor_runs_across_two_nodes(app, case, launcher, virtual_cluster, init_script, published_flavors,
                                            tmp_path):
    modules = [m for m in published_flavors if m.startswith(f"{app}/")]
    assert modules, f"no {app} flavor is published"
    problem = problems.load(app)[case]
    for module in modules:
        how = problems.How(modules=(module,), launcher=LAUNCHERS[launcher], report_hosts=True)
        _run(virtual_cluster, problem, how, tmp_path / module.replace("/", "_"), init_script)


@pytest.mark.parametrize("mpi", ["mpich", "mvapich2"])
def test_the_abi_swap_across_two_nodes(mpi, virtual_cluster, init_script, published_flavors, tmp_path):
    """A flavor built with MPICH or MVAPICH2 runs across the nodes on Intel
    MPI's runtime (its mpiexec.hydra inside the allocation)."""
    module = next((f.module_name for f in stack.load().flavors
                   if f.mpi == mpi and f.module_name in published_flavors and f.app.module == "hpl"), None)
    if module is None:
        pytest.skip(f"no HPL flavor built with {mpi} is published here (`make stack` builds them)")
    how = problems.How(modules=(module, "mpi-runtime/impi"), env=(("I_MPI_DEBUG", "4"),),
                       launcher=LAUNCHERS["mpirun"], report_hosts=True)
    _run(virtual_cluster, problems.load("hpl")["hpl"], how, tmp_path, init_script)
    assert "Intel(R) MPI Library, Version 2021.18.1" in (tmp_path / "output.txt").read_text()


def test_srun_without_the_modules_pmi_starts_singletons(virtual_cluster, init_script, published_flavors, tmp_path):
    """The module's SLURM_MPI_TYPE is what makes srun's ranks one MPI job:
    the ranks check catches the one-rank jobs srun starts without it."""
    module = next(m for m in published_flavors if m.startswith("hpl/") and m.endswith("-mpich"))
    how = problems.How(modules=(module,), unset=("SLURM_MPI_TYPE",), launcher=LAUNCHERS["srun"])
    outcome = problems.execute(problems.load("hpl")["hpl"], how, tmp_path, init_script,
                               submit=virtual_cluster.submitter(nodes=2, ranks=2))
    assert "expected one job of 2 ranks" in outcome.failure()
