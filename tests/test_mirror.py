"""The offline source mirror admits a file only if its sha256 is the recipe's,
and a source missing from it is reported with what and where to put it."""

import subprocess

import pytest

from conftest import onestack
from onestack import mirror, publish


def test_every_source_of_a_rebuild_is_in_the_mirror():
    proc = onestack("mirror", "--offline", "--rebuild")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_missing_source_is_a_clear_error_and_publishes_nothing(tmp_path, live_release):
    empty = {"ONESTACK_MIRROR": str(tmp_path / "mirror"), "ONESTACK_SOURCE_CACHE": str(tmp_path / "cache"),
             "ONESTACK_QE_GIT": ""}
    (tmp_path / "mirror").mkdir()
    proc = onestack("mirror", "--offline", "--rebuild", env_extra=empty)
    assert proc.returncode == 1
    err = proc.stderr
    assert "sources not in the mirror" in err
    # The QE patch can only come from a git clone, unset here: named with its sha256.
    assert "f43b7411e535629d9ef564a2e1695359df2651ecbdbca563f7265412afc2228a" in err
    assert "fix: put each file" in err
    assert publish.current_release() == live_release


def test_a_file_with_another_checksum_is_refused(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "configure").write_text("echo changed\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], text=True, capture_output=True).stdout.strip()
    source = {"spec": "quantum-espresso@6.7.0", "kind": "patch", "sha256": "0" * 64,
              "mirror_path": "_source-cache/archive/00/" + "0" * 64}
    how = {"git": {"clone_variable": "TEST_CLONE", "commit": commit}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEST_CLONE", str(repo))
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        with pytest.raises(mirror.MirrorError) as err:
            mirror._admit(source, how)
    assert "recipe sha256: " + "0" * 64 in str(err.value)
    assert "file sha256:   " in str(err.value)
    assert not (tmp_path / "mirror").exists() or not any((tmp_path / "mirror").rglob("*0000*"))
