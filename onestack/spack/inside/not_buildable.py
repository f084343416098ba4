# Runs inside `spack python` (see onestack/spack/__init__.py:query). No
# argument. Prints, as JSON, the packages a solve of this environment could
# reach from those it may build (its applications among them) that it may not
# build: `packages:all:buildable: false` spelled out for Spack's static
# analysis, which reads only a package's own `buildable`.
import json

import spack.config
import spack.deptypes
import spack.repo
from spack.solver.input_analysis import NoStaticAnalysis

packages = spack.config.get("packages")
built = {name for name, settings in packages.items() if name != "all" and settings.get("buildable") is True}
graph = NoStaticAnalysis(configuration=spack.config.CONFIG, repo=spack.repo.PATH)
reachable = set()
for name in sorted(built):
    reachable |= graph.possible_dependencies(name, allowed_deps=spack.deptypes.ALL).real_pkgs
print(json.dumps(sorted(reachable - built)))
