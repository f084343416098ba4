"""The stack as data: the flavors of environments/ for the selected site
(sites/), loaded and checked once per process."""

import functools
from pathlib import Path

from onestack import paths
from onestack.stack import site
from onestack.stack.flavors import Matrix, load_matrix


@functools.lru_cache(maxsize=None)
def _load(data_root: Path, site_dir: Path) -> Matrix:
    return load_matrix(site.load())


def load() -> Matrix:
    """Every flavor and MPI runtime, for the selected site."""
    return _load(paths.data_root(), paths.site_dir())


def check_all() -> dict:
    """Every data document against its schema, then the cross-references
    (the flavors for the selected site, every problem, the report's goals):
    what `make audit` and the fast tier check. Returns what was checked."""
    from onestack import data, problems
    from onestack.report import goals

    root = paths.data_root()
    documents = data.every_document(root)
    for file in documents:
        relative = file.relative_to(root).as_posix()
        try:
            schema = data.schema_of(relative)
        except KeyError:
            raise data.InputError(f"{relative}: no schema: add it to CATALOG in onestack/data.py") from None
        data.load(file, schema)
    matrix = load()
    cases = [case for app in problems.apps() for case in problems.load(app, benchmarks=True)]
    return {"documents": len(documents), "flavors": len(matrix.flavors), "problems": len(cases),
            "goals": len(goals.every())}
