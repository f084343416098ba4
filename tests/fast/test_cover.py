"""The samples budgeted runs take of the flavor matrix (onestack/stack/cover.py):
every trait of the matrix is had by a chosen cell, and what a run has anyway
is not chosen again."""

import pytest

from onestack import stack, status
from onestack.stack import cover


def test_the_cover_has_every_trait_and_skips_what_is_seen():
    traits = {"a": {1, 2}, "b": {2, 3}, "c": {3}, "d": {4}}
    chosen = cover.cover(traits)
    assert set().union(*(traits[c] for c in chosen)) == {1, 2, 3, 4}
    assert set(chosen) == {"a", "b", "d"}
    assert set(cover.cover(traits, seen={1, 2, 3})) == {"d"}


@pytest.mark.parametrize("lists", ["build", "ci_build"])
def test_a_run_solves_every_trait_of_the_matrix(lists, monkeypatch):
    """The ci_build lists' run solves fewer cells, but each application's
    compilers, MPIs, math libraries, threading and kinds of build, and every
    cell it builds."""
    monkeypatch.setenv("ONESTACK_BUILD_LIST", lists)
    every = list(stack.load().flavors)
    solved = status.solved_here(every)
    assert set().union(*map(status.cell_traits, solved)) == set().union(*map(status.cell_traits, every))
    assert {f.module_name for f in stack.load().select(ci=lists == "ci_build")} <= {f.module_name for f in solved}
    print(f"{lists}: {len(solved)} of {len(every)} cells solved")
    assert (len(solved) < len(every)) == (lists == "ci_build")
