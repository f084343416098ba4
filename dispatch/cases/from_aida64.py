"""A CPU report of dispatch/cases/ made from an AIDA64 CPUID dump, the
format of InstLatx64's collection (`<Vendor>/<Vendor><signature>_<name>_CPUID*.txt`
in the InstLatx64/InstLatx64 repository on GitHub): bare-metal reports of
server CPUs this project has no host of (Zen 3, Zen 5, Sapphire Rapids...).

    python3 dispatch/cases/from_aida64.py <dump> "<what the CPU is>" "<source>" > <case>.cpuid

Written by hand: `onestack-dispatch --cpuid` records only the CPU it runs
on, and no tool converts these dumps. The dispatcher's leaves are taken
from the first logical CPU (every core of a package reports the same
features). A dump holds no XCR0, the register an OS sets to enable each
state component: the record's is every user state the CPU supports
(CPUID leaf 0xd subleaf 0, EDX:EAX), as an OS enables the x87, SSE, AVX,
opmask and ZMM states wherever the CPU has them (Linux, Windows)."""

import re
import sys

# The leaves onestack-dispatch reads (its read_cpu): vendor and highest leaf,
# family/model and features, extended features, highest extended leaf,
# extended features, and the brand string.
LEAVES = (0x0, 0x1, 0x7, 0x80000000, 0x80000001, 0x80000002, 0x80000003, 0x80000004)
XSAVE_LEAF = 0xD
OSXSAVE = 1 << 27
REG = "([0-9A-F]{8})"
LINE = re.compile(rf"^CPUID {REG}: {REG}-{REG}-{REG}-{REG}(?:\s+\[SL ([0-9A-F]{{2}})\])?")


def first_cpu(text: str) -> dict:
    """{(leaf, subleaf): (eax, ebx, ecx, edx)} of the dump's first logical CPU."""
    leaves = {}
    for line in text.splitlines():
        match = LINE.match(line.strip())
        if match:
            leaf, *regs, subleaf = match.groups()
            # the first CPU's: the others' come later
            leaves.setdefault((int(leaf, 16), int(subleaf or "0", 16)), tuple(int(r, 16) for r in regs))
    return leaves


def record(leaves: dict) -> list:
    """The record lines onestack-dispatch --cpuid would print on that CPU."""
    names = ("eax", "ebx", "ecx", "edx")
    lines = [
        f"0x{leaf:08x} 0x00: " + " ".join(f"{n}=0x{v:08x}" for n, v in zip(names, leaves[leaf, 0]))
        for leaf in LEAVES
        if (leaf, 0) in leaves
    ]
    if leaves[1, 0][2] & OSXSAVE:
        eax, _, _, edx = leaves[XSAVE_LEAF, 0]
        lines.append(f"xcr0=0x{edx << 32 | eax:016x}")
    return lines


def main(argv: list) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    dump, what, source = argv[1:]
    with open(dump, encoding="latin-1") as handle:
        leaves = first_cpu(handle.read())
    missing = [f"0x{leaf:08x}" for leaf in (0x0, 0x1, XSAVE_LEAF) if (leaf, 0) not in leaves]
    if missing:
        print(f"{dump}: no CPUID leaf {', '.join(missing)}: not an AIDA64 CPUID dump", file=sys.stderr)
        return 1
    print(f"# {what}\n# From {source}: its first logical CPU, converted by dispatch/cases/from_aida64.py")
    print("\n".join(record(leaves)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
