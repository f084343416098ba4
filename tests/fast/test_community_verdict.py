"""The verdict of a community check (onestack/community) from ReFrame's
summary line: ReFrame says PASSED, and exits 0, where no test case ran or
every one was skipped; that is no pass. And what a check sees: its flavor's
shim module alone."""

import re
import sys
from pathlib import Path

import pytest

from onestack import community
from onestack.modules import publish

LINE = (
    "[  PASSED  ] Ran {ran}/{total} test case(s) from 1 check(s) "
    "(0 failure(s), 0 expected failure(s), {skipped} skipped, 0 aborted)"
)


@pytest.mark.parametrize(
    "ran, total, skipped, passed",
    [(1, 1, 0, True), (0, 0, 0, False), (0, 1, 1, False), (1, 2, 1, False)],
)
def test_a_pass_needs_a_case_run_and_none_skipped(ran, total, skipped, passed):
    output = f"[ RUN      ] ...\n{LINE.format(ran=ran, total=total, skipped=skipped)}\n[==========] Finished\n"
    assert community._ran_and_passed(output) is passed, output


def test_no_summary_line_is_no_pass():
    assert not community._ran_and_passed("ERROR: run session stopped: errors found in the configuration\n")


def test_a_check_finds_its_own_flavors_shim_alone(tmp_path, monkeypatch):
    """A check runs every module of its upstream name it finds (EESSI's
    find_modules): each run's folder of shims holds its flavor's alone, so a
    run after another of the same check never runs the other's flavor."""
    monkeypatch.setattr(publish, "current_release", lambda: tmp_path)
    check_id, check = next(iter(community.checks().items()))
    app = check["app"]
    folders = []
    for flavor in ("a-one", "b-two"):
        script = community._script(tmp_path, check_id, check, f"{app}/{flavor}", Path(sys.executable).parent)
        folder = Path(re.search(r"^module use '?([^'\n]+)'?$", script.read_text(), re.MULTILINE).group(1))
        folders.append(folder)
        shims = sorted(p.name for p in folder.rglob("*.lua"))
        assert shims == [f"{flavor}.lua"], (flavor, shims)
    assert folders[0] != folders[1] and (folders[0] / check["upstream_module"] / "a-one.lua").is_file()
