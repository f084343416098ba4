"""MPI jobs across two nodes with Debian's MPICH and Open MPI: started by srun
in a batch job, and by each MPI's own mpirun inside an allocation. Each rank
names its host, and the bytes it exchanged crossed the nodes' interfaces."""

import warnings
from pathlib import Path

import pytest

from onestack.cluster import JOB_END_S, mpis, pingpong

MPIS = {mpi.name: mpi for mpi in mpis.DEBIAN_MPIS}
# Few iterations, at most 2 s each: the figures do not matter here, the bytes
# do (up to ~70 MB each way).
QUICK_ARGS = "1000 4 3 2"

# Job scripts are constant text: what varies comes in as environment
# variables of the job (sbatch passes the submitter's environment on).
SRUN_JOB = """#!/bin/bash
srun --nodes=2 --ntasks=2 --mpi="$SRUN_MPI" "$PINGPONG" $PINGPONG_ARGS
"""
# Hydra inside an allocation starts its proxies with srun (its Slurm
# bootstrap, chosen from the job's environment); -v prints that command.
MPICH_MPIEXEC_JOB = """#!/bin/bash
mpiexec.mpich -v -n 2 -ppn 1 "$PINGPONG" $PINGPONG_ARGS
"""
# Open MPI's mpirun starts its daemons with srun (plm slurm); the verbose
# level names the component and prints the srun command.
OPENMPI_MPIRUN_JOB = """#!/bin/bash
mpirun.openmpi --mca plm_base_verbose 10 -n 2 --map-by node "$PINGPONG" $PINGPONG_ARGS
"""
LAUNCHERS = {"mpich": (MPICH_MPIEXEC_JOB, "--launcher slurm"), "openmpi": (OPENMPI_MPIRUN_JOB, "plm:slurm")}


@pytest.fixture(scope="module")
def programs(virtual_cluster) -> dict:
    build_dir = virtual_cluster.config.workdir / "test-programs"
    return {name: pingpong.build(mpi.mpicc, build_dir / f"pingpong-{name}") for name, mpi in MPIS.items()}


def run_across_nodes(cluster, script_text: str, mpi, exe: Path, folder: Path):
    """The job, with the nodes' interface counters before and after."""
    script = folder / "job.sh"
    script.write_text(script_text)
    env = dict(mpi.env + mpi.verbose_env, SRUN_MPI=mpi.srun_mpi, PINGPONG=str(exe), PINGPONG_ARGS=QUICK_ARGS)
    before = cluster.counters()
    job = cluster.run_job(
        script,
        "--nodes=2",
        "--ntasks=2",
        f"--time={pingpong.TIME_LIMIT}",
        timeout=int(pingpong.TIME_LIMIT) * 60 + JOB_END_S,
        env=env,
    )
    after = cluster.counters()
    print(f"job {job.id}: {job.state} in {job.seconds:.1f} s\n{job.output}")
    return job, before, after


def check_two_hosts_and_bytes(cluster, mpi, job, before, after) -> dict:
    if mpi.name == "mpich" and job.state == "TIMEOUT" and pingpong.complete(job.output):
        # A known defect of the MPI, not of the cluster: tolerated, and said in the run's warnings summary.
        warnings.warn(f"{mpi.name} job {job.id}: {mpis.FINALIZE_HANG}", stacklevel=2)
    else:
        assert job.state == "COMPLETED", job.output
    found = pingpong.parse(job.output)
    hosts = found["hosts"][0][0].split(",")
    ranks = {extra["rank"]: extra["host"] for _, extra in found["rank"]}
    names = [node.name for node in cluster.config.nodes]
    assert sorted(hosts) == names and sorted(ranks.values()) == names, f"ranks on {ranks}"
    payload = int(found["payload_bytes"][0][0])
    for name in names:
        received = after[name].rx_bytes - before[name].rx_bytes
        sent = after[name].tx_bytes - before[name].tx_bytes
        print(f"{name}: received {received} B, sent {sent} B; payload each way {payload} B")
        assert received > payload and sent > payload, f"{name}: the messages did not cross its interface"
    return found


@pytest.mark.parametrize("name", MPIS)
def test_srun_starts_a_job_across_two_nodes(name, virtual_cluster, programs, tmp_path):
    mpi = MPIS[name]
    job, before, after = run_across_nodes(virtual_cluster, SRUN_JOB, mpi, programs[name], tmp_path)
    check_two_hosts_and_bytes(virtual_cluster, mpi, job, before, after)
    transports = mpis.transports(mpi, job.output)
    print(f"{name} between the nodes: {transports}")
    assert transports and all("tcp" in t for t in transports), f"{name} did not use TCP between the nodes"


@pytest.mark.parametrize("name", MPIS)
def test_mpirun_inside_an_allocation_reaches_the_other_node(name, virtual_cluster, programs, tmp_path):
    mpi = MPIS[name]
    script, slurm_launch = LAUNCHERS[name]
    job, before, after = run_across_nodes(virtual_cluster, script, mpi, programs[name], tmp_path)
    check_two_hosts_and_bytes(virtual_cluster, mpi, job, before, after)
    assert slurm_launch in job.output and "srun" in job.output, f"{name}'s launcher did not start srun"
