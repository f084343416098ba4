"""Files and folders appear whole or not at all (onestack/files.py): a step
that fails half-way leaves the previous one, and no partial, behind."""

import grp
import os
import stat
import subprocess
from pathlib import Path

import pytest

from onestack import cli, files, paths
from onestack.modules import publish
from onestack.spack import vendor


def test_a_file_is_replaced_whole(tmp_path):
    target = tmp_path / "a" / "file.txt"
    files.write_text(target, "first\n", mode=0o600)
    files.write_text(target, "second\n")
    assert target.read_text() == "second\n" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


def test_a_failure_leaves_the_previous_file_and_no_partial(tmp_path):
    target = files.write_text(tmp_path / "file.txt", "kept\n")
    with pytest.raises(RuntimeError), files.replacing(target) as partial:
        partial.write_text("half")
        raise RuntimeError("killed half-way")
    assert target.read_text() == "kept\n" and [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_a_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "context"
    for content in ("old", "new"):
        with files.replacing(target) as partial:
            partial.mkdir()
            (partial / "flavor.def").write_text(content)
    assert (target / "flavor.def").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["context"]


def test_a_partial_of_a_process_that_is_gone_is_dropped(tmp_path):
    target = tmp_path / "image.sif"
    stale = tmp_path / ".image.sif.partial-999999999"
    stale.write_text("from a killed build")
    files.write_text(target, "image")
    assert not stale.exists()


def test_a_vendor_layout_is_switched_in_whole(tmp_path, monkeypatch):
    """A changed layout (setup/vendor.yaml) is laid out beside the live one
    and switched in by one rename; one that fails (pip) leaves the live one
    as it was; a folder laid out before layouts were switched is replaced."""
    monkeypatch.setenv("ONESTACK_PREFIX", str(tmp_path))
    how = vendor.every()["netlib-lapack"]
    live = vendor.prefix_of("netlib-lapack")
    live.mkdir(parents=True)
    (live / ".installed").write_text("an older layout")
    vendor._lay_out("netlib-lapack", how)
    assert live.is_symlink() and (live / "env" / "vars.sh").is_file()
    first = os.readlink(live)
    vendor._lay_out("netlib-lapack", {**how, "set": {"NETLIB_ROOT": "."}})
    assert os.readlink(live) != first and "NETLIB_ROOT" in (live / "env" / "vars.sh").read_text()
    assert sorted(p.name for p in live.parent.iterdir()) == sorted([live.name, os.readlink(live)])
    switched = os.readlink(live)
    with pytest.raises(vendor.VendorError, match="setup/vendor.yaml: netlib-lapack: pip: .* is as it was"):
        vendor._lay_out("netlib-lapack", {**how, "pip": ["--no-index", "no-such-wheel==1"]})
    assert os.readlink(live) == switched and sorted(p.name for p in live.parent.iterdir()) == sorted(
        [live.name, switched]
    )


def test_a_prefix_for_a_group_is_searchable_by_that_group_only(tmp_path):
    """A site that serves its group only (`permissions: {read: group}`) has a
    prefix other users cannot search: no warning for that; one where the
    group cannot either."""
    folder = tmp_path / "prefix"
    folder.mkdir()
    folder.chmod(0o750)  # whatever the umask
    group = grp.getgrgid(folder.stat().st_gid).gr_name
    assert cli._searchable(folder, {"read": "group", "group": group})
    assert not cli._searchable(folder, {"read": "world"})
    assert not cli._searchable(folder, {"read": "group", "group": "no-such-group-here"})
    folder.chmod(0o700)
    assert not cli._searchable(folder, {"read": "group", "group": group})


def test_under_sudo_what_root_wrote_in_the_users_cache_is_given_back(tmp_path, monkeypatch):
    """`sudo make cluster` works in the invoking user's cache (setup/env.sh):
    the files root made there go back to the cache's owner."""
    if os.geteuid() != 0:
        pytest.skip("needs root: it gives files of root's to another user")
    cache = tmp_path / "cache"
    (cache / "cluster").mkdir(parents=True)
    (cache / "cluster" / "state").write_text("x")
    (cache / "link").symlink_to("cluster")
    os.chown(cache, 12345, 12345)
    monkeypatch.setenv("ONESTACK_CACHE", str(cache))
    monkeypatch.setenv("SUDO_USER", "someone")
    paths.give_back_cache()
    owners = {p.name: p.lstat().st_uid for p in [cache / "cluster", cache / "cluster" / "state", cache / "link"]}
    assert owners == {"cluster": 12345, "state": 12345, "link": 12345}, owners


def test_a_sites_group_reads_the_vendor_libraries_and_images_and_others_do_not(tmp_path):
    """Spack gives its installs the site's permissions; the prefix's other
    software (vendor layouts, images) gets them on its folders."""
    mine = grp.getgrgid(os.getgid()).gr_name
    cli._gate_software_folders(tmp_path, {"read": "group", "group": mine})
    for name in cli.SOFTWARE_FOLDERS:
        mode = (tmp_path / name).stat()
        assert stat.S_IMODE(mode.st_mode) == 0o750 and mode.st_gid == os.getgid(), name
    cli._gate_software_folders(tmp_path, {"read": "world"})
    assert all(stat.S_IMODE((tmp_path / n).stat().st_mode) == 0o755 for n in cli.SOFTWARE_FOLDERS)


def _published_like(tree: Path, dispatcher: Path) -> Path:
    """A module tree as a publish leaves it: folders 555, an entry point
    hard-linked to the dispatcher of Spack's tree (read-only, 555)."""
    (tree / "dispatch" / "bin").mkdir(parents=True)
    os.link(dispatcher, tree / "dispatch" / "bin" / "pw.x")
    for folder in (tree / "dispatch" / "bin", tree / "dispatch", tree):
        folder.chmod(0o555)
    return tree


def test_a_module_tree_is_removed_without_changing_its_files_modes(tmp_path, monkeypatch):
    """tempfile's cleanup, where a 555 folder refused a user who is not
    root, made the first file it met mode 700: the dispatcher hard-linked
    into the live release too, whose entry points other users then could
    not run."""
    dispatcher = tmp_path / "onestack-dispatch"
    dispatcher.write_text("#!/bin/sh\n")
    dispatcher.chmod(0o555)
    changed = []
    chmod = os.chmod
    monkeypatch.setattr(os, "chmod", lambda path, mode, **kw: (changed.append(Path(path)), chmod(path, mode, **kw)))
    publish.remove(_published_like(tmp_path / "tree", dispatcher))
    assert not (tmp_path / "tree").exists()
    assert changed and all(p.is_dir() or not p.exists() for p in changed), changed
    assert stat.S_IMODE(dispatcher.stat().st_mode) == 0o555


def test_check_built_trees_are_removed_after_and_those_of_killed_checks_first(tmp_path, monkeypatch):
    monkeypatch.setenv("ONESTACK_PREFIX", str(tmp_path))
    dispatcher = tmp_path / "onestack-dispatch"
    dispatcher.write_text("#!/bin/sh\n")
    killed = subprocess.Popen(["true"])
    killed.wait()
    stale = _published_like(tmp_path / f"{publish.BUILT_TREE}{killed.pid}-abc", dispatcher)
    running = tmp_path / f"{publish.BUILT_TREE}{os.getppid()}-def"
    running.mkdir()
    with publish.built_tree() as tree:
        assert tree.parent == tmp_path and tree.name.startswith(f"{publish.BUILT_TREE}{os.getpid()}-")
        assert not stale.exists() and running.is_dir()
        _published_like(tree / "release", dispatcher)
    assert not tree.exists() and running.is_dir()


def test_a_lock_is_never_taken_through_a_link(tmp_path):
    """The cluster's lock lies in its user's folder, and root takes it under
    sudo: through a link there, root truncated the file the link named."""
    victim = tmp_path / "shadow"
    victim.write_text("kept\n")
    (tmp_path / ".oscl.lock").symlink_to(victim)
    with pytest.raises(RuntimeError, match=r"\.oscl\.lock: Too many levels of symbolic links: a lock file must be"):
        with files.exclusive(tmp_path / ".oscl.lock", "a test", RuntimeError):
            pytest.fail("the lock was taken through a link")
    assert victim.read_text() == "kept\n"


def test_another_users_check_tree_is_left_to_them(tmp_path, monkeypatch):
    monkeypatch.setenv("ONESTACK_PREFIX", str(tmp_path))
    killed = subprocess.Popen(["true"])
    killed.wait()
    theirs = tmp_path / f"{publish.BUILT_TREE}{killed.pid}-xyz"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534) if os.getuid() == 0 else pytest.skip("not root: cannot make another user's folder")
    with publish.built_tree():
        assert theirs.is_dir()
