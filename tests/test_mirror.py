"""The offline source mirror admits a file only if its sha256 is the recipe's,
and a source missing from it is reported with what and where to put it."""

from conftest import onestack

from onestack.modules import publish


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
    # The QE patch can only come from a git clone, unset here: named with its sha256.
    assert "f43b7411e535629d9ef564a2e1695359df2651ecbdbca563f7265412afc2228a" in err
    assert "fix: put each file" in err
    assert publish.current_release() == live_release
