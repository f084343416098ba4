"""onestack's command line; the Makefile is its front door (see README.md)."""

import argparse
import grp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onestack import ci, commands, community, data, files, host, paths, problems, report, spack, stack, status, validate
from onestack.cluster import imb
from onestack.errors import OnestackError
from onestack.images import apptainer, keys, push
from onestack.images import flavor as images
from onestack.modules import dispatch, lmod, publish
from onestack.spack import environment, mirror, scope
from onestack.stack import cpus, site


def _ci(args) -> bool:
    """Each app's `ci_build` list instead of its `build` list, when no flavor
    is named: --ci, or ONESTACK_BUILD_LIST=ci_build (`make test`)."""
    return getattr(args, "ci", False) or stack.ci_lists()


def _selected(args):
    """The flavors named (FLAVORS=...), else the build lists; a named flavor
    the site cannot have is refused with the site's reason, before Spack
    would fail on it without one."""
    matrix = stack.load()
    chosen = matrix.select(args.flavors, ci=_ci(args))
    refused = [f"{f.module_name} ({'; '.join(f.unavailable)})" for f in chosen if f.unavailable]
    if refused:
        raise data.InputError(
            f"{data.location(matrix.site.file)}: the site cannot build {', '.join(refused)}: "
            "leave it out of FLAVORS, or take what it lacks out of `unavailable`"
        )
    return chosen


def cmd_render(args) -> None:
    """Every data file checked (as `make audit` does, without Spack), then
    the environment as every command of a run renders it: with the ci_build
    lists under ONESTACK_BUILD_LIST=ci_build (one environment, solved once)."""
    validate.check_all()
    out = environment.render(_selected(args), ci=_ci(args))
    print(f"==> render: {out.relative_to(paths.REPO)}" + (" (the ci_build lists)" if _ci(args) else ""))


def cmd_site(args) -> None:
    """Set-up of this machine for the selected site: its data checked, the
    sources a rebuild needs listed (an offline machine missing one stops
    here), Spack's site scope (mirrors, externals, vendor libraries)."""
    # All of it, the test problems too: stack.load() alone would leave a bad
    # problem file to the first test run, after every Spack solve and build.
    validate.check_all()
    matrix = stack.load()
    print(f"==> site: {matrix.site.name} ({data.location(matrix.site.file)}): {matrix.site.description}")
    print(f"==> site: prefix {paths.prefix()}, fabric {matrix.site.fabric}")
    _check_prefix(paths.prefix())
    mirror.check_obtainable(offline=_offline(args))
    _rendered(matrix)
    scope.write_mirror_config()
    scope.detect_externals()
    scope.install_vendors()
    scope.declare_compilers()
    files.write_text(spack.set_up_mark(), f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")


def _rendered(matrix) -> None:
    """The site's environment includes the rendered flavors: a fresh checkout
    has none yet, and Spack refuses the environment (even for `external
    find`) without them. Rendered where missing only, never over the file a
    running build concretized from, and from this run's lists, as the
    build renders it (the ci_build lists under `make test`)."""
    if not (site.state_dir() / "flavors.yaml").is_file():
        ci_build = stack.ci_lists()
        environment.render(matrix.select(ci=ci_build), ci=ci_build)


def cmd_spack_indexes(args) -> None:
    """Spack's indexes of the site's package repos, made ahead of the site
    set-up's first Spack command (tests/run.sh runs this beside its fast
    tier and apt)."""
    _rendered(stack.load())
    took = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in spack.index_repos().items())
    print(f"==> spack: package repos indexed ({took})")


def cmd_signing_key(args) -> None:
    """The site's image signing key: the one configured (ONESTACK_SIGNING_KEY),
    else a new one, kept outside the repository. A step of its own, after
    Apptainer's set-up: nothing before the images needs either, so `make
    test` builds Apptainer beside the tests, which run the images last
    (tests/run.sh)."""
    print(f"==> site: image signing key {keys.ensure_site_key(apptainer.find(keys.signing_env()))}")


def _make_prefix_with_sudo(prefix: Path) -> None:
    """A prefix under a root-owned folder (/opt): made for this user with
    sudo, as set-up installs Debian's packages (README: sudo or root)."""
    made = os.geteuid() != 0 and shutil.which("sudo") is not None
    if made:
        print(f"==> site: creating the prefix {prefix} for this user with sudo")
        owner = ["-o", str(os.getuid()), "-g", str(os.getgid())]
        made = subprocess.run(["sudo", "install", "-d", *owner, "-m", "755", str(prefix)]).returncode == 0
    if not made:
        raise paths.SetupError(
            f"cannot create the prefix {prefix} (the site's `prefix`): create it for this "
            "user, or set ONESTACK_PREFIX to a folder of yours"
        )


def _check_prefix(prefix: Path) -> None:
    """The prefix must be ours to write (made here when missing), and the
    users the site's `permissions` name must be able to reach it: a tree
    under a private home is not."""
    try:
        prefix.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        _make_prefix_with_sudo(prefix)
    except OSError as err:  # a file where a folder of it should be
        raise paths.SetupError(
            f"cannot create the prefix {prefix}: {err.strerror}: {err.filename}; choose another prefix "
            "(the site's `prefix`, or ONESTACK_PREFIX)"
        ) from None
    if not os.access(prefix, os.W_OK):
        raise paths.SetupError(f"the prefix {prefix} is not writable by this user: set ONESTACK_PREFIX")
    readers = stack.load().site.permissions
    if readers["read"] == "group":
        _check_group(readers["group"])
    _gate_software_folders(prefix, readers)
    closed = [p for p in [prefix, *prefix.parents] if not _searchable(p, readers)]
    if closed:
        who = f"the group {readers['group']}" if readers["read"] == "group" else "other users"
        print(f"==> site: warning: {closed[0]} is not searchable by {who}: they cannot load these modules")


def _check_group(name: str) -> None:
    """Spack gives each install the site's group (packages:all:permissions):
    a group this machine lacks, or one the building user is not in, would
    fail at the first install, after the solve and the sources."""
    where = f"permissions.group of {data.location(stack.load().site.file)}"
    try:
        gid = grp.getgrnam(name).gr_gid
    except KeyError:
        raise paths.SetupError(
            f"{where}: no group {name!r} on this machine: create it (groupadd), or name the group of the site's users"
        ) from None
    if os.geteuid() != 0 and gid not in os.getgroups():
        raise paths.SetupError(
            f"{where}: this user is not in the group {name!r}, which every install is given: add it "
            f"(usermod -aG {name} {os.environ.get('USER', '<user>')}) and log in again"
        )


# The prefix's folders of software outside Spack's install tree: the vendor
# libraries' layouts and the flavors' images, whole applications each.
SOFTWARE_FOLDERS = ("vendor", "images")


def _gate_software_folders(prefix: Path, readers: dict) -> None:
    """Spack applies the site's `permissions` to its installs only: the
    folders of the other software get them here, on the folder itself, which
    users must pass through to read anything in it (read: group keeps other
    users out of what lies below, whatever its own modes)."""
    group = readers["read"] == "group"
    for name in SOFTWARE_FOLDERS:
        folder = prefix / name
        folder.mkdir(exist_ok=True)
        if group:
            os.chown(folder, -1, grp.getgrnam(readers["group"]).gr_gid)
        folder.chmod(0o750 if group else 0o755)


def _searchable(folder: Path, readers: dict) -> bool:
    """By every user (read: world), or by the site's group (read: group)."""
    mode = folder.stat()
    if mode.st_mode & 0o001:
        return True
    if readers["read"] != "group":
        return False
    try:
        return bool(mode.st_mode & 0o010) and grp.getgrgid(mode.st_gid).gr_name == readers["group"]
    except KeyError:  # a gid without a name here
        return False


def _concretize(args) -> None:
    """Render the selected flavors and concretize what is new among them."""
    environment.render(_selected(args), ci=_ci(args))
    spack.concretize()


def _archive_sources(args) -> list:
    """The archives no flavor fetches: the input archives of the selected
    applications' test problems (GROMACS's regression tests) and the MPI
    benchmarks' source: mirrored with the stack's sources, so that tests
    run offline."""
    return mirror.archive_sources({**problems.sources({f.app.module for f in _selected(args)}), **imb.source()})


def _offline(args) -> bool:
    """--offline, or ONESTACK_OFFLINE=1 (the README's offline machine): a
    source the mirror cannot get stops the command before anything builds,
    where Spack would try its upstream and fail in the middle of the builds."""
    return getattr(args, "offline", False) or os.environ.get("ONESTACK_OFFLINE") == "1"


def cmd_mirror(args) -> None:
    _concretize(args)
    mirror.fill(require_all=_offline(args), rebuild=args.rebuild, extra=_archive_sources(args))


def cmd_build(args) -> None:
    print(f"==> build host: {host.describe()}")
    _check_baseline()
    _concretize(args)
    mirror.fill(require_all=_offline(args), extra=_archive_sources(args))
    spack.install()


def cmd_publish(args) -> None:
    _concretize(args)
    release = publish.publish(_selected(args), force=args.force)
    example = publish.release_manifest(release)["flavors"][0]
    print(f"\nTo use it:\n  source {publish.init_script()}; module load {example}")


def cmd_images(args) -> None:
    """Signed SIF images of the published, built flavors (containers/)."""
    # The environment keeps every flavor of the build lists (as publish
    # leaves it): an image of one flavor must not narrow what Spack sees.
    environment.render(stack.load().select(ci=_ci(args)), ci=_ci(args))
    spack.concretize()
    for image in images.build_all(_selected(args)):
        print(f"==> images: {image}")
    print(f"==> images: the site's public key, for desktop users: {push.public_key()}")


def cmd_push_images(args) -> None:
    push.push_all()


def cmd_public_key(args) -> None:
    if len(args.file) > 1:
        raise OnestackError(f"public-key: one file, not {len(args.file)} ({' '.join(args.file)})")
    print(f"==> public-key: {push.public_key(Path(args.file[0]) if args.file else None)}")


def cmd_push_binaries(args) -> None:
    push.push_binaries(_selected(args))


def cmd_install_binaries(args) -> None:
    if len(args.build) != 2:
        raise data.InputError("install-binaries: give the build's hash and the install tree: /<hash> <prefix>")
    push.install_binaries(args.build[0], Path(args.build[1]).resolve())


def cmd_check(args) -> None:
    """Each selected published flavor runs its application's test problems
    through `module load`, checked against their references: the live
    tree's, or (--built) this machine's builds of them published into a
    module tree of their own, as the pipeline's test jobs check its builds
    before its publish stage makes them live."""
    selected = [f for f in _selected(args) if f.published]
    if not args.built:
        _check(selected)
        return
    with publish.built_tree() as tree:
        os.environ["ONESTACK_MODULES"] = str(tree)
        print(f"==> check: the builds of {', '.join(f.module_name for f in selected)} published into {tree}")
        publish.publish(selected)
        _check(selected)


def _check(selected: list) -> None:
    failed = []
    for flavor in selected:
        # A flavor without a build for this host's level cannot pass the
        # checks of its own level's code (their `own_level`): said, not failed.
        no_own_level = dispatch.without_own_level(publish.current_release(), flavor)
        for case in problems.load(flavor.app.module):
            with tempfile.TemporaryDirectory() as tmp:
                outcome = problems.execute(
                    problems.of_flavor(flavor, case),
                    problems.How(modules=(flavor.module_name,), no_own_level=no_own_level),
                    Path(tmp),
                    publish.init_script(),
                )
                # As the test suite does: the flavor table's tests column reads it.
                failure, checks = status.record_result(flavor.module_name, case, outcome)
            print(f"{flavor.module_name} {case}:\n" + "\n".join(f"  {c}" for c in checks or [failure]))
            if failure or not all(c.passed for c in checks):
                failed.append(f"{flavor.module_name} {case}")
    if failed:
        raise problems.ProblemError(f"failed: {', '.join(failed)}")


def cmd_record_outputs(args) -> None:
    """The fast tier's recorded outputs (tests/fast/recorded/), from real runs."""
    from onestack.problems import recorded

    release = publish.current_release()
    published = publish.release_manifest(release)["flavors"]
    why = {m: dispatch.without_own_level(release, stack.load().flavor(m)) for m in published}
    recorded.record(publish.init_of(release), published, why, args.apps)


def cmd_audit(args) -> None:
    """What a pipeline checks first: the stack's data against its schemas and
    cross-references, the site recipes (spack audit), the pipeline file."""
    checked = validate.check_all()
    matrix = stack.load()
    print(
        f"==> audit: {checked['documents']} data files valid against schemas/; {checked['flavors']} flavors, "
        f"{checked['problems']} test problems, {checked['goals']} report goals for site {matrix.site.name}"
    )
    _rendered(matrix)
    spack.run("audit", "packages", *sorted({f.app.package for f in matrix.flavors}))
    ci.validate(ci.PIPELINE_FILE)
    print(f"==> audit: {ci.PIPELINE_FILE.name} valid (GitLab's schema)")


def cmd_ci_generate(args) -> None:
    ci.check_triggered()
    _concretize(args)
    for file in ci.generate(_selected(args), full_rebuild=args.full_rebuild):
        print(f"==> ci-generate: {file.relative_to(paths.REPO)}")


def cmd_where_images(args) -> None:
    print(images.images_dir())


def cmd_flavors(args) -> None:
    """The flavor status table (every cell of every application)."""
    status.print_table(status.rows(list(stack.load().flavors)))


def cmd_host(args) -> None:
    """Set-up's step after the virtualenv (`make setup-spack`, `make test`):
    a host below the baseline stops there, before apt, Spack or Apptainer's
    build."""
    print(f"host: {host.describe()}")
    _check_baseline()


def _check_baseline() -> None:
    host.check_baseline(cpus.generations()[0], cpus.where_chosen())


def cmd_where(args) -> None:
    print(publish.init_script())


def cmd_prefix(args) -> None:
    """For shells outside onestack's commands (the pipeline's `spack ci
    rebuild` jobs): spack.yaml's install tree is $ONESTACK_PREFIX/software."""
    print(site.prefix())


def cmd_rollback(args) -> None:
    publish.rollback()


def cmd_bench_modules(args) -> None:
    """Latency of `module avail` and `module load`, with and without the spider
    cache, side by side, each against its goal."""
    init = publish.init_of(publish.current_release())
    module = _selected(args)[0].module_name
    print(f"{'command':34} {'spider cache':>12} {'median ms':>10} {'min-max ms':>14}  goal")
    for command, goal in (("avail", 50), (f"load {module}", 100)):
        for use_cache in (True, False):
            times = sorted(lmod.time_command(init, command, runs=10, use_cache=use_cache))
            median = statistics.median(times)
            verdict = "met" if median < goal else "MISSED"
            print(
                f"{'module ' + command:34} {'with' if use_cache else 'without':>12} {median:10.1f} "
                f"{times[0]:6.1f}-{times[-1]:<6.1f}  < {goal} ms {verdict}"
            )


def cmd_community(args) -> None:
    verdicts = community.run_all(community.workdir())
    failed = [v for v in verdicts if not v.passed]
    if failed:
        raise community.CommunityError(
            "\n".join(f"{v.line()}\n{v.output[-2500:]}" for v in failed) + "\nrerun one: bash <its script>"
        )


def cmd_report(args) -> None:
    if args.defaults:
        report.make_defaults(args.flavors)
    else:
        report.make(reduced=args.reduced, only=args.flavors)


def cmd_report_path(args) -> None:
    print(report.latest())


# Each command's arguments: FLAVORS takes app/flavor names (default: each
# app's build list); the others are switches.
FLAVORS = ("flavors", "app/flavor names (default: each app's build list)")
OFFLINE = ("--offline", "a source missing from the mirror is an error, not a download (as ONESTACK_OFFLINE=1)")
CI_LISTS = ("--ci", "each app's ci_build list, not its build list (as ONESTACK_BUILD_LIST=ci_build)")
COMMANDS = [
    (
        "render",
        cmd_render,
        "validate the stack's data, render the site's Spack environment (.generated/<site>/)",
        [FLAVORS],
    ),
    ("site", cmd_site, "set up this machine for the selected site: sources, externals, vendor libraries", []),
    (
        "spack-indexes",
        cmd_spack_indexes,
        "build Spack's indexes of the site's package repos (else the first Spack command does)",
        [],
    ),
    ("signing-key", cmd_signing_key, "the site's image signing key (configured, else made once)", []),
    (
        "mirror",
        cmd_mirror,
        "fill the offline source mirror (verified by sha256)",
        [FLAVORS, OFFLINE, ("--rebuild", "also the sources of installed specs (for a rebuild from scratch)")],
    ),
    ("build", cmd_build, "concretize and install the selected flavors", [FLAVORS, OFFLINE, CI_LISTS]),
    (
        "publish",
        cmd_publish,
        "generate a new module tree release of the built flavors and make it live",
        [FLAVORS, ("--force", "generate a new release even if nothing changed"), CI_LISTS],
    ),
    ("images", cmd_images, "build and sign the SIF image of each selected published flavor", [FLAVORS]),
    ("push-images", cmd_push_images, "push every built image to the site's registry (ONESTACK_REGISTRY...)", []),
    (
        "public-key",
        cmd_public_key,
        "write the site's public signing key, which desktop users import to verify images",
        [("file", "where to write it (default: site-signing.asc in the images folder)")],
    ),
    (
        "push-binaries",
        cmd_push_binaries,
        "push the published flavors' Spack binaries to the site's registry",
        [FLAVORS],
    ),
    (
        "install-binaries",
        cmd_install_binaries,
        "install a pushed build and its dependencies from the site's registry, its blobs checked first",
        [("build", "the build's Spack hash as push-binaries prints it (/abc...), then the install tree")],
    ),
    (
        "check",
        cmd_check,
        "run the test problems of the selected published flavors through their modules",
        [FLAVORS, ("--built", "their builds here published into a module tree of their own, not the live tree's")],
    ),
    ("audit", cmd_audit, "validate the stack's data, site recipes and pipeline file", []),
    (
        "record-outputs",
        cmd_record_outputs,
        "record one run of every test problem for the fast tier",
        [("apps", "application module names, e.g. gromacs (default: every application)")],
    ),
    (
        "ci-generate",
        cmd_ci_generate,
        "write the build (spack ci generate) and test child pipelines",
        [FLAVORS, ("--full-rebuild", "a job for every spec, even those already in the buildcache (schedules, tags)")],
    ),
    ("where-images", cmd_where_images, "print the folder of the SIF images", []),
    ("flavors", cmd_flavors, "print the flavor status table: concretized / built / tested, or why not", []),
    ("where", cmd_where, "print the init script of the live module tree", []),
    ("prefix", cmd_prefix, "print the selected site's prefix (ONESTACK_PREFIX if set): installs, modules, images", []),
    (
        "host",
        cmd_host,
        "print this machine's CPU: model, archspec's name, x86-64 level; fail below the site's baseline",
        [],
    ),
    ("rollback", cmd_rollback, "make the previous release live again", []),
    (
        "report",
        cmd_report,
        "measure every published flavor side by side: HTML and PNG report",
        [
            ("flavors", "applications or app/flavor names to measure (default: everything published)"),
            (
                "--reduced",
                "small sizes, one run each, one case per application "
                "(the test suite's run: keeps the code path working)",
            ),
            (
                "--defaults",
                "only the named applications' flavors side by side, to choose the site defaults "
                "(no yardsticks, pairs, peak or page)",
            ),
        ],
    ),
    ("report-path", cmd_report_path, "print the folder of the latest report", []),
    (
        "community",
        cmd_community,
        "run the community checks (tests/community/checks.yaml) with ReFrame against the live tree",
        [],
    ),
    ("bench-modules", cmd_bench_modules, "print module avail/load latency, with and without cache", [FLAVORS]),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="onestack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, helptext, arguments in COMMANDS:
        p = sub.add_parser(name, help=helptext)
        p.set_defaults(func=func)
        for argument, argument_help in arguments:
            if argument.startswith("--"):
                p.add_argument(argument, action="store_true", help=argument_help)
            else:
                p.add_argument(argument, nargs="*", help=argument_help)
    args = parser.parse_args(argv)
    try:
        # Spack reads the install tree from spack.yaml's $ONESTACK_PREFIX: the site's, unless set.
        os.environ["ONESTACK_PREFIX"] = str(site.prefix())
        # A stop signal raised (commands.Stopped), not ending Python where it
        # stands: `finally` blocks run (a partial file removed, a lock freed
        # after the command it guards) and commands are ended with it.
        with commands.stopped_as_exit():
            args.func(args)
    except OnestackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except commands.Stopped as stopped:
        # A command it ran (commands.run_whole) is ended with it.
        print(f"error: {stopped}", file=sys.stderr)
        return 128 + stopped.signum
    return 0
