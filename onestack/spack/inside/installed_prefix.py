# Runs inside `spack python` (see onestack/spack/__init__.py:query). Argument: a JSON list
# of abstract specs. Prints, as JSON, for each the prefix of an installed spec
# that satisfies it, or null: where a component Spack builds for the stack
# (MVAPICH2) is, for a program built outside Spack against it (the MPI benchmarks).
import json
import sys

import spack.store

specs = json.loads(sys.argv[1])
found = {s: spack.store.STORE.db.query(s, installed=True) for s in specs}
print(json.dumps({s: str(matches[0].prefix) if matches else None for s, matches in found.items()}))
