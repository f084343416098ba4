"""Test problems as data (tests/problems/<app>/<case>.yaml, schemas/problem.schema.yaml):
an input, a published reference, tolerances and how the program runs; and
their files laid out in a run's folder."""

import functools
import hashlib
import json
import math
import re
import shlex
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional

from onestack import data, host, paths, spack
from onestack.errors import OnestackError
from onestack.spack import mirror

PROBLEMS = "tests/problems"


class ProblemError(OnestackError):
    """A test problem that failed its checks, or could not run."""


@dataclass(frozen=True)
class Problem:
    app: str
    case: str
    spec: dict = field(repr=False)  # the validated file, defaults filled in

    def __getitem__(self, key):
        return self.spec[key]

    def get(self, key, default=None):
        return self.spec.get(key, default)

    @property
    def name(self) -> str:
        return f"{self.app}/{self.case}"

    def argv(self, command: Optional[str] = None) -> List[str]:
        """The program and its arguments ({input}: the input's file name), or
        those of another command of the problem (a `prepare` step)."""
        name = Path(self.spec.get("input", "")).name
        return [
            word.replace("{input}", name) for word in shlex.split(self.spec["command"] if command is None else command)
        ]

    def hybrid(self, ranks: int) -> "Problem":
        """The same problem run by a hybrid flavor on `ranks` ranks (`hybrid_args` added)."""
        return Problem(self.app, self.case, {**self.with_args(self.spec["hybrid_args"]).spec, "ranks": ranks})

    def with_args(self, args: str) -> "Problem":
        """The same problem with arguments added to its command (e.g. `-sf opt`)."""
        return Problem(self.app, self.case, {**self.spec, "command": f"{self.spec['command']} {args}".strip()})

    def from_source(self, spec: str) -> "Problem":
        """The same case as another version's source archive holds it."""
        return Problem(self.app, self.case, {**self.spec, "source": spec})

    def not_checked(self, why: str) -> "Problem":
        """The same problem, each of its checks printed as not checked, with why."""
        return Problem(self.app, self.case, {**self.spec, "not_checked_why": why})

    def sized(self, params: Dict) -> "Problem":
        """The same problem with other sizes (emulation, the full report)."""
        return Problem(self.app, self.case, {**self.spec, "params": {**self.spec["params"], **params}})

    def checker_spec(self) -> str:
        """What the image's checker reads (check.py main): a Python literal.
        Its `own_level` checks are left out, said so: an image runs on CPUs
        its builds may not fit (a desktop's), where the note is right."""
        checks = {name: how for name, how in self.spec["checks"].items() if not how.get("own_level")}
        why = "an image runs on any CPU, whatever builds it carries (own_level)"
        unchecked = {name: why for name in self.spec["checks"] if name not in checks}
        if self.spec.get("not_checked_why"):  # of_flavor: a run that cannot match the reference
            unchecked.update({name: self.spec["not_checked_why"] for name in checks})
            checks = {}
        return repr(
            {
                "ranks": self.spec["ranks"],
                "ranks_pattern": self.spec["ranks_pattern"],
                "checks": checks,
                "unchecked": unchecked,
            }
        )


def _folder() -> Path:
    return paths.data_root() / PROBLEMS


def apps() -> List[str]:
    """The applications that have test problems (tests/problems/<app>/)."""
    return sorted(d.name for d in _folder().iterdir() if d.is_dir())


@functools.lru_cache(maxsize=None)
def _load(folder: Path, app: str) -> Dict[str, Problem]:
    problems = {}
    for file in sorted((folder / app).glob("*.yaml")):
        spec = data.load(file, "problem")
        if spec["app"] != app:
            raise data.InputError(f"{data.location(file)}: app: '{spec['app']}', but the file is in {app}/")
        _check_words(file, spec)
        _check_groups(file, spec)
        _check_sources(file, spec)
        _check_fields(file, spec)
        problems[file.stem] = Problem(app, file.stem, spec)
    return problems


# What bash reads as a keyword where a command's first word stands.
SHELL_WORDS = frozenset(
    "! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while".split()
)


def _check_words(file: Path, spec: dict) -> None:
    """Each command splits as a shell would (Problem.argv), and starts with
    its program: a quote left open, or an option first, is refused here,
    with its key, not when the problem runs."""
    commands = {
        "command": spec["command"],
        "hybrid_args": spec["hybrid_args"],
        **{f"prepare.{i}": step for i, step in enumerate(spec["prepare"])},
        **{f"after.{i}": step for i, step in enumerate(spec["after"])},
        **({"peak_search.command": spec["peak_search"]["command"]} if spec.get("peak_search") else {}),
    }
    for key, text in commands.items():
        try:
            words = shlex.split(text)
        except ValueError as err:
            raise data.InputError(
                f"{data.location(file)}: {key}: {err} in {text!r}; quote an argument with spaces whole"
            ) from None
        if key == "hybrid_args":
            continue
        if not words:
            raise data.InputError(f"{data.location(file)}: {key}: no program to run; name one, or remove the step")
        if words[0].startswith("-"):
            raise data.InputError(
                f"{data.location(file)}: {key}: {words[0]!r} is an option, not a program (mpirun, srun or an "
                "image's exec would take it for one of its own); start the command with the program to run"
            )
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in SHELL_WORDS:
            raise data.InputError(
                f"{data.location(file)}: {key}: {words[0]!r} is not a program: a shell reads it as "
                "an assignment or a keyword (a run script's step would do nothing, and pass), and mpirun, "
                "srun or an image's exec as a program's name; start the command with the program to run "
                "(settings go in `env`)"
            )


def _check_groups(file: Path, spec: dict) -> None:
    """Each pattern captures what is read from it: a check's one value, or a
    `min_cosine` check's two vectors; the ranks, the threads, a figure one
    value each; refused here, with its key, not when a run is checked."""
    patterns = {"ranks_pattern": (spec["ranks_pattern"], 1)}
    if "threads_pattern" in spec:
        patterns["threads_pattern"] = (spec["threads_pattern"], 1)
    for name, how in spec["figures"].items():
        patterns[f"figures.{name}.pattern"] = (how["pattern"], 1)
    for name, how in spec["checks"].items():
        if not how.get("absent"):
            patterns[f"checks.{name}.pattern"] = (how["pattern"], 2 if "min_cosine" in how else 1)
        if "reference_pattern" in how:
            patterns[f"checks.{name}.reference_pattern"] = (how["reference_pattern"], 1)
    for key, (pattern, wanted) in patterns.items():
        groups = re.compile(pattern).groups
        if groups != wanted:
            raise data.InputError(
                f"{data.location(file)}: {key}: {groups} group(s), where the check reads {wanted} "
                "(a `min_cosine` check: the reference's vector and the run's; any other: the value); "
                "make the others non-capturing, (?:...)"
            )


def _check_sources(file: Path, spec: dict) -> None:
    """A check against the published output needs that output, and what it
    edits must be taken from the source archive: else the run fails on a
    missing file, after the build."""
    for name, how in spec["checks"].items():
        if "tolerance" in how and "expected" not in how and not ("reference" in spec and "source" in spec):
            raise data.InputError(
                f"{data.location(file)}: checks.{name}: compared with the published output, but the problem "
                "names no `reference` (the file in the source archive) and `source` (its archive); add them, "
                "or state the value as `expected` with its source in a comment"
            )
    taken = [spec[k] for k in ("input", "reference") if k in spec] + spec["files"]
    for name in spec["edits"]:
        if not any(name == t or name.startswith(t.rstrip("/") + "/") for t in taken):
            raise data.InputError(
                f"{data.location(file)}: edits.{name}: not a file the problem takes from its source archive "
                f"({', '.join(taken) or 'none'}); edit the input, the reference or a path under `files`"
            )


# A {param} field of a file the problem writes (`write`); ${...} is the
# input language's own (e.g. a LAMMPS variable), not a field.
FIELD = re.compile(r"(?<!\$)\{([A-Za-z][A-Za-z0-9_]*)\}")


def _check_fields(file: Path, spec: dict) -> None:
    """Each {param} field of a written file has its value in `params`: else
    it is written as it stands, and the program reads the braces. Each
    parameter a sizing names (emulation_params, report_params, peak_search)
    is one of `params`: else it would size nothing, or fail in the report."""
    for name, text in spec["write"].items():
        missing = sorted(set(FIELD.findall(text)) - set(spec["params"]))
        if missing:
            raise data.InputError(
                f"{data.location(file)}: write.{name}: {{{missing[0]}}} has no value in params "
                f"({', '.join(spec['params']) or 'none'}); add it to params or fix the field's name"
            )
    search = spec.get("peak_search", {})
    named = {f"emulation_params.{k}": k for k in spec.get("emulation_params", {})}
    named.update({f"report_params.{k}": k for k in spec.get("report_params", {})})
    named.update({f"peak_search.{k}": search[k] for k in ("size_param", "block_param") if k in search})
    named.update({f"peak_search.grid_params[{i}]": p for i, p in enumerate(search.get("grid_params", []))})
    for key, param in named.items():
        if param not in spec["params"]:
            raise data.InputError(
                f"{data.location(file)}: {key}: {param} is not one of params ({', '.join(spec['params']) or 'none'})"
            )


def load(app: str, benchmarks: bool = False) -> Dict[str, Problem]:
    """An application's test problems by case; with benchmarks, also its
    `benchmark_only` cases (the full report's)."""
    return {case: p for case, p in _load(_folder(), app).items() if benchmarks or not p["benchmark_only"]}


def of_flavor(flavor, case: str, style: str = "") -> Problem:
    """A problem as one flavor runs it, with one of its accelerated styles
    where named; a run that cannot match the reference prints its checks as
    not checked, with why (not_checked_why)."""
    problem = load(flavor.app.module)[case]
    if flavor.app.version in problem["source_on"]:
        problem = problem.from_source(problem["source_on"][flavor.app.version])
    if style:
        problem = problem.with_args(dict(flavor.app.accelerators)[style]["args"])
    why = not_checked_why(flavor, case, style)
    return problem.not_checked(why) if why else problem


def not_checked_why(flavor, case: str, style: str = "") -> str:
    """Why a flavor's run of a problem (with a style) cannot match the
    reference: the problem's `not_checked_on` the flavor's version, the
    style's `not_checked` for the case; "" where it can."""
    why = load(flavor.app.module)[case]["not_checked_on"].get(flavor.app.version, "")
    if style and not why:
        why = dict(flavor.app.accelerators)[style]["not_checked"].get(case, "")
    return " ".join(why.split())


def emulation_problem(app: str) -> Problem:
    """The problem an app runs under an emulated CPU: the one that states
    `emulation_params`, with them."""
    found = [p for p in load(app).values() if "emulation_params" in p.spec]
    if not found:
        raise ProblemError(
            f"{PROBLEMS}/{app}/: no problem states emulation_params: add it to one "
            "(its params for one process under qemu; {} for none)"
        )
    return found[0].sized(found[0]["emulation_params"])


def across_nodes_problem(app: str) -> Problem:
    """The case an app runs across the virtual cluster's nodes (`across_nodes`)."""
    found = [p for p in load(app).values() if p["across_nodes"]]
    if len(found) != 1:
        raise ProblemError(
            f"{PROBLEMS}/{app}/: {len(found)} problems state across_nodes: true; "
            "exactly one must (the case each flavor runs across 2 nodes)"
        )
    return found[0]


def memory_size(fraction: float, multiple_of: int, memory: int) -> int:
    """N of a square matrix of 8-byte numbers that fills that fraction of
    memory (HPL's rule), a multiple of multiple_of."""
    n = int(math.sqrt(fraction * memory / 8))
    return n - n % multiple_of


def full_size(problem: Problem) -> Problem:
    """A problem sized for the full report from this machine's memory."""
    memory = host.memory_bytes()
    rules = problem["report_params"].items()
    return problem.sized({key: memory_size(r["memory_fraction"], r["multiple_of"], memory) for key, r in rules})


@functools.lru_cache(maxsize=None)
def _declared_sha256() -> Dict[str, str]:
    """The sha256 each problem's `source` version declares in its recipe,
    resolved once per process (one `spack python` for every problem)."""
    specs = sorted({s for app in apps() for p in _load(_folder(), app).values() for s in _source_specs(p)})
    return spack.query("version_archives", *specs) if specs else {}


def _source_specs(problem: Problem) -> List[str]:
    """The source archives a problem takes its files from, by version."""
    return ([problem["source"]] if "source" in problem.spec else []) + list(problem["source_on"].values())


def sources(of_apps: Iterable[str]) -> Dict[str, str]:
    """The archives the applications' problems take their files from:
    name@version -> the sha256 its recipe declares (for `make mirror`)."""
    wanted = {s for app in of_apps for p in _load(_folder(), app).values() for s in _source_specs(p)}
    return {spec: d["sha256"] for spec, d in _declared_sha256().items() if d["sha256"] and spec in wanted}


def source_archive(spec: str) -> Path:
    """The verified archive of a problem's source version: by its recipe's
    sha256, or, for a version pinned by commit, the archive of that commit
    the version's own build put in the mirror."""
    declared = _declared_sha256().get(spec) or {"sha256": None, "commit": None}
    if declared["commit"]:
        return mirror.commit_archive_path(spec, declared["git"], declared["commit"])
    return mirror.archive_path(spec, declared["sha256"])


def _extract(archive: Path, members: List[str], dest: Path) -> None:
    """Files or folders (paths below the archive's top folder)."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            inner = member.name.split("/", 1)[1] if "/" in member.name else ""
            if any(inner == m or inner.startswith(m.rstrip("/") + "/") for m in members):
                member.name = inner
                tar.extract(member, dest, filter="data")


def _source_files(problem: Problem) -> Optional[Path]:
    """The files a problem takes from its source archive, extracted once
    into the cache (an archive is scanned whole: seconds for QE's) and
    copied for each run."""
    if "source" not in problem.spec:
        return None
    members = [problem[k] for k in ("input", "reference") if k in problem.spec] + problem["files"]
    archive = source_archive(problem["source"])
    key = hashlib.sha256(json.dumps([archive.name, members]).encode()).hexdigest()[:12]
    folder = paths.cache() / "problem-files" / problem.app / problem.case / key
    if not folder.is_dir():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        _extract(archive, members, partial)
        partial.rename(folder)
    return folder


def prepare(problem: Problem, workdir: Path) -> Path:
    """Lay out a problem's files in workdir: those it takes from its source
    archive (input, reference and files), and those it writes itself;
    returns the folder it runs in."""
    taken = _source_files(problem)
    workdir.mkdir(parents=True, exist_ok=True)
    if taken:
        shutil.copytree(taken, workdir, dirs_exist_ok=True)
    for name, replacements in problem["edits"].items():
        _edit(workdir / name, replacements)
    for name, text in problem["write"].items():
        for key, value in problem["params"].items():
            text = text.replace(f"{{{key}}}", str(value))
        (workdir / name).write_text(text)
    return (workdir / problem["input"]).parent if "input" in problem.spec else workdir


def _edit(path: Path, replacements: List[List[str]]) -> None:
    """Each [old, new] must match exactly once, so that an edit never
    silently misses a changed input."""
    text = path.read_text()
    for old, new in replacements:
        if text.count(old) != 1:
            raise ProblemError(
                f"{path.name}: edit {old!r} matches {text.count(old)} times, not once: fix `edits` in the problem file"
            )
        text = text.replace(old, new)
    path.write_text(text)
