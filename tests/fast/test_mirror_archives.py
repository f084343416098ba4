"""The offline source mirror's archives, made from local git clones (no
Spack): a file is admitted only if its sha256 is the recipe's; a version
pinned by commit is archived from that commit; a release archive is made
from its tag as GitHub serves it."""

import ast
import gzip
import hashlib
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Dict, List

import pytest

from onestack import paths
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
    return _commit_all(path)


def test_an_archive_changed_after_it_was_admitted_is_refused_where_it_is_read(tmp_path, monkeypatch):
    """A test problem's input archive is read by onestack, not Spack: its
    content is checked against its name, as Spack checks what it fetches."""
    monkeypatch.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("ONESTACK_SOURCE_CACHE", str(tmp_path / "cache"))
    content = b"an archive"
    sha256 = hashlib.sha256(content).hexdigest()
    archive = tmp_path / "mirror" / "_source-cache" / "archive" / sha256[:2] / f"{sha256}.tar.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(content)
    assert mirror.archive_path("x@1", sha256) == archive
    archive.write_bytes(content[:4])  # cut short
    with pytest.raises(mirror.MirrorError, match=rf"^{archive}: the source archive of x@1 has sha256 .* remove it"):
        mirror.archive_path("x@1", sha256)


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
    how = {"clone_variable": "TEST_CLONE", "omit": {"test/out": "no build step reads it"}, "submodules": {}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        mp.delenv("TEST_CLONE", raising=False)
        with pytest.raises(mirror.MirrorError, match=f"set TEST_CLONE to a local git clone that has commit {commit}"):
            mirror._commit_archive(source, how)
        mp.setenv("TEST_CLONE", str(tmp_path / "repo"))
        with pytest.raises(mirror.MirrorError, match="has no commit"):
            mirror._commit_archive({**source, "commit": "1" * 40}, how)
        mirror._commit_archive(source, how)
    names = _archived(tmp_path, source)
    assert "spack-src/autogen.sh" in names
    assert "spack-src/test/out" not in names


def test_submodules_are_archived_at_the_commits_their_parents_pin(tmp_path):
    """openmpi-abi@6.0.0a1: Open MPI's commit with its submodules (PMIx,
    PRRTE, each with its own nested one) in the one archive, each from the
    clone its variable names, at the commit its parent's tree records; a
    path that is no submodule is an error naming it."""
    _one_commit_repo(tmp_path / "inner")
    _one_commit_repo(tmp_path / "middle")
    _add_submodule(tmp_path / "middle", tmp_path / "inner", "config/oac")
    _one_commit_repo(tmp_path / "top")
    top = _add_submodule(tmp_path / "top", tmp_path / "middle", "3rd-party/pmix")
    # Later commits of the submodules' clones are not what the parents pin.
    (tmp_path / "inner" / "later").write_text("not pinned\n")
    _commit_all(tmp_path / "inner")
    source = {
        "spec": "openmpi-abi@6.0.0a1",
        "kind": "source",
        "sha256": None,
        "commit": top,
        "url": "https://example.org/top.git",
        "mirror_path": f"_source-cache/git/top.git/{top}.tar.gz",
    }
    submodules = {"3rd-party/pmix": "TEST_MIDDLE", "3rd-party/pmix/config/oac": "TEST_INNER"}
    how = {"clone_variable": "TEST_TOP", "omit": {}, "submodules": submodules}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        for variable, clone in (("TEST_TOP", "top"), ("TEST_MIDDLE", "middle"), ("TEST_INNER", "inner")):
            mp.setenv(variable, str(tmp_path / clone))
        with pytest.raises(mirror.MirrorError, match="submodules: test is not a submodule of commit"):
            mirror._commit_archive(source, {**how, "submodules": {"test": "TEST_INNER"}})
        mirror._commit_archive(source, how)
    names = _archived(tmp_path, source)
    assert {"spack-src/3rd-party/pmix/autogen.sh", "spack-src/3rd-party/pmix/config/oac/test/out"} <= set(names)
    assert "spack-src/3rd-party/pmix/config/oac/later" not in names


def _add_submodule(repo, sub, path):
    subprocess.run(
        ["git", "-C", str(repo), "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), path],
        check=True,
    )
    return _commit_all(repo)


def _commit_all(repo):
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "y"], check=True
    )
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], text=True, capture_output=True).stdout.strip()


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


def test_a_vendored_submodule_is_admitted_only_where_its_records_name_the_pinned_commit(tmp_path):
    """quantum-espresso@7.5.0: devXlib's own host is GitLab alone; a
    repository that vendors it (QEF/q-e_schrodinger) stands in, its folder
    taken only if that repository's records name the commit QE pins. `omit`
    leaves files out of a submodule too."""
    sub = _one_commit_repo(tmp_path / "devxlib")
    _one_commit_repo(tmp_path / "top")
    top = _add_submodule(tmp_path / "top", tmp_path / "devxlib", "external/devxlib")
    vendoring = tmp_path / "vendoring"
    shutil.copytree(tmp_path / "devxlib", vendoring / "external" / "devxlib", ignore=shutil.ignore_patterns(".git"))
    (vendoring / "external" / "records").write_text(f"{sub} devxlib\n")
    vendored = _commit_all_new(vendoring)
    (vendoring / "external" / "records").write_text(f"{'2' * 40} devxlib\n")
    elsewhere = _commit_all(vendoring)
    source = {
        "spec": "quantum-espresso@7.5.0",
        "kind": "source",
        "sha256": None,
        "commit": top,
        "url": "https://example.org/top.git",
        "mirror_path": f"_source-cache/git/top.git/{top}.tar.gz",
    }
    origin = {"clone_variable": "TEST_VENDORING", "path": "external/devxlib", "records": "external/records", "why": "x"}
    how = {
        "clone_variable": "TEST_TOP",
        "omit": {"external/devxlib/test/out": "no build step reads it"},
        "submodules": {"external/devxlib": {**origin, "commit": vendored}},
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        mp.setenv("TEST_TOP", str(tmp_path / "top"))
        mp.setenv("TEST_VENDORING", str(vendoring))
        refused = {**how, "submodules": {"external/devxlib": {**origin, "commit": elsewhere}}}
        with pytest.raises(mirror.MirrorError, match=f"does not record {sub} for devxlib, the commit the parent pins"):
            mirror._commit_archive(source, refused)
        mirror._commit_archive(source, how)
    names = _archived(tmp_path, source)
    assert "spack-src/external/devxlib/autogen.sh" in names
    assert "spack-src/external/devxlib/test/out" not in names


def _archived(tmp_path, source) -> list:
    """The member names of the archive the mirror holds for source."""
    with tarfile.open(tmp_path / "mirror" / source["mirror_path"]) as archive:
        return archive.getnames()


def _commit_all_new(repo):
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return _commit_all(repo)


def test_set_up_finds_a_clone_that_lacks_a_submodule_before_anything_builds(tmp_path, capsys):
    """quantum-espresso@7.5.0 offline with ONESTACK_WANNIER90_GIT naming no
    clone (seen: a fresh run then built for 17 minutes and failed on QE's
    source): set-up's table checks every clone an archive takes, the
    submodules' too. Offline that stops set-up naming the variable; online
    Spack downloads the source, and set-up says why a named clone could not
    serve it."""
    _one_commit_repo(tmp_path / "sub")
    _one_commit_repo(tmp_path / "top")
    top = _add_submodule(tmp_path / "top", tmp_path / "sub", "external/wannier90")
    how = {"clone_variable": "TEST_TOP", "omit": {}, "submodules": {"external/wannier90": "TEST_SUB"}}
    sources = {top: {"what": "quantum-espresso@7.5.0 (a test)", "git_archive": how}}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mirror, "offline_sources", lambda: sources)
        mp.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
        mp.setenv("ONESTACK_SOURCE_CACHE", str(tmp_path / "cache"))
        mp.setenv("TEST_TOP", str(tmp_path / "top"))
        mp.setenv("TEST_SUB", str(tmp_path / "nowhere"))
        with pytest.raises(mirror.MirrorError, match=f"TEST_SUB={tmp_path / 'nowhere'} has no commit"):
            mirror.check_obtainable(offline=True)
        mirror.check_obtainable(offline=False)
        assert "from upstream, not from here: quantum-espresso@7.5.0 (a test): TEST_SUB=" in capsys.readouterr().out
        mp.delenv("TEST_SUB")
        mirror.check_obtainable(offline=False)
        assert "not from here" not in capsys.readouterr().out, "online, a clone nobody named is no news"
        with pytest.raises(mirror.MirrorError, match="set TEST_SUB to a local git clone"):
            mirror.check_obtainable(offline=True)
        mp.setenv("TEST_SUB", str(tmp_path / "sub"))
        mirror.check_obtainable(offline=True)
    assert "$TEST_TOP" in capsys.readouterr().out


def _declared_submodules(recipe: Path) -> Dict[str, List[str]]:
    """commit -> the submodules a site recipe's version of it fetches (its
    `_SUBMODULES`), read from the recipe's source (no Spack here)."""
    tree = ast.parse(recipe.read_text())
    found: Dict[str, List[str]] = {}
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        lists = [
            ast.literal_eval(node.value)
            for node in cls.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_SUBMODULES" for t in node.targets)
        ]
        for call in (n for n in ast.walk(cls) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "version"):
            keywords = {k.arg: k.value for k in call.keywords}
            if "commit" not in keywords or "submodules" not in keywords:
                continue
            every = isinstance(keywords["submodules"], ast.Constant) and keywords["submodules"].value is True
            found[ast.literal_eval(keywords["commit"])] = ["every submodule (submodules=True)"] if every else lists[0]
    return found


def test_a_recipe_fetches_the_submodules_the_mirror_archives():
    """Open MPI 6's recipe fetched every submodule online (pympistandard
    too, which its ABI generator then reads first), while the mirror's
    archive held three: a build from a clone and one from the mirror differed."""
    known = mirror.offline_sources()
    declared = {}
    for recipe in sorted((paths.REPO / "packages").rglob("package.py")):
        declared.update(_declared_submodules(recipe))
    assert declared, "no site recipe declares its submodules"
    for commit, submodules in declared.items():
        archived = known[commit]["git_archive"].get("submodules", {})
        top = sorted(path for path in archived if not any(path.startswith(f"{other}/") for other in archived))
        assert top == sorted(submodules), (commit, top, submodules)
