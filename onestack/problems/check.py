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


class Unchecked:
    """A quantity not checked in this run, with why (printed, never silent)."""

    passed = True

    def __init__(self, name, why):
        self.name, self.why = name, why

    def __str__(self):
        return f"{self.name}: not checked: {self.why}"


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


def _tolerance(how, reference):
    """The absolute tolerance, or the relative one times the reference where
    that is wider: a value within either passes (GROMACS's regression tests)."""
    return max(how["tolerance"], how.get("relative_tolerance", 0) * abs(reference))


def compare(checks, output, reference=""):
    """One Check per quantity, on the last value the output prints: against
    the last in the published reference (times `reference_scale`, for a
    system grown from the reference's), against a value the problem states
    (`expected`), or against the program's own acceptance bound (`at_most`);
    or the times a line that must not appear does (`absent`).
    A missing value fails; it is never skipped."""
    found = []
    for name, how in checks.items():
        if how.get("absent"):
            # A line the program prints only when something is off: counted.
            found.append(Check(name, 0, len(re.findall(how["pattern"], output, re.MULTILINE)), 0.0, bound=True))
            continue
        got = values(how["pattern"], output)
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
