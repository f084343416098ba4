# Runs inside `spack python` (see onestack/spack/__init__.py:query). Prints, as JSON, every
# source archive and patch the active environment's non-external specs need,
# with its sha256 (or, for a version Spack checks out of git, its commit) and
# its content-addressed path in a Spack mirror.
import json

import spack.environment
import spack.fetch_strategy
import spack.mirrors.layout

env = spack.environment.active_environment()
sources = []
seen = set()
for spec in env.all_specs():
    if spec.external or not spec.concrete:
        continue
    pkg = spec.package
    fetchers = [("source", pkg.fetcher)] if pkg.has_code else []
    fetchers += [("patch", p.fetcher()) for p in spec.patches if hasattr(p, "url")]
    for kind, fetcher in fetchers:
        digest = getattr(fetcher, "digest", None)
        # A git version pinned by commit: Spack's mirror keeps it as an archive
        # of that commit's tree (`spack mirror create` does the same).
        is_git = isinstance(fetcher, spack.fetch_strategy.GitFetchStrategy)
        commit = getattr(fetcher, "commit", None) if is_git else None
        key = digest or commit
        if not key or key in seen:
            continue
        seen.add(key)
        layout = spack.mirrors.layout.default_mirror_layout(fetcher, spec.name, spec if kind == "source" else None)
        sources.append(
            {
                "spec": spec.format("{name}@{version}"),
                "kind": kind,
                "sha256": digest,
                "commit": None if digest else commit,
                "url": getattr(fetcher, "url", None),
                "mirror_path": layout.path,
                "installed": spec.installed,
            }
        )
print(json.dumps(sources))
