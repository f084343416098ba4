# Runs inside `spack python` (see onestack/spack/__init__.py:query). Arguments:
# a mirror directory, then specs "name@version" that no spec of the
# environment fetches (the MPI benchmarks' source, a test problem's input).
# Spack fetches each version's archive as `spack mirror create` does (its
# configured mirrors first, then the recipe's URL), checks the sha256 the
# recipe declares and stores it at its content-addressed path in the mirror.
# `spack mirror create <spec>` would concretize each spec first, and these
# are no roots of the environment. Prints, as JSON, whether each was stored.
import json
import sys

import spack.mirrors.utils
import spack.repo
import spack.spec
from spack.version import Version, VersionList

root, specs = sys.argv[1], sys.argv[2:]
cache = spack.mirrors.utils.get_mirror_cache(root)
stored = {}
for text in specs:
    name, _, version = text.partition("@")
    spec = spack.spec.Spec(name)
    spec.versions = VersionList([Version(version)])
    pkg = spack.repo.PATH.get_pkg_class(name)(spec)
    stats = spack.mirrors.utils.MirrorStatsForOneSpec(spec)
    stored[text] = spack.mirrors.utils.create_mirror_from_package_object(pkg, cache, stats)
print(json.dumps(stored))
