"""The offline source mirror's archives, made from local git clones (no
Spack): a file is admitted only if its sha256 is the recipe's; a version
pinned by commit is archived from that commit; a release archive is made
from its tag as GitHub serves it."""

import gzip
import subprocess
import tarfile

import pytest

from onestack.spack import mirror


def test_a_file_with_another_checksum_is_refused(tmp_path):
    repo = tmp_path / "repo"
    commit = _one_commit_repo(repo)
    source = {
        "spec": "quantum-espresso@6.7.0",
        "kind": "patch",
        "sha256": "0" * 64,
        "mirror_path": "_source-cache/archive/00/" + "0" * 64,
    }
    how = {"git": {"clone_variable": "TEST_CLONE", "commit": commit}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEST_CLONE", str(repo))
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        with pytest.raises(mirror.MirrorError) as err:
            mirror._admit(source, how)
    assert "recipe sha256: " + "0" * 64 in str(err.value)
    assert "file sha256:   " in str(err.value)
    assert not (tmp_path / "mirror").exists() or not any((tmp_path / "mirror").rglob("*0000*"))


def _one_commit_repo(path):
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "autogen.sh").write_text("echo generating\n")
    (path / "test").mkdir()
    (path / "test" / "out").write_text("a test program's recorded output\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True
    )
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], text=True, capture_output=True).stdout.strip()


def test_a_git_version_is_archived_from_its_commit_or_named_with_its_variable(tmp_path):
    """A version pinned by commit (mvapich2@2.3.7-1) goes into the mirror as
    Spack keeps it: a tar.gz of the commit's tree under one top folder, less
    the files `omit` names (amdlibflame@4.2: files no build step reads)."""
    commit = _one_commit_repo(tmp_path / "repo")
    source = {
        "spec": "mvapich2@2.3.7-1",
        "kind": "source",
        "sha256": None,
        "commit": commit,
        "url": "https://example.org/x.git",
        "mirror_path": f"_source-cache/git/x.git/{commit}.tar.gz",
    }
    how = {"clone_variable": "TEST_CLONE", "omit": {"test/out": "no build step reads it"}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        mp.delenv("TEST_CLONE", raising=False)
        with pytest.raises(mirror.MirrorError, match=f"set TEST_CLONE to a local git clone that has commit {commit}"):
            mirror._commit_archive(source, how)
        mp.setenv("TEST_CLONE", str(tmp_path / "repo"))
        with pytest.raises(mirror.MirrorError, match="has no commit"):
            mirror._commit_archive({**source, "commit": "1" * 40}, how)
        mirror._commit_archive(source, how)
    with tarfile.open(tmp_path / "mirror" / source["mirror_path"]) as archive:
        names = archive.getnames()
    assert "spack-src/autogen.sh" in names
    assert "spack-src/test/out" not in names


def test_a_release_archive_is_made_from_its_tag_as_github_serves_it(tmp_path):
    """netlib-scalapack@2.2.2: `git archive` of tag v2.2.2 under
    scalapack-2.2.2/, gzipped with no name or time stamp, is the release
    archive byte for byte (then admitted only if its sha256 is the recipe's)."""
    _one_commit_repo(tmp_path / "repo")
    subprocess.run(["git", "-C", str(tmp_path / "repo"), "tag", "v1.0"], check=True)
    how = {"clone_variable": "TEST_CLONE", "tag": "v1.0", "prefix": "x-1.0/"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TEST_CLONE", str(tmp_path / "repo"))
        archive = mirror._from_git_tag(how, tmp_path)
        with pytest.raises(mirror.MirrorError, match="has no tag v2.0"):
            mirror._from_git_tag({**how, "tag": "v2.0", "prefix": "x-2.0/"}, tmp_path)
    assert archive.read_bytes()[4:8] == bytes(4), "gzip header carries a time stamp"
    with tarfile.open(archive) as tar:
        assert "x-1.0/autogen.sh" in tar.getnames()
    with gzip.open(archive) as tar_bytes:
        assert tar_bytes.read(512)[:6] == b"pax_gl", "not `git archive`'s tar (its global header names the commit)"
