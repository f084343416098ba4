"""The stack as data: the flavors of environments/ for the selected site
(sites/), loaded and checked once per process."""

import functools
import os
from pathlib import Path

from onestack import data, paths
from onestack.stack import site
from onestack.stack.flavors import DISPATCHER, Matrix, load_matrix, preload_packages

__all__ = ["DISPATCHER", "Matrix", "ci_lists", "load", "preload_packages"]

# Which list of each application a run builds: `make test` sets
# ONESTACK_BUILD_LIST=ci_build for all its commands. Every command of one run
# must render the same lists: Spack drops from its lock the roots a render
# leaves out, and solves them again (minutes each) when they come back.
BUILD_LISTS = ("build", "ci_build")


@functools.lru_cache(maxsize=None)
def _load(data_root: Path, site_dir: Path) -> Matrix:
    return load_matrix(site.load())


def load() -> Matrix:
    """Every flavor and MPI runtime, for the selected site."""
    return _load(paths.data_root(), paths.site_dir())


def ci_lists() -> bool:
    """Whether this run works on each application's ci_build list."""
    chosen = os.environ.get("ONESTACK_BUILD_LIST", "build")
    if chosen not in BUILD_LISTS:
        raise data.InputError(f"ONESTACK_BUILD_LIST={chosen!r}: expected one of {', '.join(BUILD_LISTS)}")
    return chosen == "ci_build"
