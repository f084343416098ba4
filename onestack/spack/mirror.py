"""The offline source mirror: fills $ONESTACK_MIRROR with the archives and
patches the stack needs, by content address, from the places listed in
setup/offline-sources.yaml, admitting a file only if its sha256 is the one the
Spack recipe declares; a version the recipe pins by git commit is archived from
that very commit of a local clone. Spack reads it as a mirror (site scope
mirrors.yaml)."""

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.parse
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from onestack import data, files, paths, spack
from onestack.errors import OnestackError

OFFLINE_SOURCES = "setup/offline-sources.yaml"


class MirrorError(OnestackError):
    pass


class CloneUnset(MirrorError):
    """No clone named for a source: online, Spack downloads it (nothing to say)."""


def offline_sources() -> Dict[str, dict]:
    return data.load(paths.data_root() / OFFLINE_SOURCES, "offline-sources")


def sha256_of(file: Path) -> str:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def needed_sources(include_installed: bool = False) -> List[dict]:
    """Downloads the environment's specs need (local file:// sources excluded)."""
    sources = spack.query("env_sources")
    return [
        s for s in sources if not (s["url"] or "").startswith("file:") and (include_installed or not s["installed"])
    ]


def archive_sources(archives: Dict[str, str]) -> List[dict]:
    """Version archives that no spec of the environment fetches (the test
    problems' inputs: name@version -> the sha256 its recipe declares), as
    sources for fill(), at Spack's content-addressed path with the extension
    of the file setup/offline-sources.yaml takes it from."""
    known = offline_sources()
    sources = []
    for spec, sha256 in sorted(archives.items()):
        how = known.get(sha256, {})
        name = next((kind["file"] for kind in how.values() if isinstance(kind, dict) and "file" in kind), ".tar.gz")
        suffix = name[name.rindex(".tar.") :] if ".tar." in name else Path(name).suffix
        path = f"_source-cache/archive/{sha256[:2]}/{sha256}{suffix}"
        sources.append(
            {"spec": spec, "kind": "test input", "sha256": sha256, "commit": None, "url": None, "mirror_path": path}
        )
    return sources


def commit_archive_path(spec: str, git: str, commit: str) -> Path:
    """The archive of a version pinned by commit, where Spack's mirror keeps
    it (_source-cache/git/<repository path>/<commit>.tar.gz)."""
    archive = (
        paths.mirror() / "_source-cache" / "git" / urllib.parse.urlparse(git).path.lstrip("/") / f"{commit}.tar.gz"
    )
    if not archive.is_file():
        raise MirrorError(f"no archive of {spec} (commit {commit}) in the mirror: build it, or run `make mirror`")
    return archive


def archive_path(spec: str, sha256: Optional[str]) -> Path:
    """The verified archive of a version no flavor fetches (archive_sources),
    in the mirror or Spack's download cache, by Spack's content-addressed name."""
    found = [
        f
        for root in (paths.mirror(), paths.source_cache())
        if sha256
        for f in (root / "_source-cache" / "archive" / sha256[:2]).glob(f"{sha256}*")
    ]
    if not found:
        raise MirrorError(
            f"no source archive of {spec} (sha256 {sha256}) in the mirror or source cache: run `make mirror` "
            f"(offline: with the clone variable of {OFFLINE_SOURCES} for it set)"
        )
    stat = found[0].stat()
    _verified(spec, found[0], sha256, (stat.st_size, stat.st_mtime_ns))
    return found[0]


@functools.lru_cache(maxsize=None)
def _verified(spec: str, archive: Path, sha256: str, stamp: Tuple[int, int]) -> None:
    """An archive no build fetches is read by onestack, not by Spack, which
    checks what it fetches: its content checked against its name, once a
    process while it is unchanged (stamp), as Spack would (a file changed or
    cut short after it was admitted)."""
    actual = sha256_of(archive)
    if actual != sha256:
        raise MirrorError(
            f"{archive}: the source archive of {spec} has sha256 {actual}, not its recipe's {sha256}: "
            "it changed after it was admitted; remove it and run `make mirror`"
        )


def _present(source: dict) -> bool:
    return any((root / source["mirror_path"]).is_file() for root in (paths.mirror(), paths.source_cache()))


def _from_debian(how: dict, workdir: Path) -> Path:
    if "suite" in how:
        command = [str(paths.REPO / "setup" / "debian-source.sh"), how["suite"], how["package"], how["version"], "."]
        fix = f"Debian's {how['suite']} must still have {how['package']} {how['version']}"
    else:
        command, fix = ["apt-get", "source", "--download-only", how["package"]], "`make setup` enables deb-src"
    proc = subprocess.run(command, cwd=workdir, text=True, capture_output=True)
    # apt-get fails as a whole when one file of the source package is gone from
    # the archive (seen: hpcc's debian.tar.xz); the file needed may still be here.
    if proc.returncode != 0 and not (workdir / how["file"]).is_file():
        raise MirrorError(f"`{' '.join(command)}` failed: {proc.stderr.strip()[-500:]}\n  fix: {fix}")
    return workdir / how["file"]


def _clone(variable: str, what: str) -> str:
    """The local git clone an environment variable names (never a path in the project)."""
    clone = os.environ.get(variable)
    if not clone:
        raise CloneUnset(f"set {variable} to a local git clone that has {what}")
    return clone


def _from_git(how: dict, workdir: Path) -> Path:
    clone = _verified_clone(how["clone_variable"], how["commit"], f"the repository of commit {how['commit']}")
    out = workdir / how["commit"]
    with open(out, "wb") as handle:
        subprocess.run(
            ["git", "-C", clone, "show", "--format=", "--full-index", how["commit"]],
            stdout=handle,
            check=True,
        )
    return out


def _from_git_tag(how: dict, workdir: Path) -> Path:
    """A release archive as GitHub serves it for a tag: `git archive` of the tag
    under <repo>-<version>/, gzipped without a name or time stamp (byte for
    byte, as the sha256 check then confirms)."""
    clone = _tagged_clone(how)
    out = workdir / f"{how['prefix'].rstrip('/')}.tar.gz"
    archive = subprocess.Popen(
        ["git", "-C", clone, "archive", "--format=tar", f"--prefix={how['prefix']}", how["tag"]], stdout=subprocess.PIPE
    )
    with open(out, "wb") as handle:
        subprocess.run(["gzip", "-n"], stdin=archive.stdout, stdout=handle, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise MirrorError(f"`git archive` of tag {how['tag']} in ${how['clone_variable']}={clone} failed")
    return out


def _tagged_clone(how: dict) -> str:
    """The clone a variable names, which must have the tag."""
    clone = _clone(how["clone_variable"], f"tag {how['tag']}")
    tag = subprocess.run(
        ["git", "-C", clone, "rev-parse", "--verify", "--quiet", f"{how['tag']}^{{commit}}"], capture_output=True
    )
    if tag.returncode != 0:
        raise MirrorError(f"{how['clone_variable']}={clone} has no tag {how['tag']}: set it to a clone that has it")
    return clone


_CANDIDATES = {"debian": _from_debian, "git": _from_git, "git_tag": _from_git_tag}


def _commit_archive(source: dict, how: dict) -> None:
    """A version the recipe pins by git commit: the commit is the checksum.

    Spack's mirror keeps such a version as a tar.gz of the commit's tree under
    one top folder, its submodules checked out in it (what `spack mirror
    create` writes); `git archive` of the commit, resolved in the clone to
    exactly that id, is that tree, less the files `omit` names (each with why
    no build step reads it; a path inside a submodule leaves it out of that
    submodule), plus each submodule at the commit its parent's
    tree records, from the clone `submodules` names for it."""
    variable, commit = how["clone_variable"], source["commit"]
    trees = _commit_trees(commit, how, source["url"])
    with tempfile.TemporaryDirectory(dir=paths.cache()) as tmp:
        for path, (tree_variable, clone, treeish) in trees.items():
            prefix = path + "/" if path else ""
            omitted = [f":(exclude){o[len(prefix) :]}" for o in how["omit"] if o.startswith(prefix)]
            _extract(tree_variable, clone, treeish, Path(tmp) / "spack-src" / path, omitted)
        with files.replacing(paths.mirror() / source["mirror_path"]) as partial:
            subprocess.run(["tar", "-czf", str(partial), "-C", tmp, "spack-src"], check=True)
    with_submodules = f" with {len(how['submodules'])} submodules" if how["submodules"] else ""
    print(
        f"==> mirror: admitted {source['spec']} {source['kind']} "
        f"(git archive of commit {commit}{with_submodules} from ${variable})"
    )


def _commit_trees(commit: str, how: dict, what: str) -> Dict[str, tuple]:
    """Each tree a commit's archive takes, by its path in the archive ("" the
    top): (variable, clone, tree-ish), every clone verified to hold what it
    must give, so that set-up finds a wrong clone before anything builds."""
    trees = {"": (how["clone_variable"], _verified_clone(how["clone_variable"], commit, what), commit)}
    for path, origin in sorted(how["submodules"].items()):
        parent = max((p for p in trees if not p or path.startswith(p + "/")), key=len)
        _, parent_clone, parent_commit = trees[parent]
        sub_commit = _gitlink(parent_clone, parent_commit, path[len(parent) :].lstrip("/"), path)
        if isinstance(origin, dict):
            trees[path] = _vendored_tree(origin, path, sub_commit)
        else:
            trees[path] = (origin, _verified_clone(origin, sub_commit, f"the submodule {path}"), sub_commit)
    return trees


def _vendored_tree(origin: dict, path: str, sub_commit: str) -> tuple:
    """A submodule from a repository that vendors it (its own host is one no
    machine here reaches): the vendored folder, admitted only if the vendoring
    commit's records name the very commit the parent pins, so the pin still
    decides what is built."""
    variable, commit = origin["clone_variable"], origin["commit"]
    clone = _verified_clone(variable, commit, f"the repository vendoring {path}")
    name = Path(path).name
    records = subprocess.run(
        ["git", "-C", clone, "show", f"{commit}:{origin['records']}"], text=True, capture_output=True
    ).stdout.split("\n")
    if f"{sub_commit} {name}" not in records:
        raise MirrorError(
            f"{OFFLINE_SOURCES}: submodules: {path}: {origin['records']} of commit {commit} (${variable}) does not "
            f"record {sub_commit} for {name}, the commit the parent pins: not admitted"
        )
    return variable, clone, f"{commit}:{origin['path']}"


def _verified_clone(variable: str, commit: str, what: str) -> str:
    """The clone a variable names, which must resolve commit to itself."""
    clone = _clone(variable, f"commit {commit}")
    proc = subprocess.run(
        ["git", "-C", clone, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], text=True, capture_output=True
    )
    if proc.returncode != 0 or proc.stdout.strip() != commit:
        raise MirrorError(f"{variable}={clone} has no commit {commit}: set it to a clone of {what}")
    return clone


def _gitlink(clone: str, commit: str, relative: str, path: str) -> str:
    """The commit a tree records for its submodule at relative."""
    listed = subprocess.run(["git", "-C", clone, "ls-tree", commit, relative], text=True, capture_output=True).stdout
    fields = listed.split()
    if len(fields) < 3 or fields[1] != "commit":
        raise MirrorError(
            f"{OFFLINE_SOURCES}: submodules: {path} is not a submodule of commit {commit} ({clone}): remove it"
        )
    return fields[2]


def _extract(variable: str, clone: str, commit: str, into: Path, pathspecs: List[str]) -> None:
    """The commit's tree, less what pathspecs exclude, into a folder. Quiet
    unless it fails: git names a blob the clone lacks even when the pathspec
    leaves its file out (the case `omit` exists for)."""
    error = files.git_export(clone, commit, into, [".", *pathspecs])
    if error:
        raise MirrorError(f"`git archive` of {commit} in ${variable}={clone} failed: {error}")


def _admit(source: dict, how: dict) -> None:
    """Fetch a candidate, compare its sha256 with the recipe's, and file it."""
    with tempfile.TemporaryDirectory(dir=paths.cache()) as tmp:
        kind = next(k for k in _CANDIDATES if k in how)
        candidate = _CANDIDATES[kind](how[kind], Path(tmp))
        actual = sha256_of(candidate)
        if actual != source["sha256"]:
            raise MirrorError(
                f"{candidate.name} for {source['spec']} does not match the recipe:\n"
                f"  recipe sha256: {source['sha256']}\n  file sha256:   {actual}\n"
                "  not admitted (a checksum is never edited to fit; add a site version instead)"
            )
        with files.replacing(paths.mirror() / source["mirror_path"]) as partial:
            shutil.copyfile(candidate, partial)
        print(f"==> mirror: admitted {source['spec']} {source['kind']} ({candidate.name}, sha256 verified)")


def fill(require_all: bool = False, rebuild: bool = False, extra: Sequence[dict] = ()) -> None:
    """Bring every missing source into the mirror; report what is still missing.

    With require_all (offline builds), a source that is neither in the mirror
    nor obtainable here is an error naming it; otherwise Spack downloads it.
    With rebuild, installed specs count too (a from-scratch rebuild needs them).
    extra: sources beyond the environment's (archive_sources).
    """
    known: Dict[str, dict] = offline_sources()
    missing, failed = [], []
    for source in [*needed_sources(include_installed=rebuild), *extra]:
        if _present(source):
            continue
        how = known.get(source["sha256"] or source["commit"])
        if how is None:
            missing.append(source)
            continue
        try:
            if source["commit"]:
                _commit_archive(source, how["git_archive"])
            else:
                _admit(source, how)
        except (MirrorError, subprocess.CalledProcessError, OSError) as err:  # one source's failure, named
            failed.append(f"{source['spec']} {source['kind']}: {err}")
            missing.append(source)
    for message in failed:
        print(f"==> mirror: {message}")
    if not require_all:
        missing = _downloaded(missing)
    if not missing:
        print("==> mirror: every source the stack needs is in the mirror or already installed")
        return
    lines = [
        f"  {s['spec']} {s['kind']}: {s['url']}\n    "
        f"{'sha256 ' + s['sha256'] if s['sha256'] else 'git commit ' + s['commit']} "
        f"-> {paths.mirror() / s['mirror_path']}"
        for s in missing
    ]
    report = "sources not in the mirror:\n" + "\n".join(lines)
    if require_all:
        raise MirrorError(
            report + "\n  fix: put each file (with that sha256, or an archive of that commit) at that path, "
            "or list where to get it in "
            f"{OFFLINE_SOURCES}, then run `make mirror`"
        )
    print(f"==> mirror: {report}\n==> mirror: Spack will download these from upstream")


def _downloaded(missing: List[dict]) -> List[dict]:
    """Online, the archives no build downloads (url None: the MPI benchmarks'
    source, a test problem's input) fetched into the mirror by Spack, sha256
    checked, where no clone could give them; returns what is still missing:
    the environment's sources (Spack downloads them as it builds), and an
    archive Spack could not fetch, which is an error."""
    wanted = [s for s in missing if s["url"] is None]
    if wanted:
        spack.query("fetch_archives", str(paths.mirror()), *[s["spec"] for s in wanted])
    lost = [s for s in wanted if not _present(s)]
    if lost:
        raise MirrorError(
            "no build downloads these archives, and Spack could not fetch them from its mirrors or the recipe's URL:\n"
            + "\n".join(f"  {s['spec']} {s['kind']} (sha256 {s['sha256']})" for s in lost)
            + f"\n  fix: set the clone variable {OFFLINE_SOURCES} names for each, then run `make mirror`"
        )
    return [s for s in missing if s["url"] is not None]


def _in_mirror(key: str) -> bool:
    """Whether the mirror (or Spack's own download cache) holds the file of
    a key (a sha256 or a commit), by Spack's content-addressed names."""
    pattern = f"archive/{key[:2]}/{key}*" if len(key) == 64 else f"git/**/{key}.tar.gz"
    return any(any((root / "_source-cache").glob(pattern)) for root in (paths.mirror(), paths.source_cache()))


def _obtainable(key: str, how: dict) -> str:
    """How a source will be obtained here; a MirrorError says why it cannot
    be, naming what to set (each clone checked to hold what it must give)."""
    kind = next(k for k in ("debian", "git", "git_tag", "git_archive") if k in how)
    if kind == "debian" and "suite" in how[kind]:
        return f"Debian {how[kind]['suite']} (setup/debian-source.sh)"
    if kind == "debian":
        proc = subprocess.run(["apt-cache", "showsrc", how[kind]["package"]], text=True, capture_output=True)
        if not proc.stdout.strip():
            raise MirrorError(f"apt has no source package {how[kind]['package']}: enable deb-src (make setup does)")
        return f"apt-get source {how[kind]['package']}"
    if kind == "git":
        _verified_clone(how[kind]["clone_variable"], how[kind]["commit"], how["what"])
    elif kind == "git_tag":
        _tagged_clone(how[kind])
    else:
        _commit_trees(key, how[kind], how["what"])
    return f"${how[kind]['clone_variable']}"


def check_obtainable(offline: bool) -> None:
    """Set-up's table of every source a rebuild needs and how it is obtained:
    from the mirror, from the archive or a clone, else from upstream (online)
    or, offline, an error naming the variable to set before anything builds
    (a clone that lacks the commit, tag or submodule it must give included)."""
    missing = []
    print("==> sources a rebuild needs (setup/offline-sources.yaml):")
    for key, how in offline_sources().items():
        try:
            found = "in the mirror" if _in_mirror(key) else _obtainable(key, how)
        except MirrorError as err:
            found = "MISSING" if offline else "from upstream (Spack downloads it)"
            if offline or not isinstance(err, CloneUnset):
                missing.append(f"{how['what']}: {err}")
        print(f"    {how['what'][:72]:72}  {found}")
    if missing and offline:
        raise MirrorError(
            "offline (ONESTACK_OFFLINE=1), and these sources cannot be had:\n  "
            + "\n  ".join(missing)
            + "\n  (docs/site-staff/sources.md names each clone)"
        )
    for reason in missing:
        print(f"==> from upstream, not from here: {reason}")
