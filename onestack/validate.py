"""Validation across files: every data document against its schema, then
what refers across them (the flavors for the selected site, every test
problem, the report's goals). What `make audit`, the bad-input tests and the
fast tier run; it loads each layer's data and nothing built from it."""

from onestack import data, paths, problems, stack
from onestack.report import goals


def check_all() -> dict:
    """Every data document against its schema, then the cross-references
    (the flavors for the selected site, every problem, the report's goals):
    what `make audit` and the fast tier check. Returns what was checked."""
    root = paths.data_root()
    documents = data.every_document(root)
    for file in documents:
        relative = file.relative_to(root).as_posix()
        try:
            schema = data.schema_of(relative)
        except KeyError:
            raise data.InputError(f"{relative}: no schema: add it to CATALOG in onestack/data.py") from None
        data.load(file, schema)
    matrix = stack.load()
    cases = [case for app in problems.apps() for case in problems.load(app, benchmarks=True)]
    return {
        "documents": len(documents),
        "flavors": len(matrix.flavors),
        "problems": len(cases),
        "goals": len(goals.every()),
    }
