"""MPI ABI families: which library names one family member's executables ask
for, so a runtime of another member can answer to them.

MPICH >= 3.1, MVAPICH2 >= 2.0 and Intel MPI >= 5.0 share one ABI; MPICH as
Debian builds it names its libraries libmpich*.so.12, the others libmpi*.so.12.
"""

from pathlib import Path

# ABI family -> (name an executable may ask for, name the runtime ships)
SONAME_ALIASES = {
    "mpich": [
        ("libmpich.so.12", "libmpi.so.12"),
        ("libmpichfort.so.12", "libmpifort.so.12"),
        ("libmpichcxx.so.12", "libmpicxx.so.12"),
    ],
}


def link_aliases(abis, runtime_lib: Path, shim_lib: Path) -> None:
    """Make shim_lib/<asked-for name> point at the runtime's own library, for
    each ABI it serves (the MPI-5 standard ABI's one name needs no alias)."""
    shim_lib.mkdir(parents=True, exist_ok=True)
    for asked, shipped in (pair for abi in abis for pair in SONAME_ALIASES.get(abi, [])):
        if (runtime_lib / shipped).exists():
            (shim_lib / asked).symlink_to(runtime_lib / shipped)
