# Runs inside `spack python` (see onestack/spack/__init__.py:query). Argument: a root
# spec's hash. Prints, as JSON, what a container of it needs: the hash and
# prefix of each node Spack installed that the root links or runs (what the
# image carries), and every external the build used (what the image's OS must
# provide, and what the definition's build stage declares to Spack).
import json
import sys

import spack.store

root = spack.store.STORE.db.query_one(f"/{sys.argv[1]}")
runtime = root.traverse(deptype=("link", "run"))
print(
    json.dumps(
        {
            "installed": [
                {"name": n.name, "hash": n.dag_hash(), "prefix": n.prefix} for n in runtime if not n.external
            ],
            "externals": sorted(
                {(n.name, n.format("{name}{@version}"), n.external_path) for n in root.traverse() if n.external}
            ),
        }
    )
)
