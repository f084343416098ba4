"""Validation across files: every data document against its schema, then
what refers across them (the flavors for the selected site, every test
problem, the report's goals). What `make audit`, the bad-input tests and the
fast tier run; it loads each layer's data and nothing built from it."""

from onestack import data, paths, problems, stack
from onestack.report import goals
from onestack.stack.flavors import check_choice, versions_by_module


def check_all() -> dict:
    """Every data document against its schema, then the cross-references
    (the flavors for the selected site, every problem, the report's goals):
    what `make audit` and the fast tier check. Returns what was checked."""
    root = paths.data_root()
    documents = data.every_document(root)
    for file in documents:
        relative = file.relative_to(root).as_posix()
        data.load(file, _schema_of(relative))
    matrix = stack.load()
    cases = [case for app in problems.apps() for case in problems.load(app, benchmarks=True)]
    _check_problem_folders(matrix)
    _check_goals(matrix)
    _check_community(matrix)
    _check_not_checked(matrix)
    _check_hybrid_threads(matrix)
    return {
        "documents": len(documents),
        "flavors": len(matrix.flavors),
        "problems": len(cases),
        "goals": len(goals.every()),
    }


def _schema_of(relative: str) -> str:
    """The schema of a data file; a .yml file whose .yaml name has one is
    told to be renamed (every other command reads *.yaml alone)."""
    renamed = relative.removesuffix(".yml") + ".yaml" if relative.endswith(".yml") else None
    for name in filter(None, (relative, renamed)):
        try:
            schema = data.schema_of(name)
        except KeyError:
            continue
        if name == renamed:
            raise data.InputError(f"{relative}: the stack reads .yaml files only: rename it to .yaml")
        return schema
    raise data.InputError(f"{relative}: no schema: add it to CATALOG in onestack/data.py")


def _check_problem_folders(matrix) -> None:
    """The test problems of an application are in the folder named after its
    module: a folder of another name would be read by nothing, and the
    application's flavors would pass with no problem checked."""
    modules = sorted({f.app.module for f in matrix.flavors})
    folder = f"{problems.PROBLEMS}/"
    for app in problems.apps():
        if app not in modules:
            raise data.InputError(
                f"{folder}{app}/: no application's module is {app!r}; name the folder after the module "
                f"of environments/*.yaml ({', '.join(modules)})"
            )
    for module in modules:
        if not problems.load(module):
            raise data.InputError(
                f"{folder}{module}/: no test problem of {module}; every application's flavors are checked "
                "by at least one (a <case>.yaml of schemas/problem.schema.yaml)"
            )


def _check_goals(matrix) -> None:
    """Each goal of the report names an application, one of its problems'
    figures and what it is measured against: a misspelt one would only ever
    print "not measured"."""
    file = paths.data_root() / goals.GOALS_FILE
    apps = {f.app.module for f in matrix.flavors}
    for i, goal in enumerate(goals.every()):
        check_choice(file, f"goals[{i}].app", goal["app"], apps, "application", "modules of environments/*.yaml")
        figures = {name for p in problems.load(goal["app"], benchmarks=True).values() for name in p["figures"]}
        if "figure" in goal:
            where = f"the figures of {problems.PROBLEMS}/{goal['app']}/"
            check_choice(file, f"goals[{i}].figure", goal["figure"], figures, "figure", where)
        if "versus" in goal:
            baselines = {name for f in matrix.flavors if f.app.module == goal["app"] for name, _ in f.app.baselines}
            where = f"`reference` or a baseline of the {goal['app']} files of environments/"
            check_choice(file, f"goals[{i}].versus", goal["versus"], {"reference", *baselines}, "yardstick", where)


def _check_community(matrix) -> None:
    """Each community check names flavors the stack defines."""
    known = {f.module_name for f in matrix.flavors}
    file = paths.data_root() / "tests" / "community" / "checks.yaml"
    for check_id, check in data.load(file, "community")["checks"].items():
        for i, flavor in enumerate(check["flavors"]):
            if f"{check['app']}/{flavor}" not in known:
                raise data.InputError(
                    f"{data.location(file)}: checks.{check_id}.flavors[{i}]: '{flavor}' is no flavor of "
                    f"{check['app']} (flavors: of environments/*.yaml whose module is {check['app']})"
                )


def _check_not_checked(matrix) -> None:
    """What a problem or an accelerated style declares not checked names a
    version of its application, or a problem of it: a misspelt one would
    check nothing and say nothing."""
    versions = versions_by_module(matrix.flavors)
    for app in problems.apps():
        _check_problem_versions(app, versions.get(app, set()))
    for app in {f.app.file: f.app for f in matrix.flavors}.values():
        _check_style_cases(app)


def _check_hybrid_threads(matrix) -> None:
    """An application with a hybrid flavor says in each of its problems how
    the program reports its threads: the hybrid runs check them."""
    for app in sorted({f.app.module for f in matrix.flavors if f.hybrid} & set(problems.apps())):
        for case, problem in problems.load(app, benchmarks=True).items():
            if "threads_pattern" not in problem.spec:
                hybrid = next(f for f in matrix.flavors if f.app.module == app and f.hybrid)
                raise data.InputError(
                    f"{problems.PROBLEMS}/{app}/{case}.yaml: threads_pattern: missing, and {hybrid.module_name} "
                    "is hybrid: add the pattern of the line where the program says how many threads a rank ran"
                )


def _check_problem_versions(app: str, versions: set) -> None:
    for case, problem in problems.load(app, benchmarks=True).items():
        for key in ("not_checked_on", "source_on"):
            for version in problem[key]:
                if version not in versions:
                    raise data.InputError(
                        f"{problems.PROBLEMS}/{app}/{case}.yaml: {key}.{version}: no version {version} of "
                        f"{app} in environments/ (versions: {', '.join(sorted(versions))})"
                    )


def _check_style_cases(app) -> None:
    known = problems.load(app.module, benchmarks=True) if app.module in problems.apps() else {}
    for style, accelerator in app.accelerators:
        for case in accelerator["not_checked"]:
            if case not in known:
                raise data.InputError(
                    f"{data.location(app.file)}: accelerators.{style}.not_checked.{case}: no problem {case} of "
                    f"{app.module} in {problems.PROBLEMS}/{app.module}/ (problems: {', '.join(sorted(known))})"
                )
