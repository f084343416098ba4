# Runs inside `spack python` (see onestack/spack/__init__.py:query). Argument: a JSON list
# of DAG hashes. Prints, as JSON, for each whether it is installed in the store
# now (the flavor table caches concretizations, which outlive install states).
import json
import sys

import spack.store

hashes = json.loads(sys.argv[1])
records = {h: spack.store.STORE.db.query_local_by_spec_hash(h) for h in hashes}
print(json.dumps({h: bool(record and record.installed) for h, record in records.items()}))
