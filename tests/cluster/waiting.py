"""Waiting, within a bound, for a state of a virtual cluster."""

import time


def wait_until(condition, bound: float, what, poll: float = 0.5) -> float:
    """Seconds until condition() holds, asked every `poll` seconds; fails the
    test past `bound`, saying `what` (or what() returns: the state at that
    moment)."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < bound, f"{what() if callable(what) else what}: not within {bound} s"
        time.sleep(poll)
    return time.monotonic() - start
