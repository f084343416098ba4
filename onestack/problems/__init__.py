"""Test problems (tests/problems/): as data (problem.py), how they run
(runner.py) and how their output is checked (check.py)."""

from onestack.problems.problem import Problem, ProblemError, apps, emulation_problem, full_size, load  # noqa: F401
from onestack.problems.runner import How, Outcome, execute, run  # noqa: F401
