# Runs inside `spack python` (see onestack/spack.py:query). Arguments: a JSON list
# of abstract specs, and optionally a JSON configuration scope to solve them
# under (packages: the compilers components.yaml declares but this machine
# lacks; concretizer: reuse: false, to test a recipe's rule, not an install).
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
import spack.spec


def concretize(abstract):
    try:
        concrete = spack.concretize.concretize_one(spack.spec.Spec(abstract))
        return abstract, {"ok": True, "hash": concrete.dag_hash(), "installed": concrete.installed}
    except Exception as err:  # the concretizer's own explanation is the report
        return abstract, {"ok": False, "error": " ".join(str(err).split())[:3000]}


specs = json.loads(sys.argv[1])
if len(sys.argv) > 2:
    scope = json.loads(sys.argv[2])
    spack.config.CONFIG.push_scope(spack.config.InternalConfigScope("onestack-query", scope))
with multiprocessing.get_context("fork").Pool(min(len(specs), os.cpu_count() or 1)) as pool:
    result = dict(pool.imap_unordered(concretize, specs))
print(json.dumps(result))
