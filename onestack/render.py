"""Every generated file (Lua modules, shell scripts, definition files) comes
from a Jinja2 template here, and every value a template puts into one goes
through the filter of that file's language:

- `lua`: a Lua string literal, quotes included ("..." with \\ddd escapes);
- `lua_comment`: text after `-- ` on every line (a newline would end the comment);
- `lua_threads`: a Lua expression of text in which `{threads}` stands for the
  Lua variable `threads` (a hybrid flavor's threads per rank), the rest as
  `lua` literals;
- `sh`: one shell word (shlex.quote), never expanded ($(...) stays text);
- `sh_threads`: a shell word of text in which `{threads}` stands for the
  shell expansion given (an image's threads per rank), the rest as `sh`;
- `def_line`, `def_lines`: text for an Apptainer definition file, refused
  (Refused) where a line's first word starts with `%`, which would open a
  section there whatever quotes surround it (Apptainer's parser reads words,
  not shell), where a line starts with `Bootstrap:` (a new build stage) and
  where it holds `{{ name }}` (a build argument); def_line also refuses a
  newline (headers, %labels), def_path whitespace and quotes too (%files).

Templates are rendered with StrictUndefined (a missing value is an error, not
an empty string); HTML templates (*.html.j2, the report's page) with Jinja's
HTML autoescape, every other without: the filters above are the escaping,
chosen per place, as HTML escaping is wrong for Lua or shell.
"""

import re
import shlex
from pathlib import Path
from typing import Iterable

import jinja2

from onestack import files
from onestack.errors import OnestackError

# In a runtime setting's value: a hybrid flavor's threads per rank, known at load time.
THREADS = "{threads}"


def lua(value) -> str:
    """A Lua string literal of any text: every byte outside printable ASCII,
    and the quote and backslash, as a decimal escape (valid in Lua 5.1-5.4)."""
    out = []
    for byte in str(value).encode():
        char = chr(byte)
        out.append(char if 32 <= byte < 127 and char not in '"\\' else f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


def lua_threads(value) -> str:
    parts = str(value).split(THREADS)
    return " .. threads .. ".join(lua(part) for part in parts)


def sh_threads(value, threads: str) -> str:
    """A shell word of a setting's value, its {threads} the given shell
    expansion (quoted apart: the text around it stays literal)."""
    return threads.join(sh(part) for part in str(value).split(THREADS))


def lua_comment(value) -> str:
    """Text for after `-- `: each line of it a comment line of its own."""
    return "\n-- ".join(str(value).splitlines() or [""])


class Refused(OnestackError, ValueError):
    """A value that cannot go into the file at all; the message says why."""


# Apptainer's own parser (1.4's pkg/build/types/parser/deffile.go and
# internal/pkg/build/args/reader.go), whatever quotes surround the text: a
# line starting with `Bootstrap:` (any case) starts another build stage, the
# last of which is the image built and signed; `{{ name }}` is a build
# argument, an error when none is given.
STAGE_START = re.compile(r"^bootstrap:", re.IGNORECASE | re.MULTILINE)
BUILD_ARGUMENT = re.compile(r"\{\{\s*\w+\s*\}\}")


def def_lines(value) -> str:
    text = str(value)
    for line in text.splitlines():
        if line.split() and line.split()[0].startswith("%"):
            raise Refused(
                f"{line.strip()!r}: a line of a definition file whose first word starts with % opens a section there"
            )
    stage = STAGE_START.search(text)
    if stage:
        raise Refused(f"{text!r}: a line starting with {stage.group()} starts another build stage there")
    argument = BUILD_ARGUMENT.search(text)
    if argument:
        raise Refused(f"{text!r}: Apptainer reads {argument.group()} as a build argument")
    return text


def def_line(value) -> str:
    text = str(value)
    if "\n" in text or "\r" in text:
        raise Refused(f"{text!r}: a definition file takes this value on one line")
    return def_lines(text)


def def_header(value) -> str:
    """A value of the definition file's header (From:), where Apptainer cuts
    a line at its first # (a comment) and joins a line ending in \\ to the next."""
    text = def_line(value)
    if "#" in text or text.endswith("\\"):
        raise Refused(
            f"{text!r}: a definition file's header cuts a value at # and continues one ending in \\ on the "
            "next line; use a path without either (ONESTACK_CACHE holds the base image)"
        )
    return text


# A path that lands unquoted where a space, #, $ or a glob would break it or
# be expanded (slurm.conf, a definition file's %files): refused, not escaped.
SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+-]*")


def def_path(value) -> str:
    """A path of a %files line. Apptainer expands each source path as a shell
    word (`for n in <path>`, run by an interpreter with the build host's
    environment), so $, backticks, globs and braces would run or expand
    there: a path of letters, digits and ._/+- alone."""
    text = def_line(value)
    if not SAFE_PATH.fullmatch(text):
        raise Refused(
            f"{text!r}: a path of a definition file's %files is absolute and may hold letters, digits and "
            ". _ / + - alone (Apptainer expands it as a shell word); use such a path (ONESTACK_CACHE, the checkout)"
        )
    return text


def sh(value) -> str:
    return shlex.quote(str(value))


def sh_words(values: Iterable) -> str:
    return " ".join(shlex.quote(str(v)) for v in values)


def environment(templates: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
    )
    env.filters.update(
        lua=lua,
        lua_threads=lua_threads,
        lua_comment=lua_comment,
        sh=sh,
        sh_threads=sh_threads,
        sh_words=sh_words,
        def_line=def_line,
        def_header=def_header,
        def_path=def_path,
        def_lines=def_lines,
    )
    return env


def write(templates: Path, template: str, out: Path, mode: int = 0o644, **values) -> Path:
    """Render a template into out, atomically (a temporary name, then a rename)."""
    return files.write_text(out, text(templates, template, **values), mode)


def text(templates: Path, template: str, **values) -> str:
    """The template rendered; a refused value is named with the template
    (the filter alone knows the value, not where it came from)."""
    try:
        return environment(templates).get_template(template).render(**values)
    except Refused as err:
        raise Refused(
            f"{templates / template}: {err} (a value of the stack's data, or a path of this checkout, "
            "ONESTACK_CACHE or ONESTACK_PREFIX)"
        ) from None
