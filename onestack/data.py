"""The stack's data: YAML documents, each validated against its schema in
schemas/ before any code reads it, with the schema's defaults filled in.

An error names the file, the key and what is allowed, so that a mistake in
the data is found in seconds (the fast tier loads every document) and never
by Spack half an hour into a build.
"""

import copy
import fnmatch
import functools
import math
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any, List

import jsonschema
import referencing
import yaml

from onestack import paths
from onestack.errors import OnestackError

SCHEMAS = paths.REPO / "schemas"

# Every data document of the repository and its schema, first match wins
# (the fast tier checks each file, and that no YAML file is left out).
CATALOG = {
    "environments/components.yaml": "components",
    "environments/cpus.yaml": "cpus",
    "environments/*.yaml": "application",
    "sites/*/site.yaml": "site",
    "setup/vendor.yaml": "vendor",
    "setup/externals.yaml": "externals",
    "setup/offline-sources.yaml": "offline-sources",
    "containers/images.yaml": "images",
    "tests/problems/*/*.yaml": "problem",
    "tests/bad-input/*.yaml": "bad-input",
    "report/goals.yaml": "goals",
    "cluster/cluster.yaml": "cluster",
    "tests/cluster/cluster.yaml": "cluster",
    "tests/community/checks.yaml": "community",
}
# YAML files that are not the stack's data, and who checks them instead.
CHECKED_ELSEWHERE = {
    "spack.yaml": "Spack's environment schema (spack audit, spack concretize)",
    "modulefiles/modules.yaml": "Spack's modules schema",
    "ci/spack/ci.yaml": "Spack's ci schema (spack ci generate)",
    "packages/spack_repo/onestack/repo.yaml": "Spack's package repository descriptor",
    ".gitlab-ci.yml": "GitLab's schema (check-jsonschema, make audit)",
    "schemas/*.schema.yaml": "the JSON Schema metaschema",
    "onestack/*/templates/*": "a template: what it renders is checked where it is used",
}


class InputError(OnestackError, ValueError):
    """Bad stack data; str() is the message for the site engineer."""


def location(file: Path) -> str:
    """A file as the site engineer knows it: relative to the data it belongs to."""
    for root in (paths.data_root(), paths.REPO):
        try:
            return str(Path(file).relative_to(root))
        except ValueError:
            continue
    return str(file)


def schema_of(relative: str) -> str:
    """The schema a repository file is checked against (KeyError: none).
    fnmatch's * matches a slash too, so a file a folder deeper than its
    pattern (in a subfolder of environments/) is refused: the stack reads no
    subfolder, and it would be checked here and never used."""
    for pattern, schema in CATALOG.items():
        if fnmatch.fnmatch(relative, pattern):
            if relative.count("/") == pattern.count("/"):
                return schema
            folder = "/".join(relative.split("/")[: pattern.count("/")])
            raise InputError(
                f"{relative}: in a subfolder, which the stack never reads (it reads {pattern}): "
                f"move it up into {folder}/, or out of the repository's data"
            )
    raise KeyError(relative)


@functools.lru_cache(maxsize=None)
def schema(name: str) -> dict:
    return yaml.safe_load((SCHEMAS / f"{name}.schema.yaml").read_text())


@functools.lru_cache(maxsize=None)
def _registry() -> referencing.Registry:
    """The schemas by their $id, so that one can refer to another's $defs."""
    documents = [schema(f.name.removesuffix(".schema.yaml")) for f in sorted(SCHEMAS.glob("*.schema.yaml"))]
    return referencing.Registry().with_resources(
        (document["$id"], referencing.Resource.from_contents(document)) for document in documents
    )


def _pattern(validator, pattern: str, instance, node):
    """JSON Schema's `pattern`, with `$` meaning the end as in ECMA regexes:
    Python's also matches before a final newline, so "/opt/x\n" would pass
    `^/[A-Za-z0-9._/+-]*$` and reach a Lua string or a shell line."""
    ending = pattern.removesuffix("$") + r"\Z" if pattern.endswith("$") else pattern
    if validator.is_type(instance, "string") and not re.search(ending, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _integer(checker, instance) -> bool:
    """A whole number as YAML writes one (true is none): JSON Schema's
    `integer` takes 2.0 too, a float to the code that reads it (a count of
    ranks, a CPU model number rendered into a script)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


# Draft 2020-12 with that `pattern` and that `integer`.
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer),
)


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return Validator(schema(name), registry=_registry(), format_checker=Validator.FORMAT_CHECKER)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: PyYAML
    keeps the last silently, so a second `unavailable:` block would undo the
    first without a word."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # left to PyYAML's own error
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} given twice (first on line {seen[key] + 1}); "
                    "YAML would keep the second alone: merge them into one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_yaml(file: Path) -> Any:
    try:
        return yaml.load(Path(file).read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(f"{location(file)}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    except FileNotFoundError:
        raise InputError(f"{location(file)}: missing") from None
    except UnicodeDecodeError as err:
        raise InputError(f"{location(file)}: not UTF-8 text (byte {err.start} of the file): save it as UTF-8") from None


# How each JSON Schema type is written in YAML, for the fix of a wrong type.
YAML_TYPES = {
    "array": "a list, e.g. [a, b]",
    "object": "a mapping of keys, e.g. {key: value}",
    "string": "text (quoted where YAML would read a number or true)",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
}


def _additional_properties(err: jsonschema.ValidationError) -> str | None:
    if "properties" not in err.schema:
        return None
    return f"{err.message}; allowed keys: {', '.join(err.schema['properties'])}"


def _one_of(err: jsonschema.ValidationError) -> str | None:
    if not all("required" in s for s in err.validator_value):
        return None
    # jsonschema would print the whole mapping; name each choice's keys instead.
    shared = err.schema.get("required", [])
    choices = [" with ".join(k for k in s["required"] if k not in shared) for s in err.validator_value]
    return f"needs exactly one of: {', '.join(dict.fromkeys(choices))}"


def _dependent_required(err: jsonschema.ValidationError) -> str:
    given, needed = next(
        (k, m) for k, ms in err.validator_value.items() if k in err.instance for m in ms if m not in err.instance
    )
    what = err.schema.get("properties", {}).get(needed, {}).get("title", "")
    return f"'{given}' needs '{needed}' beside it" + (f": {what}" if what else "")


def _type(err: jsonschema.ValidationError) -> str | None:
    if not isinstance(err.validator_value, str):
        return None
    return f"{err.message}; write it as {YAML_TYPES.get(err.validator_value, err.validator_value)}"


def _max_length(err: jsonschema.ValidationError) -> str:
    return f"{err.message}: at most {err.validator_value} characters ({err.schema.get('description', '')})"


def _titled(err: jsonschema.ValidationError) -> str | None:
    # The rule in words, as the schema gives them (a pattern alone says little).
    words = [err.schema.get(k) for k in ("title", "description")] if isinstance(err.schema, dict) else []
    said = ": ".join(w for w in words if w)
    return f"{err.message} ({said})" if said else None


def _min_length(err: jsonschema.ValidationError) -> str:
    return f"{err.message}: at least {err.validator_value} characters" + (
        f" ({err.schema['title']})" if "title" in err.schema else ""
    )


def _not(err: jsonschema.ValidationError) -> str | None:
    # jsonschema prints the rule itself ("should not be valid under {...}").
    what = err.schema.get("description") or err.schema.get("title")
    return f"{err.instance!r} is not allowed: {what}" if what else None


# What a site engineer is told for each kind of schema rule broken, where
# jsonschema's own message alone does not say what to write instead.
_MESSAGES = {
    "additionalProperties": _additional_properties,
    "oneOf": _one_of,
    "dependentRequired": _dependent_required,
    "type": _type,
    "maxLength": _max_length,
    "minLength": _min_length,
    "pattern": _titled,
    "enum": _titled,
    "not": _not,
}


def _message(err: jsonschema.ValidationError) -> str:
    """jsonschema's message, said the way a site engineer can act on."""
    said = _MESSAGES.get(err.validator)
    return (said(err) if said else None) or err.message


def validate(file: Path, data: Any, schema_name: str) -> None:
    errors = sorted(_validator(schema_name).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return
    lines = [f"{location(file)}: {len(errors)} problem(s):"]
    for err in errors:
        key = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        lines.append(f"  {key}: {_message(err)}")
    raise InputError("\n".join(lines))


def fill_defaults(data: Any, node: dict, root: dict) -> Any:
    """The schema's defaults for what a valid document leaves out, so that
    code reads every key directly and the default lives in one place."""
    node, root = _follow(node, root)
    if isinstance(data, dict):
        for key, sub in node.get("properties", {}).items():
            # A default beside a $ref wins over the referenced one's.
            default = sub if "default" in sub else _follow(sub, root)[0]
            if key not in data and "default" in default:
                data[key] = copy.deepcopy(default["default"])
            if key in data:
                data[key] = fill_defaults(data[key], sub, root)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for key in [k for k in data if k not in node.get("properties", {})]:
                data[key] = fill_defaults(data[key], extra, root)
    elif isinstance(data, list) and isinstance(node.get("items"), dict):
        return [fill_defaults(item, node["items"], root) for item in data]
    return data


def _follow(node: dict, root: dict) -> tuple:
    """A schema node with its $ref followed (within its schema or into
    another's), and the schema it is now in."""
    while isinstance(node, dict) and "$ref" in node:
        document, _, pointer = node["$ref"].partition("#")
        root = schema(document.removesuffix(".schema.yaml")) if document else root
        node = root
        for part in pointer.strip("/").split("/") if pointer else []:
            node = node[part]
    return node, root


# A data file's name becomes part of names and generated scripts (a test
# case's name in its run script, an application file's in its image's
# definition): characters no shell, Lua or definition file reads specially.
FILE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def load(file: Path, schema_name: str) -> Any:
    """A YAML document of the stack's data, validated, with its defaults."""
    if not FILE_STEM.fullmatch(Path(file).stem):
        raise InputError(
            f"{location(file)}: a data file is named with letters, digits and . _ + - only, "
            "starting with a letter or digit: rename it"
        )
    data = read_yaml(file)
    if data is None:
        raise InputError(f"{location(file)}: empty; it needs the keys of {schema_name}.schema.yaml in schemas/")
    _check_finite(file, data)
    validate(file, data, schema_name)
    return fill_defaults(data, schema(schema_name), schema(schema_name))


def _check_finite(file: Path, node: Any, key: str = "") -> None:
    """YAML's .inf and .nan pass a schema's bounds: a tolerance of .inf would
    pass every check, one of .nan fail every check."""
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError(f"{location(file)}: {key}: {node} is no figure to check against; give a finite number")
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for name, child in children:
        _check_finite(file, child, f"{key}.{name}" if key else str(name))


def every_document(root: Path) -> List[Path]:
    """The YAML files below root that are stack data (those of the catalog)."""
    found = []
    for file in sorted(root.rglob("*.y*ml")):
        relative = file.relative_to(root).as_posix()
        # Hidden folders are tools' own (.git, .generated, Spack's .spack-env).
        hidden = any(part.startswith(".") for part in Path(relative).parts[:-1])
        if hidden or any(fnmatch.fnmatch(relative, p) for p in CHECKED_ELSEWHERE):
            continue
        found.append(file)
    return found
