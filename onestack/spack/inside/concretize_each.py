# Runs inside `spack python` (see onestack/spack/__init__.py:query). Arguments: a JSON list
# of abstract specs, and optionally a JSON configuration scope to solve them
# under (packages: the compilers components.yaml declares but this machine
# lacks; concretizer: reuse: false, to test a recipe's rule, not an install),
# and whether the environment's lock is current: then a spec it holds as a
# root is taken from it (unify: false solves each root on its own, as here).
# Concretizes each one on its own, so that one cell of the flavor matrix
# failing does not hide the others, and prints, as JSON, for each: whether it
# concretized, its hash, or the concretizer's reason.
# Cells are solved in parallel, one process per core, as Spack itself does for
# an environment's separately concretized roots.
import json
import multiprocessing
import os
import sys

import spack.concretize
import spack.config
import spack.environment
import spack.spec

# Spack's error when its static analysis left out a package the spec needs
# (spack.yaml): solved again without it, Spack names that package
# (onestack/spack/__init__.py: LEFT_OUT).
LEFT_OUT = "concretizer internal error"


def solved(abstract):
    concrete = spack.concretize.concretize_one(spack.spec.Spec(abstract))
    return abstract, {"ok": True, "hash": concrete.dag_hash(), "installed": concrete.installed}


def concretize(abstract):
    try:
        return solved(abstract)
    except Exception as err:  # the concretizer's own explanation is the report
        if LEFT_OUT in str(err):
            with spack.config.override("concretizer:static_analysis", False):
                try:
                    return solved(abstract)
                except Exception as reason:
                    err = reason
        return abstract, {"ok": False, "error": " ".join(str(err).split())[:3000]}


def from_lock(specs):
    """The specs the active environment's lock holds as roots, as solved there."""
    solved = {str(user): concrete for user, concrete in spack.environment.active_environment().concretized_specs()}
    return {
        s: {
            "ok": True,
            "hash": solved[str(spack.spec.Spec(s))].dag_hash(),
            "installed": solved[str(spack.spec.Spec(s))].installed,
        }
        for s in specs
        if str(spack.spec.Spec(s)) in solved
    }


specs = json.loads(sys.argv[1])
scope = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
if scope:
    spack.config.CONFIG.push_scope(spack.config.InternalConfigScope("onestack-query", scope))
result = from_lock(specs) if len(sys.argv) > 3 and json.loads(sys.argv[3]) else {}
unsolved = [s for s in specs if s not in result]
if unsolved:
    with multiprocessing.get_context("fork").Pool(min(len(unsolved), os.cpu_count() or 1)) as pool:
        result.update(pool.imap_unordered(concretize, unsolved))
print(json.dumps(result))
