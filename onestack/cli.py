"""onestack's command line; the Makefile is its front door (see README.md)."""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from onestack import ci, containers, flavors, lmod, mirror, paths, problems, publish, report, sif, site, spack, status


def _selected(args) -> list:
    return flavors.select(flavors.load(), args.flavors, ci=getattr(args, "ci", False))


def cmd_render(args) -> None:
    out = flavors.render(_selected(args))
    print(f"==> render: {out.relative_to(paths.REPO)}")


def cmd_site(args) -> None:
    # spack.yaml includes the rendered flavors: a fresh checkout has none yet,
    # and Spack refuses the environment (even for `external find`) without them.
    if not (paths.generated_dir() / "flavors.yaml").is_file():
        flavors.render(flavors.load())
    site.write_mirror_config()
    site.detect_externals()
    site.install_vendors()


def _concretize(args) -> None:
    """Render the selected flavors and concretize what is new among them."""
    flavors.render(_selected(args))
    spack.concretize()


def cmd_mirror(args) -> None:
    _concretize(args)
    mirror.fill(require_all=args.offline, rebuild=args.rebuild)


def cmd_build(args) -> None:
    _concretize(args)
    mirror.fill(require_all=args.offline)
    spack.run("install", "--fail-fast")


def cmd_publish(args) -> None:
    _concretize(args)
    release = publish.publish(_selected(args), force=args.force)
    example = publish.release_manifest(release)["flavors"][0]
    print(f"\nTo use it:\n  source {publish.init_script()}; module load {example}")


def cmd_images(args) -> None:
    """SIF images of the published, built flavors (containers/images.yaml)."""
    # The environment keeps every flavor of the build lists (as publish
    # leaves it): an image of one flavor must not narrow what Spack sees.
    flavors.render(flavors.select(flavors.load()))
    spack.concretize()
    for image in containers.build(_selected(args)):
        print(f"==> images: {image}")


def cmd_check(args) -> None:
    """Each selected published flavor runs its application's test problems
    through `module load`, checked against their references (a CI test job)."""
    failed = []
    for flavor in (f for f in _selected(args) if f.published):
        for case, problem in problems.load(flavor.app.module).items():
            with tempfile.TemporaryDirectory() as tmp:
                checks = problems.run(publish.init_script(), flavor.module_name, problem, Path(tmp))
            print(f"{flavor.module_name} {case}:\n" + "\n".join(f"  {c}" for c in checks))
            if not all(c.passed for c in checks):
                failed.append(f"{flavor.module_name} {case}")
    if failed:
        raise problems.ProblemError(f"failed: {', '.join(failed)}")


def cmd_audit(args) -> None:
    """What a pipeline checks first: the stack's data against its schema and
    cross-references, the site recipes (spack audit), the pipeline file."""
    every = flavors.load()
    containers.config()
    print(f"==> audit: {len(every)} flavors of {len({f.app.module for f in every})} applications valid")
    flavors.render(flavors.select(every))  # the environment Spack audits includes it
    spack.run("audit", "packages", *sorted({f.app.package for f in every}))
    ci.validate(ci.PIPELINE_FILE)
    print(f"==> audit: {ci.PIPELINE_FILE.name} valid (GitLab's schema)")


def cmd_ci_generate(args) -> None:
    _concretize(args)
    for file in ci.generate(_selected(args), full_rebuild=args.full_rebuild):
        print(f"==> ci-generate: {file.relative_to(paths.REPO)}")


def cmd_where_images(args) -> None:
    print(containers.images_dir())


def cmd_flavors(args) -> None:
    """The flavor status table (every cell of every application)."""
    status.print_table(status.rows(flavors.load()))


def cmd_where(args) -> None:
    print(publish.init_script())


def cmd_rollback(args) -> None:
    publish.rollback()


def cmd_bench_modules(args) -> None:
    """Latency of `module avail` and `module load`, with and without the spider
    cache, side by side (goals: avail < 50 ms, load < 100 ms)."""
    init = publish.current_release() / "init" / "bash"
    module = _selected(args)[0].module_name
    print(f"{'command':34} {'spider cache':>12} {'median ms':>10} {'min-max ms':>14}  goal")
    for command, goal in (("module avail", 50), (f"module load {module}", 100)):
        for use_cache in (True, False):
            times = sorted(lmod.time_command(init, command, runs=10, use_cache=use_cache))
            median = statistics.median(times)
            verdict = "met" if median < goal else "MISSED"
            print(f"{command:34} {'with' if use_cache else 'without':>12} {median:10.1f} "
                  f"{times[0]:6.1f}-{times[-1]:<6.1f}  < {goal} ms {verdict}")


def cmd_report(args) -> None:
    report.make(reduced=args.reduced, only=args.flavors)


def cmd_report_path(args) -> None:
    print(report.latest())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="onestack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    offline = ("--offline", "a source missing from the mirror is an error, not a download")
    commands = [
        ("render", cmd_render, "validate environments/*.yaml and render .generated/flavors.yaml", []),
        ("site", cmd_site, "detect this machine's externals and lay out vendor libraries", []),
        ("mirror", cmd_mirror, "fill the offline source mirror (verified by sha256)",
         [offline, ("--rebuild", "also the sources of installed specs (for a rebuild from scratch)")]),
        ("build", cmd_build, "concretize and install the selected flavors", [
            offline, ("--ci", "only each app's ci_build list (what `make test` needs on a fresh machine)")]),
        ("publish", cmd_publish, "generate a new module tree release of the built flavors and make it live",
         [("--force", "generate a new release even if nothing changed")]),
        ("images", cmd_images, "build the SIF image of each selected published flavor (Singularity.def from "
         "spack containerize)", []),
        ("check", cmd_check, "run the test problems of the selected published flavors through their modules", []),
        ("audit", cmd_audit, "validate the stack's data, site recipes and pipeline file", []),
        ("ci-generate", cmd_ci_generate, "write the build (spack ci generate) and test child pipelines",
         [("--full-rebuild", "a job for every spec, even those already in the buildcache (schedules, tags)")]),
        ("where-images", cmd_where_images, "print the folder of the SIF images", []),
        ("flavors", cmd_flavors, "print the flavor status table: concretized / built / tested, or why not", []),
        ("where", cmd_where, "print the init script of the live module tree", []),
        ("rollback", cmd_rollback, "make the previous release live again", []),
        ("report", cmd_report, "measure every published flavor side by side: HTML and PNG report",
         [("--reduced", "small sizes, one run each, one case per application "
                        "(the test suite's run: keeps the code path working)")]),
        ("report-path", cmd_report_path, "print the folder of the latest report", []),
        ("bench-modules", cmd_bench_modules, "print module avail/load latency, with and without cache", []),
    ]
    for name, func, helptext, options in commands:
        p = sub.add_parser(name, help=helptext)
        p.set_defaults(func=func)
        p.add_argument("flavors", nargs="*", help="app/flavor names (default: each app's build list)")
        for flag, flag_help in options:
            p.add_argument(flag, action="store_true", help=flag_help)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (flavors.InputError, mirror.MirrorError, spack.SpackError, publish.PublishError,
            lmod.LmodError, paths.SetupError, containers.ContainerError, sif.SifError, ci.CiError,
            problems.ProblemError,
            FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
