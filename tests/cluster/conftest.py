"""The virtual cluster for the tests of tests/cluster/: one per test module,
always taken down after it (also when a test fails); a cluster of the same
name left over by a killed run is taken down before."""

import os
from pathlib import Path

import pytest
from conftest import why_no_cluster

from onestack import cluster

CONFIG_FILE = Path(__file__).with_name("cluster.yaml")


@pytest.fixture(scope="module")
def cluster_config() -> cluster.Config:
    """tests/cluster/cluster.yaml, or the file ONESTACK_TEST_CLUSTER names
    (test_cleanup.py runs a pytest of its own on another cluster)."""
    if why_no_cluster():
        pytest.skip(why_no_cluster())
    return cluster.config.load(Path(os.environ.get("ONESTACK_TEST_CLUSTER", CONFIG_FILE)))


@pytest.fixture(scope="module")
def virtual_cluster(cluster_config):
    if cluster.leftovers(cluster_config):
        cluster.down(cluster_config)
    with cluster.running(cluster_config) as running:
        yield running
