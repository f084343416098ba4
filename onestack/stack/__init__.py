"""The stack as data: the flavors of environments/ for the selected site
(sites/), loaded and checked once per process."""

import functools
from pathlib import Path

from onestack import paths
from onestack.stack import site
from onestack.stack.flavors import DISPATCHER, Matrix, load_matrix, preload_packages

__all__ = ["DISPATCHER", "Matrix", "load", "preload_packages"]


@functools.lru_cache(maxsize=None)
def _load(data_root: Path, site_dir: Path) -> Matrix:
    return load_matrix(site.load())


def load() -> Matrix:
    """Every flavor and MPI runtime, for the selected site."""
    return _load(paths.data_root(), paths.site_dir())
