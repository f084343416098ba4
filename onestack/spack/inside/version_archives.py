# Runs inside `spack python` (see onestack/spack/__init__.py:query). Arguments:
# specs "name@version". Prints, as JSON, the sha256 each recipe declares for
# that version's source archive: read off the package class, so no
# environment and no concretization are needed (a test problem takes its
# input from the archive of the version its flavors are built from).
import json
import sys

import spack.repo
from spack.version import Version

result = {}
for spec in sys.argv[1:]:
    name, _, version = spec.partition("@")
    declared = spack.repo.PATH.get_pkg_class(name).versions.get(Version(version), {})
    result[spec] = declared.get("sha256")
print(json.dumps(result))
