"""MPI ABI families: which library names one family member's executables ask
for, so a runtime of another member can answer to them.

MPICH >= 3.1, MVAPICH2 >= 2.0 and Intel MPI >= 5.0 share one ABI; MPICH as
Debian builds it names its libraries libmpich*.so.12, the others libmpi*.so.12.
"""

from pathlib import Path
from typing import Iterable, List, Tuple

# ABI family -> (name an executable may ask for, name the runtime ships)
SONAME_ALIASES = {
    "mpich": [
        ("libmpich.so.12", "libmpi.so.12"),
        ("libmpichfort.so.12", "libmpifort.so.12"),
        ("libmpichcxx.so.12", "libmpicxx.so.12"),
    ],
}


# ABI family -> the C library its executables link: how a runtime's mpirun
# tells, from a program's libraries, a build of an ABI it does not serve.
C_LIBRARIES = {
    "mpich": ("libmpi.so.12", "libmpich.so.12"),
    "openmpi": ("libmpi.so.40",),
    "mpi5": ("libmpi_abi.so.1",),
}


def foreign_libraries(serves: Iterable[str]) -> List[Tuple[str, str]]:
    """(library, ABI) of every ABI family a runtime serving `serves` does not."""
    return [(library, abi) for abi, libraries in C_LIBRARIES.items() if abi not in serves for library in libraries]


def link_aliases(abis, runtime_lib: Path, shim_lib: Path) -> None:
    """Make shim_lib/<asked-for name> point at the runtime's own library, for
    each ABI it serves (the MPI-5 standard ABI's one name needs no alias)."""
    shim_lib.mkdir(parents=True, exist_ok=True)
    for asked, shipped in (pair for abi in abis for pair in SONAME_ALIASES.get(abi, [])):
        if (runtime_lib / shipped).exists():
            (shim_lib / asked).symlink_to(runtime_lib / shipped)
