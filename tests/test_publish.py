"""Publishing is atomic and reversible: a new release is made beside the live
one and switched in by one rename; a publish killed half-way leaves the live
tree loadable; one command rolls back. Runs against a scratch module root
(ONESTACK_MODULES), never the site's live tree."""

import fcntl
import json
import os
import signal
import stat

import pytest
import yaml
from conftest import REPO, onestack

from onestack import stack
from onestack.modules import lmod, publish


@pytest.fixture
def modules_root(tmp_path):
    return {"ONESTACK_MODULES": str(tmp_path / "modules")}


def _current(env):
    return os.path.realpath(os.path.join(env["ONESTACK_MODULES"], "current"))


def _loads(env):
    init = os.path.join(env["ONESTACK_MODULES"], "current", "init", "bash")
    return lmod.clean_shell(init, "module load hpl/openblas-mpich && command -v hpcc").returncode == 0


def test_publish_is_idempotent_then_forced(modules_root):
    onestack("publish", env_extra=modules_root, check=True)
    first = _current(modules_root)
    assert "up to date" in onestack("publish", env_extra=modules_root, check=True).stdout
    assert _current(modules_root) == first
    onestack("publish", "--force", env_extra=modules_root, check=True)
    assert _current(modules_root) != first and _loads(modules_root)


def test_killed_publish_leaves_the_live_tree_loadable(modules_root):
    """Killed (SIGKILL, publish's fault-injection point) half-way, right
    after Spack wrote the new hierarchy, and at the last moment, the new
    release checked, marked complete and read-only but not yet switched in:
    the live tree stays what it was."""
    onestack("publish", env_extra=modules_root, check=True)
    live = _current(modules_root)
    releases = os.path.join(modules_root["ONESTACK_MODULES"], "releases")
    for step in publish.STEPS:
        killed = onestack("publish", "--force", env_extra={**modules_root, publish.KILL_AFTER: step})
        assert killed.returncode == -signal.SIGKILL, f"not killed after {step}: {killed.stdout}{killed.stderr}"
        assert _current(modules_root) == live, f"killed after {step}, the live release changed"
        assert _loads(modules_root), f"killed after {step}, the live tree does not load"
    onestack("publish", "--force", env_extra=modules_root, check=True)  # cleans up the partial ones
    assert all(os.path.exists(os.path.join(releases, r, ".complete")) for r in os.listdir(releases))


def test_a_second_publish_or_rollback_is_refused_while_one_runs(modules_root):
    """While one publish holds the tree, another is refused before it
    touches anything (it would drop the first's release in the making)."""
    onestack("publish", env_extra=modules_root, check=True)
    live = _current(modules_root)
    with open(os.path.join(modules_root["ONESTACK_MODULES"], ".publish.lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.truncate(0)
        lock.write("4242\n")
        lock.flush()
        for command in (["publish", "--force"], ["rollback"]):
            refused = onestack(*command, env_extra=modules_root)
            assert refused.returncode == 1 and "another publish, rollback" in refused.stderr, refused.stderr
            assert "pid 4242" in refused.stderr and _current(modules_root) == live


def test_rollback_restores_the_previous_release(modules_root):
    """Back to the release that was live before, past one a killed publish
    marked complete but never switched in."""
    onestack("publish", env_extra=modules_root, check=True)
    first = _current(modules_root)
    never_live = onestack("publish", "--force", env_extra={**modules_root, publish.KILL_AFTER: "marked"})
    assert never_live.returncode == -signal.SIGKILL and _current(modules_root) == first
    onestack("publish", "--force", env_extra=modules_root, check=True)
    assert _current(modules_root) != first
    proc = onestack("rollback", env_extra=modules_root, check=True)
    assert "live again" in proc.stdout
    assert _current(modules_root) == first and _loads(modules_root)
    refused = onestack("rollback", env_extra=modules_root)
    assert refused.returncode == 1 and "first one made live here" in refused.stderr


def _targets_outside(release):
    """Files outside the release that its symlinks point to."""
    found = set()
    for dirpath, _, filenames in os.walk(release):
        for name in filenames:
            path = os.path.join(dirpath, name)
            target = os.path.realpath(path)
            if os.path.islink(path) and not target.startswith(release + os.sep) and os.path.isfile(target):
                found.add(target)
    return found


def test_a_publish_leaves_what_it_links_to_as_it_was(modules_root):
    """A release is made read-only, its own files only: the OS's mpirun a
    launcher links to and the MPI libraries of the ABI shims keep their
    owner's write permission."""
    onestack("publish", env_extra=modules_root, check=True)
    outside = sorted(t for t in _targets_outside(_current(modules_root)) if os.stat(t).st_uid == os.getuid())
    assert outside, "the release links to no file of its owner: nothing to check"
    for target in outside:
        os.chmod(target, os.stat(target).st_mode | stat.S_IWUSR)
    onestack("publish", "--force", env_extra=modules_root, check=True)
    changed = [t for t in outside if not os.stat(t).st_mode & stat.S_IWUSR]
    assert not changed, f"publish made files outside its release read-only: {changed}"


def _as_build_lists(release, **changes):
    """The release's manifest, as `make stack` would have written it."""
    manifest = os.path.join(release, publish.COMPLETE_MARK)
    os.chmod(release, 0o755)
    os.chmod(manifest, 0o644)
    with open(manifest) as f:
        content = json.load(f)
    with open(manifest, "w") as f:
        json.dump({**content, "lists": "build", **changes}, f)
    return content


def test_the_ci_lists_never_replace_a_tree_of_the_build_lists(modules_root):
    """`make test` on a production host's prefix: where the live release of
    the build lists (simulated by its manifest) holds this run's very
    builds, it stays and is tested; where it holds others, the run's
    publish is refused, and the tree users load stays what it was."""
    onestack("publish", env_extra=modules_root, check=True)
    live = _current(modules_root)
    content = _as_build_lists(live)
    assert content["lists"] == "ci_build", content
    kept = onestack("publish", "--force", env_extra=modules_root, check=True)
    assert "holds this run's builds" in kept.stdout and _current(modules_root) == live, kept.stdout
    module = next(iter(content["builds"]))
    _as_build_lists(live, builds={**content["builds"], module: ["another0build"]})
    refused = onestack("publish", "--force", env_extra=modules_root)
    assert refused.returncode == 1 and "ONESTACK_PREFIX" in refused.stderr, refused.stderr
    assert _current(modules_root) == live and _loads(modules_root)


def _other_version(flavor) -> str:
    return next(
        f.app.version
        for f in stack.load().flavors
        if f.app.module == flavor.app.module
        and f.flavor_name == flavor.flavor_name
        and f.app.version != flavor.app.version
    )


def test_a_site_deprecates_and_hides_versions(modules_root, tmp_path, published_flavors):
    """A site's `versions`: a deprecated version prints its message when
    loaded; a hidden one leaves module avail but still loads by its full
    name, so a job script that names it keeps working."""
    hpl = stack.load().flavor("hpl/openblas-mpich")
    lmp = next(stack.load().flavor(m) for m in published_flavors if m.startswith("lmp/"))
    site = yaml.safe_load((REPO / "sites" / "default" / "site.yaml").read_text())
    site["versions"] = site.get("versions", {}) | {
        "hpl": {"deprecated": {hpl.app.version: "HPCC 1.5.0 leaves this site in 2027: use HPL 2.3"}},
        # Its other version the default: the one a flavor loads stays listed.
        "lmp": {"default": _other_version(lmp), "hidden": [lmp.app.version]},
    }
    # The site edited, kept elsewhere under its name: the same site (its lock, its scope).
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "site.yaml").write_text(yaml.safe_dump(site))
    env = {**modules_root, "ONESTACK_SITE": str(tmp_path / "default")}
    # Every flavor of the run's lists: a publish of some would drop the others'
    # roots from the environment's lock (the report's reference and twins).
    onestack("publish", env_extra=env, check=True)
    init = os.path.join(modules_root["ONESTACK_MODULES"], "current", "init", "bash")
    deprecated = lmod.clean_shell(init, f"module load {hpl.versioned_name}")
    assert deprecated.returncode == 0 and "HPCC 1.5.0 leaves this site in 2027" in deprecated.stderr, deprecated.stderr
    # The site's own admin list (its other software's messages) stays in
    # force where the init script is sourced after it is set.
    (tmp_path / "admin.list").write_text(f"^{lmp.app.module}/:\n  The site's own message\n\n")
    own = lmod.clean_shell(
        init, f"export LMOD_ADMIN_FILE={tmp_path / 'admin.list'}\nsource {init}\nmodule load {lmp.versioned_name}"
    )
    assert own.returncode == 0 and "The site's own message" in own.stderr, own.stderr
    avail = lmod.clean_shell(init, "module -t avail 2>&1").stdout
    assert lmp.versioned_name not in avail and hpl.versioned_name in avail, avail
    hidden = lmod.clean_shell(init, f"module load {lmp.versioned_name}\nmodule -t list 2>&1")
    assert hidden.returncode == 0 and lmp.versioned_name in hidden.stdout + hidden.stderr, hidden.stderr
