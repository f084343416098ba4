"""Tests of the virtual cluster (a package, so that its conftest is cluster.conftest and
leaves the name `conftest` to tests/conftest.py, which other tests import)."""
