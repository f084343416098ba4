"""The offline source mirror admits a file only if its sha256 is the recipe's,
and a source missing from it is reported with what and where to put it."""

import re

from conftest import onestack, run_flavors

from onestack.cluster import imb
from onestack.modules import publish
from onestack.spack import mirror


def test_every_source_of_a_rebuild_is_in_the_mirror():
    proc = onestack("mirror", "--offline", "--rebuild")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_missing_source_is_a_clear_error_and_publishes_nothing(tmp_path, live_release):
    empty = {
        "ONESTACK_MIRROR": str(tmp_path / "mirror"),
        "ONESTACK_SOURCE_CACHE": str(tmp_path / "cache"),
        "ONESTACK_QE_GIT": "",
    }
    (tmp_path / "mirror").mkdir()
    proc = onestack("mirror", "--offline", "--rebuild", env_extra=empty)
    assert proc.returncode == 1
    err = proc.stderr
    assert "sources not in the mirror" in err
    # QE's files that only a git clone holds (ONESTACK_QE_GIT, unset here:
    # 6.7's patch, 7.5's source) are named, each QE version of the run's
    # lists, with the sha256 or commit that admits them.
    for version in {f.app.version for f in run_flavors("qe")}:
        assert f"quantum-espresso@{version}" in err, err
    assert re.search(r"\b([0-9a-f]{40}|[0-9a-f]{64})\b", err), err
    assert "fix: put each file" in err
    assert publish.current_release() == live_release


def test_without_a_clone_an_archive_no_build_downloads_is_fetched_by_spack_from_its_mirrors(tmp_path, monkeypatch):
    """Online, with no clone to give it, the MPI benchmarks' source (which no
    flavor's build downloads) is fetched by Spack into an empty mirror through
    the mirrors Spack is configured with (here the site's, which holds it),
    sha256 checked: the cluster tests then find it."""
    monkeypatch.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("ONESTACK_SOURCE_CACHE", str(tmp_path / "cache"))
    (source,) = mirror.archive_sources(imb.source())
    assert mirror._downloaded([source]) == []
    archive = mirror.archive_path(source["spec"], source["sha256"])
    assert archive.is_relative_to(tmp_path / "mirror")
    assert mirror.sha256_of(archive) == source["sha256"]
