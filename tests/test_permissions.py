"""The published tree as another user meets it: whoever built it (root in
CI), a user with no rights of their own loads a flavor and runs its test
problem, and can change nothing of the tree (the site's permissions:
sites/<site>/site.yaml, Spack's packages:all:permissions, read-only releases)."""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import assert_checks, run_as

from onestack import paths, problems, stack

USER = "onestack-user"  # made here: an account with no rights but its own


@pytest.fixture(scope="module")
def user():
    if os.geteuid() != 0:
        pytest.skip("making a second user needs root; the tree is then this user's own")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/bash", USER], check=True)
    return USER


@pytest.fixture
def open_folder():
    """A folder the other user can enter and write (pytest's own is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="onestack-permissions-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_another_user_runs_a_published_flavor(user, init_script, published_flavors, open_folder):
    module = next(m for m in published_flavors if m.startswith("hpl/"))
    workdir = open_folder / "run"
    workdir.mkdir()
    workdir.chmod(0o777)
    outcome = problems.execute(
        problems.of_flavor(stack.load().flavor(module), "hpl"),
        problems.How(modules=(module,)),
        workdir,
        init_script,
        submit=run_as(user),
    )
    assert not outcome.failure(), f"{module} as {user}: {outcome.failure()}"
    assert_checks(f"{module} as {user}", outcome.checks())


def test_another_user_can_change_nothing_of_the_tree(user, live_release):
    software = next((paths.prefix() / "software").rglob("bin"))
    for target in (live_release, live_release / "flavors", software):
        proc = subprocess.run(
            ["runuser", "-u", user, "--", "touch", str(target / "onestack-test-write")], capture_output=True, text=True
        )
        assert proc.returncode != 0 and "Permission denied" in proc.stderr, f"{user} could write into {target}"
    writable = [
        p for p in [*live_release.rglob("*"), *software.iterdir()] if not p.is_symlink() and p.stat().st_mode & 0o022
    ]
    assert not writable, f"writable by group or others: {writable[:5]}"
