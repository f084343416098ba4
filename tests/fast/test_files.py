"""Files and folders appear whole or not at all (onestack/files.py): a step
that fails half-way leaves the previous one, and no partial, behind."""

import pytest

from onestack import files


def test_a_file_is_replaced_whole(tmp_path):
    target = tmp_path / "a" / "file.txt"
    files.write_text(target, "first\n", mode=0o600)
    files.write_text(target, "second\n")
    assert target.read_text() == "second\n" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


def test_a_failure_leaves_the_previous_file_and_no_partial(tmp_path):
    target = files.write_text(tmp_path / "file.txt", "kept\n")
    with pytest.raises(RuntimeError), files.replacing(target) as partial:
        partial.write_text("half")
        raise RuntimeError("killed half-way")
    assert target.read_text() == "kept\n" and [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_a_folder_is_replaced_whole(tmp_path):
    target = tmp_path / "context"
    for content in ("old", "new"):
        with files.replacing(target) as partial:
            partial.mkdir()
            (partial / "flavor.def").write_text(content)
    assert (target / "flavor.def").read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["context"]


def test_a_partial_of_a_process_that_is_gone_is_dropped(tmp_path):
    target = tmp_path / "image.sif"
    stale = tmp_path / ".image.sif.partial-999999999"
    stale.write_text("from a killed build")
    files.write_text(target, "image")
    assert not stale.exists()
