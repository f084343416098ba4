"""`down` removes everything, also after the process that made the cluster
was killed: `up` killed half-way, and a test SIGKILLed while it held a
cluster and a job ran (its fixture never took the cluster down); `up`
stopped half-way by SIGTERM removes what it made itself."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from onestack import cluster
from onestack.cluster import state
from onestack.paths import REPO
from tests.cluster.waiting import wait_until

HOLDER = Path(__file__).with_name("holds_a_cluster.py")


def cluster_file(folder: Path, prefix: str, subnet: str) -> Path:
    """A cluster of its own for each test here, apart from the other tests' one."""
    file = folder / "cluster.yaml"
    file.write_text(f"prefix: {prefix}\nsubnet: {subnet}\nnodes: 2\n")
    return file


@contextlib.contextmanager
def started(argv: list, **how) -> Iterator[subprocess.Popen]:
    """A process the test kills at a moment of its choosing; killed at the
    end anyway if the test fails first (an `up` left running would make a
    cluster after the fixture's `down`)."""
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **how)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def down_with_the_cli(file: Path) -> float:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "onestack.cluster", "down", "--config", str(file)],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=120,
    )
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr
    return time.monotonic() - start


def assert_nothing_left(config: cluster.Config) -> None:
    assert cluster.leftovers(config) == []
    mounts = Path("/proc/self/mountinfo").read_text()
    assert f"/run/netns/{config.prefix}-" not in mounts and str(config.workdir) not in mounts


@pytest.fixture
def own_cluster(cluster_config, tmp_path, request):
    """(description file, config) of a cluster only this test uses; down afterwards in any case."""
    prefix, subnet = request.param
    file = cluster_file(tmp_path, prefix, subnet)
    config = cluster.config.load(file)
    if cluster.leftovers(config):
        cluster.down(config)
    yield file, config
    cluster.down(config)


@contextlib.contextmanager
def up_half_way(file: Path, config: cluster.Config) -> Iterator[subprocess.Popen]:
    """`make cluster`'s process once the network is made, munged and
    slurmctld started, the slurmds starting."""
    with started([sys.executable, "-m", "onestack.cluster", "up", "--config", str(file)]) as up:
        half_way = ("daemon", f"slurmd {config.nodes[0].name}")
        wait_until(
            lambda: half_way in state.made(config.workdir) or up.poll() is not None, 60, "up half-way", poll=0.02
        )
        assert up.poll() is None, "up ended before it could be stopped half-way"
        yield up


@pytest.mark.parametrize("own_cluster", [("oskup", "10.213.2.0/24")], indirect=True)
def test_down_after_up_was_killed_half_way(own_cluster):
    file, config = own_cluster
    with up_half_way(file, config) as up:
        up.send_signal(signal.SIGKILL)
        up.wait(timeout=30)
    left = cluster.leftovers(config)
    print("left by the killed up:", left)
    assert any(item.startswith("namespace") for item in left) and any("slurmctld" in item for item in left)
    print(f"down in {down_with_the_cli(file):.1f} s")
    assert_nothing_left(config)


@pytest.mark.parametrize("own_cluster", [("oskup", "10.213.2.0/24")], indirect=True)
def test_up_stopped_half_way_removes_what_it_made(own_cluster):
    """SIGTERM, as a cancelled CI job or `timeout` sends it: `up` removes
    what it made before it ends, with no `down` after it."""
    file, config = own_cluster
    with up_half_way(file, config) as up:
        up.send_signal(signal.SIGTERM)
        returncode = up.wait(timeout=90)
    assert returncode == 128 + signal.SIGTERM, returncode
    assert_nothing_left(config)


@pytest.mark.parametrize("own_cluster", [("oskpt", "10.213.3.0/24")], indirect=True)
def test_down_after_a_test_was_killed_with_its_job_running(own_cluster):
    file, config = own_cluster
    env = {**os.environ, "ONESTACK_TEST_CLUSTER": str(file)}

    def job_running() -> bool:
        return any(
            "sleep" in cluster.Cluster(config).processes_on(node.name).values()
            for node in config.nodes
            if node.name in cluster.network.namespaces(config.prefix)
        )

    with started([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HOLDER)], env=env) as holder:
        wait_until(lambda: job_running() or holder.poll() is not None, 90, "the held job running", poll=0.02)
        assert holder.poll() is None, "the holding pytest ended by itself"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    left = cluster.leftovers(config)
    print("left by the killed test:", left)
    assert any("sleep" in item for item in left) and any("srun" in item for item in left)
    print(f"down in {down_with_the_cli(file):.1f} s")
    assert_nothing_left(config)
