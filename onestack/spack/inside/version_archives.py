# Runs inside `spack python` (see onestack/spack/__init__.py:query). Arguments:
# specs "name@version". Prints, as JSON, the sha256 each recipe declares for
# that version's source archive, or the git repository and commit of a
# version pinned by commit: read off the package class, so no
# environment and no concretization are needed (a test problem takes its
# input from the archive of the version its flavors are built from).
import json
import sys

import spack.repo
from spack.version import Version

result = {}
for spec in sys.argv[1:]:
    name, _, version = spec.partition("@")
    cls = spack.repo.PATH.get_pkg_class(name)
    declared = cls.versions.get(Version(version), {})
    result[spec] = {
        "sha256": declared.get("sha256"),
        "commit": declared.get("commit"),
        "git": declared.get("git", getattr(cls, "git", None)),
    }
print(json.dumps(result))
