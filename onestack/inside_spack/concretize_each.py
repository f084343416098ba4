# Runs inside `spack python` (see onestack/spack.py:query). Argument: a JSON list
# of abstract specs. Concretizes each one on its own, so that one cell of the
# flavor matrix failing does not hide the others, and prints, as JSON, for
# each: whether it concretized, its hash, or the concretizer's reason.
import json
import sys

import spack.concretize
import spack.environment
import spack.spec

result = {}
for abstract in json.loads(sys.argv[1]):
    try:
        concrete = spack.concretize.concretize_one(spack.spec.Spec(abstract))
        result[abstract] = {"ok": True, "hash": concrete.dag_hash(), "installed": concrete.installed}
    except Exception as err:  # the concretizer's own explanation is the report
        result[abstract] = {"ok": False, "error": " ".join(str(err).split())[:600]}
print(json.dumps(result))
