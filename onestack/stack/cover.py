"""The fewest cells of a matrix that together have every trait: what a
budgeted run samples when running every cell costs more than it proves (the
CPU generations under qemu, the concretizer's solve of each cell)."""

from typing import Dict, Hashable, Iterable, List, Set


def cover(traits: Dict[str, Set[Hashable]], seen: Iterable[Hashable] = ()) -> Dict[str, List[Hashable]]:
    """The cells chosen, each with the traits it was chosen for: the rarest
    trait not yet seen first, by the cell that has it and most of the others
    not yet seen (the first by name on a tie). Traits in seen are had
    already (e.g. by cells the run has anyway)."""
    holders: Dict[Hashable, List[str]] = {}
    for cell in sorted(traits):
        for trait in traits[cell]:
            holders.setdefault(trait, []).append(cell)
    chosen, seen = {}, set(seen)
    for trait in sorted(holders, key=lambda t: (len(holders[t]), str(t))):
        if trait not in seen:
            cell = max(holders[trait], key=lambda c: len(traits[c] - seen))
            chosen[cell], seen = sorted(traits[cell] - seen, key=str), seen | traits[cell]
    return chosen
