# Runs inside `spack python` (see onestack/spack/__init__.py:query). Argument: a JSON list
# of abstract flavor specs. Prints, as JSON, for each the concrete root that
# satisfies it: its hash and those of its compiler, MPI and math providers.
import json
import sys

import spack.environment
import spack.spec

env = spack.environment.active_environment()
# By the abstract spec the environment holds: "satisfies" alone would let a
# flavor match its native twin (the same spec plus target=<host>).
roots = {str(abstract): concrete for abstract, concrete in env.concretized_specs()}


def describe(node):
    return {"hash": node.dag_hash(), "name": node.name, "version": str(node.version), "prefix": node.prefix}


result = {}
for abstract in json.loads(sys.argv[1]):
    match = roots.get(str(spack.spec.Spec(abstract)))
    if match is None:
        result[abstract] = None
        continue
    compiler = match.dependencies(virtuals=("fortran",)) or match.dependencies(virtuals=("c",))
    result[abstract] = {
        **describe(match),
        "installed": match.installed,
        "prefix": match.prefix,
        "target": str(match.target),
        "compiler": describe(compiler[0]) if compiler else None,
        # An MPI runtime is its own MPI; the dispatcher has none.
        "mpi": describe(match) if match.package.provides("mpi") else describe(match["mpi"]) if "mpi" in match else None,
        "providers": {v: describe(match[v]) for v in ("blas", "lapack", "scalapack", "fftw-api") if v in match},
    }
print(json.dumps(result))
