"""Prose checked against the tree: what the docs (README.md, docs/, every
other Markdown page) and the comments and docstrings of code and data files
say about the repository must hold, so that a renamed file fails the fast
tier, not a reader.

- Every repository path they name exists: a token that starts with a top
  folder of the repository (`onestack/...`, `tests/...`) or is one of its
  root files, and every bare file name (`check.py`) is a file of the
  repository, unless it is another project's file listed in EXTERNAL_NAMES.
  `packages/.../<name>` abbreviates any depth. Placeholders (a token running
  into `<`, `{`, `*`, `$`) and generated or outside paths (`.generated/`,
  `$ONESTACK_PREFIX/...`, absolute paths) are not checked.
- Every `make <target>` the docs, the comments or the pipeline files name is
  a target of the Makefile.
- Numbers the data holds are not restated in prose: a sentence about a goal
  of report/goals.yaml does not repeat its threshold, and CI's time budget is
  stated once, in docs/site-staff/ci.md."""

import ast
import functools
import io
import re
import subprocess
import tokenize
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
import yaml

from onestack import paths

REPO = paths.REPO
# Files whose prose is not checked: recorded program output, CPU reports and
# upstream patches are other programs' words.
NOT_PROSE = re.compile(r"^(tests/fast/recorded/(?!README\.md$)|dispatch/cases/)|\.patch$")
# Comments start with `#` in these (and in files without an extension: scripts).
HASH_COMMENTS = (".sh", ".yaml", ".yml", ".txt", ".ini", ".def", ".j2", ".gitignore", "Makefile")
# The file kinds a bare name is checked for.
NAME_SUFFIXES = ("py", "sh", "md", "yaml", "yml", "j2", "c", "def", "lua")
# Bare file names the prose rightly uses for other projects' files.
EXTERNAL_NAMES = {
    "autogen.sh": "MVAPICH2's generator of its configure scripts",
    "tcp_init.c": "an MVAPICH2 source file the site patch fixes",
    "tcp_getip.c": "an MVAPICH2 source file the site patch fixes",
    "ch3u_getinterfaces.c": "an MVAPICH2 source file the site patch fixes",
    "cpu_features.c": "glibc's reading of the CPU",
    "regen-files.sh": "libFLAME's maintainers' script",
    "cc.sh": "Spack's compiler wrapper",
    "mirrors.yaml": "a section file of Spack's configuration scopes",
    "ompi_mpi_init.c": "Open MPI's MPI_Init, where a crash of Debian's Open MPI 4.1.4 was traced",
}
# Where CI's time budget is stated (the one place).
BUDGET_PAGE = "docs/site-staff/ci.md"
GOALS_FILE = "report/goals.yaml"


@functools.lru_cache(maxsize=None)
def repo_files() -> Tuple[str, ...]:
    """Every file of the checkout that git keeps or would keep (tracked, or
    new and not ignored); a walk of the tree where git is missing."""
    try:
        listed = subprocess.run(
            # Also in a checkout another user owns (a CI container's): git
            # refuses to read such a one without being told it is safe.
            ["git", "-c", "safe.directory=*", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        ignored = {".git", ".generated", ".spack-env", "__pycache__", ".pytest_cache", ".ruff_cache"}
        listed = [
            p.relative_to(REPO).as_posix()
            for p in REPO.rglob("*")
            if p.is_file()
            and not ignored & set(p.relative_to(REPO).parts)
            and not p.relative_to(REPO).parts[0].startswith("$")
        ]
    return tuple(sorted(f for f in listed if (REPO / f).is_file()))


@functools.lru_cache(maxsize=None)
def path_pattern() -> re.Pattern:
    """A token that names a repository path: a top folder and what follows,
    or a root file. Not after a word character, a dot, a slash, `$`, `~` or a
    quote (then it is part of another path, a variable's or a code string)."""
    tops = {f.split("/")[0]: "/" in f for f in repo_files() if not f.startswith("$")}
    folders = "|".join(re.escape(t) for t, is_folder in sorted(tops.items()) if is_folder)
    files = "|".join(re.escape(t) for t, is_folder in sorted(tops.items()) if not is_folder)
    return re.compile(rf"(?<![\w./$~@'\"-])((?:{folders})/[\w.+@/-]*|(?:{files})(?![\w.-]))")


NAME = re.compile(rf"(?<![\w./$~@<{{'\"-])([\w+-]+(?:\.[\w+-]+)*\.(?:{'|'.join(NAME_SUFFIXES)}))(?![\w/-])")
# A Markdown page named by a relative path (from the repository or from the
# file's own folder), wherever it is.
PAGE = re.compile(r"(?<![\w./$~@<{'\"-])((?:[\w.+-]+/)+[\w.+-]+\.md)(?![\w/-])")
PLACEHOLDER = set("<{*$[")


def _docstrings(text: str) -> Iterator[Tuple[int, str]]:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                for offset, line in enumerate(first.value.value.splitlines()):
                    yield first.lineno + offset, line


def _blocks(text: str, pattern: str) -> Iterator[Tuple[int, str]]:
    """The lines of every match of pattern (comment blocks), with their numbers."""
    for match in re.finditer(pattern, text, re.S | re.M):
        first = text.count("\n", 0, match.start()) + 1
        for offset, line in enumerate(match.group(0).splitlines()):
            yield first + offset, line


def prose(path: str) -> List[Tuple[int, str]]:
    """The prose of a file, line by line: all of a Markdown page; the comments
    and docstrings of Python; the comments of C, Lua, HTML, shell, YAML and
    the other data and template files."""
    text = (REPO / path).read_text(errors="replace")
    if path.endswith(".md"):
        return list(enumerate(text.splitlines(), 1))
    if path.endswith(".py"):
        comments = [
            (t.start[0], t.string)
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type == tokenize.COMMENT
        ]
        return sorted(comments + list(_docstrings(text)))
    if path.endswith(".c"):
        return list(_blocks(text, r"/\*.*?\*/|//[^\n]*"))
    found = list(_blocks(text, r"\{#.*?#\}")) if path.endswith(".j2") else []
    if path.endswith(".lua.j2"):
        return found + list(_blocks(text, r"--[^\n]*"))
    if path.endswith(".html.j2"):
        return found + list(_blocks(text, r"<!--.*?-->"))
    if path.endswith(HASH_COMMENTS) or "." not in Path(path).name:
        return found + list(_blocks(text, r"(?:^|(?<=\s))#[^\n]*"))
    return found


def prose_files() -> List[str]:
    kinds = (".md", ".py", ".c", *HASH_COMMENTS)
    return [f for f in repo_files() if not NOT_PROSE.search(f) and (f.endswith(kinds) or "." not in Path(f).name)]


def _exists(path: str) -> bool:
    if "/.../" in path:  # packages/.../mvapich2: any depth in between
        return any(REPO.glob(path.replace("/.../", "/**/")))
    return (REPO / path).exists()


def broken_paths(path: str) -> List[str]:
    """Each repository path or file name the file's prose names that does not exist."""
    names = {Path(f).name for f in repo_files()}
    broken = []
    for number, line in prose(path):
        for match in path_pattern().finditer(line):
            named = match.group(1).rstrip(".,:;")
            if line[match.end() : match.end() + 1] in PLACEHOLDER or _exists(named):
                continue
            broken.append(f"{path}:{number}: {named} does not exist: {line.strip()}")
        for match in NAME.finditer(line):
            name = match.group(1)
            if line[match.end() : match.end() + 1] in PLACEHOLDER or name in EXTERNAL_NAMES:
                continue
            if name not in names and f"{name}.j2" not in names:
                broken.append(f"{path}:{number}: no file is named {name}: {line.strip()}")
        for match in PAGE.finditer(line):
            page = match.group(1)
            if not ((REPO / page).is_file() or (REPO / path).parent.joinpath(page).is_file()):
                broken.append(f"{path}:{number}: no page {page}: {line.strip()}")
    return broken


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set:
    """The anchors of a Markdown page's headings, as GitHub makes them."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def broken_links(path: str) -> List[str]:
    """Each relative link of a Markdown page whose file or heading is missing."""
    broken = []
    for number, line in prose(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (REPO / path).parent / file if file else REPO / path
            if not linked.exists():
                broken.append(f"{path}:{number}: the link {target} leads nowhere")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{path}:{number}: the link {target}: {file or path} has no heading #{anchor}")
    return broken


@pytest.mark.parametrize("path", prose_files())
def test_every_path_the_prose_names_exists(path):
    broken = broken_paths(path)
    assert not broken, "\n".join(broken) + "\n(fix the text, or list another project's file in EXTERNAL_NAMES)"


@pytest.mark.parametrize("path", [f for f in prose_files() if f.endswith(".md")])
def test_every_link_of_a_page_leads_somewhere(path):
    broken = broken_links(path)
    assert not broken, "\n".join(broken)


def test_the_path_check_finds_what_it_must():
    """The patterns on made-up lines: a wrong path and name are caught, the
    abbreviation and the placeholders are not."""
    line = (
        "see onestack/nowhere.py, tests/fast, packages/.../mvapich2/package.py, environments/<app>.yaml, "
        "$ONESTACK_PREFIX/modules, /opt/onestack/dispatch, .generated/ci/ and nowhere.py"
    )
    named = [m.group(1).rstrip(".,") for m in path_pattern().finditer(line)]
    assert named == ["onestack/nowhere.py", "tests/fast", "packages/.../mvapich2/package.py", "environments/"]
    assert [_exists(p) for p in named[:3]] == [False, True, True]
    assert [m.group(1) for m in NAME.finditer(line)] == ["nowhere.py"]


# `make <target>` inside a code span or a fenced block of Markdown.
MAKE = re.compile(r"(?:^|(?<=[\s;&|(\"]))make\s+(?:-\w+\s+)*(?:[A-Z_]+=\S*\s+)*([a-z][\w-]*)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# The pipeline files: every line is a command or names one.
PIPELINE_FILES = (".gitlab-ci.yml", "ci/spack/ci.yaml")


def makefile_targets() -> set:
    text = (REPO / "Makefile").read_text()
    targets = set()
    for line in text.splitlines():
        rule = re.match(r"^([\w.-]+(?:\s+[\w.-]+)*)\s*:(?![=])", line)
        if rule:
            targets.update(rule.group(1).split())
    return targets


def make_commands(path: str) -> Iterator[Tuple[int, str]]:
    """(line, target) of each `make <target>` the file names."""
    if path in PIPELINE_FILES:
        spans = list(enumerate((REPO / path).read_text().splitlines(), 1))
    else:
        lines = prose(path)
        spans = [(n, span) for n, line in lines for span in CODE_SPAN.findall(line)]
        if path.endswith(".md"):
            fenced, inside = [], False
            for number, line in lines:
                if line.lstrip().startswith("```"):
                    inside = not inside
                elif inside:
                    fenced.append((number, line))
            spans += fenced
    for number, span in spans:
        for match in MAKE.finditer(span):
            yield number, match.group(1)


@pytest.mark.parametrize("path", [f for f in prose_files() if f != "Makefile"] + list(PIPELINE_FILES))
def test_every_make_target_named_exists(path):
    targets = makefile_targets()
    unknown = [
        f"{path}:{n}: `make {t}` is no target of the Makefile" for n, t in make_commands(path) if t not in targets
    ]
    assert not unknown, "\n".join(unknown)


def test_the_makefile_has_the_two_commands():
    """The README's two commands, and what .ci/run calls."""
    assert {"stack", "test"} <= makefile_targets()
    assert "make test" in (REPO / ".ci" / "run").read_text()


def _sentences_of(paragraph: List[Tuple[int, str]]) -> Iterator[Tuple[int, str]]:
    text, starts = "", []
    for number, line in paragraph:
        starts.append((len(text), number))
        text += line + " "
    offset = 0
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z`(])", text):
        offset = text.index(sentence, offset)
        if sentence.strip():
            yield max(n for start, n in starts if start <= offset), sentence.strip()
        offset += len(sentence)


def sentences(path: str) -> Iterator[Tuple[int, str]]:
    """The file's prose as sentences (consecutive prose lines joined, comment
    markers dropped), each with the number of the line it starts on."""
    paragraph: List[Tuple[int, str]] = []
    previous = None
    for number, line in prose(path):
        stripped = re.sub(r"^\s*(#+|--|//|/?\*+|\{#)\s?", "", line).strip()
        if paragraph and (number != previous + 1 or not stripped):
            yield from _sentences_of(paragraph)
            paragraph = []
        if stripped:
            paragraph.append((number, stripped))
        previous = number
    yield from _sentences_of(paragraph)


def goal_numbers() -> Dict[str, List[str]]:
    """Each goal of report/goals.yaml's threshold as prose would write it:
    a share in percent, a ratio as `<n>x`."""
    numbers: Dict[str, List[str]] = {}
    for goal in yaml.safe_load((REPO / GOALS_FILE).read_text())["goals"]:
        value = goal.get("at_least", goal.get("at_most"))
        if value is None:
            continue
        forms = [f"{value * 100:g}%"] if goal["kind"] in ("peak_share", "native_gap", "abi_gap") else [f"{value:g}x"]
        numbers[goal["goal"]] = forms
    return numbers


# A number of minutes stated as CI's budget: "the <n>-minute budget", "a
# budget of <n> minutes", "CI's <n> minutes".
BUDGET = re.compile(
    r"\d+(?:\.\d+)?[- ]?min(?:ute)?s?\W+(?:\w+\W+){0,2}budget"
    r"|budget\W+(?:\w+\W+){0,3}?\d+(?:\.\d+)?[- ]?min"
    r"|\bCI(?:'s)?\W+\d+(?:\.\d+)?\s*min",
    re.I,
)


def restated_numbers(path: str) -> List[str]:
    found = []
    goals = goal_numbers()
    for number, sentence in sentences(path):
        if path != GOALS_FILE and re.search(r"\bgoals?\b", sentence, re.I):
            for goal, forms in goals.items():
                for form in forms:
                    if re.search(rf"(?<![\d.]){re.escape(form)}(?![\d])", sentence):
                        found.append(
                            f"{path}:{number}: restates the goal '{goal}' ({form}): name it by "
                            f"{GOALS_FILE} instead: {sentence[:200]}"
                        )
        if path != BUDGET_PAGE and BUDGET.search(sentence):
            found.append(
                f"{path}:{number}: states CI's budget in minutes: point at {BUDGET_PAGE} instead: {sentence[:200]}"
            )
    return found


def test_numbers_the_data_holds_are_not_restated():
    found = [line for path in prose_files() for line in restated_numbers(path)]
    assert not found, "\n".join(found)


def test_the_budget_is_stated_where_the_others_point():
    text = (REPO / BUDGET_PAGE).read_text()
    assert re.search(r"budget", text) and re.search(r"\d+ minutes", text), f"{BUDGET_PAGE} states no budget"
