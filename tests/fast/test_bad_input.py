"""Every bad-input case (tests/bad-input/<case>.yaml), in-process: a small
edit of a real data file, applied to a copy of the data, must give an error
with every line the case expects, naming the file and the key."""

import shutil
from pathlib import Path

import pytest
import yaml

from onestack import data, paths, validate

CASES = sorted((paths.REPO / "tests" / "bad-input").glob("*.yaml"))
DATA_FOLDERS = ("environments", "sites", "setup", "containers", "report", "tests/problems", "tests/community")


def _parent(document, key: str):
    *path, last = key.split(".")
    node = document
    for part in path:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, int(last) if isinstance(node, list) else last


def _apply(file: Path, edits: list) -> None:
    """The case's edits: keys set or deleted in the YAML, or a text replaced
    (exactly once: an edit that no longer matches the file is the case's bug)."""
    for edit in edits:
        text = file.read_text()
        if "replace" in edit:
            old, new = edit["replace"]
            assert text.count(old) == 1, f"{file.name}: {old!r} must match once"
            file.write_text(text.replace(old, new))
            continue
        document = yaml.safe_load(text)
        node, last = _parent(document, edit.get("set", edit.get("delete")))
        if "set" in edit:
            node[last] = edit["value"]
        else:
            del node[last]
        file.write_text(yaml.safe_dump(document, sort_keys=False))


def edited_copy(case: dict, root: Path) -> Path:
    for folder in DATA_FOLDERS:
        shutil.copytree(paths.REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    _apply(root / case["file"], case["edits"])
    return root


@pytest.mark.parametrize("file", CASES, ids=[c.stem for c in CASES])
def test_bad_input_is_refused_with_file_and_key(file, tmp_path, monkeypatch):
    case = data.load(file, "bad-input")
    monkeypatch.setenv("ONESTACK_DATA_ROOT", str(edited_copy(case, tmp_path)))
    with pytest.raises(data.InputError) as err:
        validate.check_all()
    message = str(err.value)
    for line in case["error"]:
        assert line in message, f"missing from the error:\n  {line}\ngot:\n{message}"


def test_the_real_data_passes(monkeypatch, tmp_path):
    """The copy itself is good: each case fails only by its edit."""
    monkeypatch.setenv(
        "ONESTACK_DATA_ROOT", str(edited_copy({"file": "sites/default/site.yaml", "edits": []}, tmp_path))
    )
    validate.check_all()


def test_a_problem_folder_not_named_after_a_module_is_refused(monkeypatch, tmp_path):
    """HPL's problems in a folder named after its package, hpcc, their `app`
    with it: nothing would read them, and HPL's flavors would pass with no
    problem checked."""
    root = edited_copy({"file": "sites/default/site.yaml", "edits": []}, tmp_path)
    folder = root / "tests" / "problems" / "hpl"
    for file in folder.glob("*.yaml"):
        file.write_text(file.read_text().replace("app: hpl\n", "app: hpcc\n"))
    folder.rename(folder.with_name("hpcc"))
    monkeypatch.setenv("ONESTACK_DATA_ROOT", str(root))
    with pytest.raises(data.InputError, match=r"tests/problems/hpcc/: no application's module is 'hpcc'; name"):
        validate.check_all()


def test_a_data_file_named_yml_is_told_to_be_renamed(monkeypatch, tmp_path):
    """Every other command reads environments/*.yaml alone: a .yml file would
    be left out of the stack without a word."""
    root = edited_copy({"file": "sites/default/site.yaml", "edits": []}, tmp_path)
    (root / "environments" / "hpl.yaml").rename(root / "environments" / "hpl-2.yml")
    monkeypatch.setenv("ONESTACK_DATA_ROOT", str(root))
    with pytest.raises(data.InputError, match=r"environments/hpl-2\.yml: the stack reads \.yaml files only: rename"):
        validate.check_all()


@pytest.mark.parametrize(
    "nested, folder",
    [("environments/old/hpl.yaml", "environments/"), ("tests/problems/lmp/extra/melt.yaml", "tests/problems/lmp/")],
)
def test_a_data_file_in_a_subfolder_is_told_to_move_up(monkeypatch, tmp_path, nested, folder):
    """Every command reads environments/*.yaml and tests/problems/<app>/*.yaml
    alone: a file a folder deeper would be checked and never used."""
    root = edited_copy({"file": "sites/default/site.yaml", "edits": []}, tmp_path)
    (root / nested).parent.mkdir()
    shutil.copy(root / folder / Path(nested).name, root / nested)
    monkeypatch.setenv("ONESTACK_DATA_ROOT", str(root))
    with pytest.raises(data.InputError, match=rf"{nested}: in a subfolder, .*: move it up into {folder}"):
        validate.check_all()
