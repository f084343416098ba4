"""The verdict of a community check (onestack/community) from ReFrame's
summary line: ReFrame says PASSED, and exits 0, where no test case ran or
every one was skipped; that is no pass."""

import pytest

from onestack import community

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
