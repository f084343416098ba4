# Wi4MPI as the site builds it: the builtin recipe plus the release the stack
# needs, which the pinned builtin recipe (it stops at 3.6.4) lacks.
from spack_repo.builtin.packages.wi4mpi.package import Wi4mpi as BuiltinWi4mpi

from spack.package import *


class Wi4mpi(BuiltinWi4mpi):
    """Wi4MPI, CEA's translation layer between MPI libraries: it runs a
    program built with one MPI on another's runtime (onestack offers it as
    mpi-runtime/openmpi-wi4mpi)."""

    # GitHub's archive of tag v3.7.1: the sha256 later builtin recipes declare,
    # and what `git archive` of the tag, gzipped without name or time stamp,
    # makes (setup/offline-sources.yaml).
    version(
        "3.7.1",
        sha256="1944d012853c7fccd7245d31fbaaff00da71be9e7381350abc4fd3e2e262f927",
        url="https://github.com/wi4mpi/wi4mpi/archive/refs/tags/v3.7.1.tar.gz",
    )
