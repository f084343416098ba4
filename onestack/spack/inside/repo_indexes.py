# Runs inside `spack python` (see onestack/spack/__init__.py:query).
# Arguments: the indexes to build (providers, tags, patches: the folders of
# Spack's misc cache they are kept in). Builds each, over this environment's
# package repos, or brings it up to date, as the first Spack command on a new
# cache would otherwise do. Prints, as JSON, the seconds each took.
import json
import sys
import time

import spack.repo

ATTRIBUTES = {"providers": "provider_index", "tags": "tag_index", "patches": "patch_index"}
seconds = {}
for name in sys.argv[1:]:
    start = time.monotonic()
    getattr(spack.repo.PATH, ATTRIBUTES[name])
    seconds[name] = round(time.monotonic() - start, 1)
print(json.dumps(seconds))
