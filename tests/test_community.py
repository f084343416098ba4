"""Checks the project did not write (tests/community/checks.yaml), run by
ReFrame from a clean shell against the published tree, as `make community`
runs them: each passes on the flavors it names; and it can fail: EESSI's
LAMMPS check refuses an MPI-only LAMMPS, which never prints the OpenMP line
it asserts."""

import pytest
from conftest import require_published, run_flavors

from onestack import community

CASES = [(check_id, f"{c['app']}/{flavor}") for check_id, c in community.checks().items() for flavor in c["flavors"]]


@pytest.mark.parametrize("check_id, module", CASES, ids=[f"{c}:{m}" for c, m in CASES])
def test_community_check_passes(check_id, module, published_flavors, tmp_path):
    if module not in {f.module_name for f in run_flavors()}:
        pytest.skip(f"{module}: not in this run's build lists (`make stack` builds it)")
    require_published(module, published_flavors)
    verdict = community.run(check_id, module, tmp_path)
    print(verdict.line())
    assert verdict.passed, f"{verdict.line()}\n{verdict.output[-3000:]}"


def test_the_lammps_check_fails_an_mpi_only_build(published_flavors, tmp_path):
    mpi_only = [f.module_name for f in run_flavors("lmp") if f.threads == "none"]
    if not mpi_only:
        pytest.skip("no MPI-only LAMMPS flavor is in this run's build lists (make test builds one)")
    module = mpi_only[0]
    require_published(module, published_flavors)
    verdict = community.run("eessi-lammps-lj", module, tmp_path)
    print(verdict.line())
    assert not verdict.passed, verdict.output[-3000:]
    assert "OpenMP thread" in verdict.output and "sanity error" in verdict.output, verdict.output[-3000:]
