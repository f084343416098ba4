"""A test problem's output checked against its reference: every quantity of
its `checks`, the job's rank count, and across nodes its host count.

This one file is the checker everywhere: the tests, the emulated CPUs and
the report import it, and each container image carries it as its own
%test checker (`python3 check.py <checks> <output> [<reference>]`). So it
uses only what Debian's python3-minimal has (re, math, ast, sys): images
have no PyYAML, no JSON module and no onestack.
"""

import ast
import math
import re
import sys

# A duration as programs print it past a minute (QE: "1m 2.16s", "1h 2m").
DURATION = re.compile(r"^(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:([\d.]+)s)?$")


class Check:
    """One quantity: its value against a reference (within a tolerance),
    or against an upper bound (at_most)."""

    def __init__(self, name, reference, value, tolerance, bound=False):
        self.name, self.reference, self.value, self.tolerance, self.bound = name, reference, value, tolerance, bound

    @property
    def passed(self):
        if math.isnan(self.value):
            return False
        if self.bound:
            return self.value <= self.reference
        return abs(self.value - self.reference) <= self.tolerance

    def __str__(self):
        verdict = "ok" if self.passed else "FAILED"
        if self.bound:
            return f"{self.name}: {self.value} (at most {self.reference}) {verdict}"
        return (
            f"{self.name}: {self.value} vs reference {self.reference} "
            f"(|diff| {abs(self.value - self.reference):.3g}, tolerance {self.tolerance}) {verdict}"
        )


class Absent:
    """A line printed only when something is off: counted, none passes. Where
    a comparison run after the program prints it, the comparison's own last
    line (`complete`) must be there too: a comparison that never ran (a job
    ended before it) lists nothing either."""

    def __init__(self, name, count, complete=True):
        self.name, self.count, self.complete = name, count, complete

    @property
    def passed(self):
        return self.complete and self.count == 0

    def __str__(self):
        verdict = "ok" if self.passed else "FAILED"
        if not self.complete:
            return f"{self.name}: the comparison that would print it did not run to its end {verdict}"
        return f"{self.name}: {self.count} (at most 0) {verdict}"


def never_reached(found) -> bool:
    """A check of what a comparison run after the program prints (GROMACS's
    `gmx check` of the energies and of the forces), which a job ended
    before that comparison never printed: not a line of it, its last neither."""
    if isinstance(found, Directions):
        return not found.complete and not found.cosines and not found.mismatches
    return isinstance(found, Absent) and not found.complete and found.count == 0


class Directions:
    """Vectors a comparison lists, the reference's beside the run's (GROMACS's
    `gmx check` lists the forces beyond its tolerances): each pair must point
    within an angle (a cosine of at least min_cosine), the comparison must
    have read both files whole (its `complete` line) and found them alike
    otherwise (no `mismatch` line: atoms, steps, a quantity one file lacks),
    or it fails: the rule of GROMACS's regression suite (gmxtest.pl) for
    forces."""

    def __init__(self, name, pairs, min_cosine, complete, mismatches=()):
        self.name, self.min_cosine, self.complete, self.mismatches = name, min_cosine, complete, list(mismatches)
        self.cosines = [cosine(a, b) for a, b in pairs]
        # A NaN (a number that did not read) is off too.
        self.off = sum(1 for c in self.cosines if not c >= min_cosine)

    @property
    def passed(self):
        return self.complete and not self.mismatches and self.off == 0

    def __str__(self):
        verdict = "ok" if self.passed else "FAILED"
        if not self.complete:
            return f"{self.name}: the comparison did not read both files whole {verdict}"
        if self.mismatches:
            return f"{self.name}: the files differ otherwise too: {self.mismatches[0]!r} {verdict}"
        worst = f", the least {min(self.cosines):.6g}" if self.cosines else ""
        return (
            f"{self.name}: {self.off} of {len(self.cosines)} listed pairs at a cosine below "
            f"{self.min_cosine}{worst} {verdict}"
        )


def cosine(a, b):
    """The cosine of the angle between two vectors; -1 (off) where one is of
    zero length and the other is not, 1 where both are (gmxtest.pl)."""
    la, lb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    if la * lb == 0:
        return 1.0 if la == lb else -1.0
    return sum(x * y for x, y in zip(a, b)) / (la * lb)


def _vector(text):
    """3 printed numbers; NaNs where the text is not that."""
    try:
        numbers = [float(x) for x in text.split()]
    except ValueError:
        numbers = []
    return numbers if len(numbers) == 3 else [float("nan")] * 3


def vector_pairs(pattern, text):
    """Each match's 2 groups as vectors of 3 numbers."""
    return [(_vector(a), _vector(b)) for a, b in re.findall(pattern, text, re.MULTILINE)]


class Unchecked:
    """A quantity not checked in this run, with why (printed, never silent)."""

    passed = True

    def __init__(self, name, why):
        self.name, self.why = name, why

    def __str__(self):
        return f"{self.name}: not checked: {self.why}"


def none_made(checks) -> bool:
    """A run that checked nothing: each of its checks said why not (the
    flavor's version or style cannot match the reference)."""
    return bool(checks) and all(isinstance(c, Unchecked) for c in checks)


def number(text):
    """A printed number, or a duration in seconds."""
    try:
        return float(text)
    except ValueError:
        match = DURATION.match(text.strip())
        if not match or not any(match.groups()):
            raise ValueError(f"not a number or a duration: {text!r}") from None
        hours, minutes, seconds = (float(g or 0) for g in match.groups())
        return 3600 * hours + 60 * minutes + seconds


def values(pattern, text):
    return [number(v) for v in re.findall(pattern, text, re.MULTILINE)]


def _values_or_nan(pattern, text):
    """values(), a capture that is no number (QE's ******** on overflow)
    read as NaN: that check fails, the others are still judged."""
    try:
        return values(pattern, text)
    except ValueError:
        return [float("nan")]


def _tolerance(how, reference):
    """The absolute tolerance, or the relative one times the reference where
    that is wider: a value within either passes (GROMACS's regression tests)."""
    return max(how["tolerance"], how.get("relative_tolerance", 0) * abs(reference))


def compare(checks, output, reference=""):
    """One Check per quantity, on the last value the output prints: against
    the last in the published reference (times `reference_scale`, for a
    system grown from the reference's), against a value the problem states
    (`expected`), or against the program's own acceptance bound (`at_most`);
    or the times a line that must not appear does (`absent`); or the
    directions of the vectors a comparison lists (`min_cosine`).
    A missing value fails; it is never skipped. A check one of whose
    `not_checked_when` lines the output prints is not judged by that run,
    and says why."""
    found = []
    for name, how in checks.items():
        printed = (u for u in how.get("not_checked_when", ()) if re.search(u["pattern"], output, re.MULTILINE))
        unless = next(printed, None)
        if unless:
            found.append(Unchecked(name, unless["why"]))
            continue
        if "min_cosine" in how:
            complete = bool(re.search(how["complete"], output, re.MULTILINE))
            mismatches = [m.group(0) for m in re.finditer(how.get("mismatch", "(?!)"), output, re.MULTILINE)]
            pairs = vector_pairs(how["pattern"], output)
            found.append(Directions(name, pairs, how["min_cosine"], complete, mismatches))
            continue
        if how.get("absent"):
            complete = "complete" not in how or bool(re.search(how["complete"], output, re.MULTILINE))
            found.append(Absent(name, len(re.findall(how["pattern"], output, re.MULTILINE)), complete))
            continue
        got = _values_or_nan(how["pattern"], output)
        value = got[-1] if got else float("nan")
        if "at_most" in how:
            found.append(Check(name, how["at_most"], value, 0.0, bound=True))
        elif "expected" in how:
            found.append(Check(name, how["expected"], value, _tolerance(how, how["expected"])))
        else:
            # The published file may print the quantity otherwise than the run.
            pattern = how.get("reference_pattern", how["pattern"])
            expected = values(pattern, reference)
            if not expected:
                raise ValueError(f"reference has no {name} (pattern {pattern!r}): fix the problem file")
            scaled = expected[-1] * how.get("reference_scale", 1)
            found.append(Check(name, scaled, value, _tolerance(how, scaled)))
    return found


def ranks_error(pattern, ranks, output):
    """Why the output is not one job of `ranks` ranks ("" if it is): a
    launcher of another MPI starts `ranks` one-rank jobs instead, which can
    still print the right answer, each computing all of it."""
    counts = values(pattern, output)
    if counts and counts == [ranks] * len(counts):
        return ""
    return (
        f"expected one job of {ranks} ranks, the program reported {counts or 'no rank count'} "
        "(is mpirun this MPI's own launcher?)"
    )


# Runs across nodes start each rank through this, so that it names its host
# before the program starts (onestack/problems/runner.py), and HOST_LINE finds it.
# Not anchored at a line's start: srun forwards a line longer than its buffer
# (LD_DEBUG's search paths) in pieces, and another rank's line can land between them.
REPORT_HOST = ("sh", "-c", 'echo "onestack-rank-host: $(hostname)"; exec "$@"', "sh")
HOST_LINE = re.compile(r"onestack-rank-host: (\S+)$", re.MULTILINE)


def hosts(output):
    """The distinct hosts the ranks reported."""
    return sorted(set(HOST_LINE.findall(output)))


def main(argv):
    """In an image: check.py <checks file> <output> [<reference>]; the checks
    file holds {"ranks": .., "ranks_pattern": .., "checks": {...}} as a Python
    literal (written by onestack from the problem file)."""
    with open(argv[1]) as handle:
        spec = ast.literal_eval(handle.read())
    with open(argv[2], errors="replace") as handle:
        output = handle.read()
    reference = ""
    if len(argv) > 3:
        with open(argv[3], errors="replace") as handle:
            reference = handle.read()
    failed = ranks_error(spec["ranks_pattern"], spec["ranks"], output)
    print(f"ranks: {failed or 'one job of %d ranks ok' % spec['ranks']}")
    for check in compare(spec["checks"], output, reference):
        print(check)
        failed = failed or not check.passed
    for name, why in spec.get("unchecked", {}).items():
        print(Unchecked(name, why))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
