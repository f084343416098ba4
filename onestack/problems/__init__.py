"""Test problems (tests/problems/): as data (problem.py), how they run
(runner.py) and how their output is checked (check.py)."""

from onestack.problems.problem import (
    PROBLEMS,
    Problem,
    ProblemError,
    across_nodes_problem,
    apps,
    emulation_problem,
    full_size,
    load,
    not_checked_why,
    of_flavor,
    sources,
)
from onestack.problems.runner import How, Outcome, execute, run

__all__ = [
    "PROBLEMS",
    "How",
    "Outcome",
    "Problem",
    "ProblemError",
    "across_nodes_problem",
    "apps",
    "emulation_problem",
    "execute",
    "full_size",
    "load",
    "not_checked_why",
    "of_flavor",
    "sources",
    "run",
]
