# HPC Challenge as the site builds it: the builtin recipe, with its HPL ported
# to the MPI-2 names of two MPI-1 functions, so that it compiles with today's MPIs.
from spack_repo.builtin.packages.hpcc.package import Hpcc as BuiltinHpcc

from spack.package import *


class Hpcc(BuiltinHpcc):
    """HPC Challenge 1.5.0, whose first benchmark is HPL 2.0 (Linpack). HPL
    2.0 in this archive is the only HPL source this stack can verify offline
    (Debian's hpcc source package is byte-identical to the builtin checksum).
    Installs HPL alone too, as xhpl."""

    # xhpl: HPL without HPCC's other kernels, which HPCC sizes from HPL's
    # memory and which take most of a run at the sizes where HPL nears the
    # CPU's peak (the benchmark report's HPL case runs it). The patch adds
    # its main() (hpl/testing/xhpl.c, the file's header says more); it is
    # linked, after HPCC's build, against the library HPCC's build made.
    patch("xhpl.patch")

    # The Netlib reference BLAS ran 1.6x-5x slower in the site's measurements
    # (the seed facts, outside this repository): refused, except in the
    # benchmark baseline that measures what it costs (environments/hpl.yaml
    # `reference`).
    # Sticky: only an explicit request turns it on; the concretizer may not
    # flip it to let a production spec through the conflict below.
    variant(
        "netlib_reference",
        default=False,
        sticky=True,
        description="the benchmark baseline only: allow the Netlib reference BLAS",
    )
    conflicts(
        "^[virtuals=blas] netlib-lapack",
        when="~netlib_reference",
        msg="the Netlib reference BLAS is refused for production HPL: 1.6x-5x slower; pick a "
        "vendor library (MKL, OpenBLAS, AOCL), or build the benchmark baseline (+netlib_reference)",
    )

    def patch(self):
        super().patch()
        # MPI-3 removed MPI_Address and MPI_Type_struct: MPICH 4 and Open MPI 4
        # no longer declare them. Their MPI-2 successors take the same
        # arguments; HPL 2.3 made this same change upstream.
        filter_file(r"\bMPI_Address\b", "MPI_Get_address", "hpl/src/comm/HPL_packL.c")
        filter_file(r"\bMPI_Type_struct\b", "MPI_Type_create_struct", "hpl/src/comm/HPL_packL.c")

    def install(self, spec, prefix):
        super().install(spec, prefix)
        # The same compiler, defines and libraries HPCC's arch file gave its build (edit()).
        config = self.config
        cc = Executable(spec["mpi"].mpicc)
        cc(
            *config["@F2CDEFS@"].split(),
            "-Ihpl/include",
            *config["@LAINC@"].split(),
            *config["@CCFLAGS@"].split(),
            "-o",
            join_path(prefix.bin, "xhpl"),
            join_path("hpl", "testing", "xhpl.c"),
            join_path("hpl", "lib", self.arch, "libhpl.a"),
            *config["@LALIB@"].split(),
            *config["@MPLIB@"].split(),
            "-lm",
        )
