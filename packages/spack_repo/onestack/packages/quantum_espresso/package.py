# Quantum ESPRESSO as the site builds it: the builtin recipe plus the library
# rules from the site's measurements (the seed facts, outside this repository).
from spack_repo.builtin.packages.quantum_espresso.package import (
    QuantumEspresso as BuiltinQuantumEspresso,
)

from spack.package import *

# Spack looks a package's builders up in the package's own module; imported
# after spack.package, whose generic GenericBuilder would otherwise win.
from spack_repo.builtin.packages.quantum_espresso.package import (  # noqa: E402  isort:skip
    CMakeBuilder as BuiltinCMakeBuilder,
    GenericBuilder as BuiltinGenericBuilder,
)

# CMake's names of the flavors' BLAS/LAPACK vendors (FindBLAS's BLA_VENDOR).
_BLA_VENDOR = {"openblas": "OpenBLAS", "amdblis": "FLAME"}


class QuantumEspresso(BuiltinQuantumEspresso):
    """Quantum ESPRESSO as the site builds it: the builtin recipe plus the
    Debian release archive of 6.7 and the site's library rules.

    Fat binary with GCC: QE's own Fortran is built for the site's oldest
    generation; its time goes to BLAS/LAPACK/ScaLAPACK and FFTs, whose
    libraries pick their code path per CPU at run time (environments/
    components.yaml, gcc). The flavor report measures the fat build against
    a -march=native twin; tests/test_fat_binaries.py runs it on each
    generation under qemu and shows the path the library chose."""

    # Debian's espresso_6.7.orig.tar.gz is QE 6.7's release pack (its folder
    # qe-6.7/, with generated documentation and archive/), not the repository
    # archive the builtin 6.7 checksums (of the same commit): other bytes, so a
    # version of its own, which `make mirror` takes from Debian's source
    # package. The url names that commit's repository archive, whose bytes
    # differ again: online without the mirror, the fetch fails its checksum.
    # The builtin 6.7 checksum is left as it is.
    version(
        "6.7.0",
        sha256="8f06ea31ae52ad54e900a2f51afd5c70f78096d9dcf39c86c2b17dccb1ec9c87",
        url="https://gitlab.com/QEF/q-e/-/archive/qe-6.7.0/q-e-qe-6.7.0.tar.gz",
    )

    # QE 7.5 as the commit of its release tag with the submodules its CMake
    # build compiles in (devXlib, libmbd, Wannier90): the release archive the
    # builtin 7.5 checksums lacks them, and QE's CMake then clones them at
    # configure time. setup/offline-sources.yaml says where each comes from
    # offline (devXlib's own host is one no machine here reaches).
    _SUBMODULES = ["external/devxlib", "external/mbd", "external/wannier90"]
    version("7.5.0", commit="770a0b2d12928a67048e2f3da8d10d057e52179e", submodules=lambda package: package._SUBMODULES)

    # What would fetch sources outside Spack at build time, unpinned or from
    # hosts no build here reaches: EPW's Wannier90 (6.7's EPW makefile
    # downloads it, no checksum), and the submodules 7.5's CMake clones when
    # the archive lacks them (FoX, for +fox and the GIPAW plugin; QMCPACK's
    # converter).
    conflicts("+epw", when="@6.7.0", msg="EPW 6.7 downloads Wannier90 at build time, unverified: build ~epw")
    for _variant in ("fox", "qmcpack"):
        conflicts(
            f"+{_variant}",
            when="@7.5.0",
            msg=f"QE 7.5's CMake clones what +{_variant} needs at configure time, outside Spack's verified "
            f"sources: build ~{_variant}",
        )
    conflicts(
        "+gipaw",
        when="@7.5.0",
        msg="QE 7.5's GIPAW needs FoX, which its CMake clones at configure time: build ~gipaw",
    )

    def patch(self):
        """QE's CMake takes a submodule folder as checked out when it holds a
        .git (cmake/qeHelpers.cmake), else clones it: an archived source
        (Spack's mirror) has the files but no .git."""
        if self.spec.satisfies("@7.5.0"):
            for folder in self._SUBMODULES:
                touch(join_path(folder, ".git"))

    # Netlib's reference BLAS/LAPACK ran 1.6x-5x slower on the site benchmark
    # (AUSURF112, 64 ranks) and half of those builds failed outright (DLASCL
    # "parameter number 4 had an illegal value", hangs in collectives).
    for _virtual in ("blas", "lapack"):
        conflicts(
            f"^[virtuals={_virtual}] netlib-lapack",
            msg=f"the Netlib reference {_virtual.upper()} is refused for production QE: "
            "1.6x-5x slower and unstable in the site's measurements; pick a vendor "
            "library (MKL, OpenBLAS, AOCL)",
        )

    # MKL's ScaLAPACK needs the BLACS built for the MPI in use: the intelmpi
    # BLACS for the MPICH ABI family (Intel MPI, MPICH, MVAPICH2), the openmpi
    # BLACS for Open MPI. A mismatch links, then fails or hangs at run time.
    for _mpi, _family in (
        ("mpich", "mpich"),
        ("mvapich2", "mpich"),
        ("intel-oneapi-mpi", "mpich"),
        ("openmpi", "openmpi"),
    ):
        requires(
            f"^[virtuals=scalapack] intel-oneapi-mkl mpi_family={_family}",
            when=f"^[virtuals=mpi] {_mpi} ^[virtuals=scalapack] intel-oneapi-mkl",
            msg=f"MKL ScaLAPACK with {_mpi} needs the BLACS of the {_family} family "
            f"(intel-oneapi-mkl mpi_family={_family}): libmkl_blacs_"
            f"{'intelmpi' if _family == 'mpich' else 'openmpi'}_lp64",
        )

    # The OS's ScaLAPACK is built once per MPI (packages/.../netlib_scalapack): an
    # Open MPI flavor needs the Open MPI build, an MPICH flavor the MPICH one.
    # Intel MPI and MVAPICH2 get neither: the MPICH build links MPICH's own
    # libmpich.so.12, which loaded a second MPI beside the flavor's
    # libmpi.so.12; Spack builds ScaLAPACK on their MPI instead.
    requires(
        "^[virtuals=scalapack] netlib-scalapack mpi_family=openmpi",
        when="^[virtuals=mpi] openmpi ^[virtuals=scalapack] netlib-scalapack",
        msg="ScaLAPACK with Open MPI must be the OS's Open MPI build (netlib-scalapack mpi_family=openmpi)",
    )
    conflicts(
        "^[virtuals=scalapack] netlib-scalapack mpi_family=openmpi",
        when="^[virtuals=mpi] mpich",
        msg="mpich needs the OS's MPICH build of ScaLAPACK (netlib-scalapack mpi_family=mpich)",
    )
    for _mpi in ("mvapich2", "intel-oneapi-mpi"):
        for _family in ("mpich", "openmpi"):
            conflicts(
                f"^[virtuals=scalapack] netlib-scalapack mpi_family={_family}",
                when=f"^[virtuals=mpi] {_mpi}",
                msg=f"the OS's ScaLAPACK links {_family}'s own library, a second MPI beside {_mpi}: "
                "ScaLAPACK is built by Spack on it (netlib-scalapack mpi_family=none)",
            )

    # GNU Fortran must link MKL's GNU interface layer (libmkl_gf_lp64): with the
    # Intel layer, complex-valued BLAS functions return their results wrongly.
    conflicts(
        "^[virtuals=blas] intel-oneapi-mkl ~gfortran",
        when="%fortran=gcc",
        msg="GCC builds need MKL's GNU Fortran interface layer (intel-oneapi-mkl +gfortran)",
    )


class GenericBuilder(BuiltinGenericBuilder):
    """The builtin configure-and-make build, with Intel MPI's library folder
    first on the link line. (A builder's build environment is its own: the
    package's setup_build_environment is not called for it.)"""

    def setup_build_environment(self, env):
        super().setup_build_environment(env)
        # Intel MPI's mpif90 appends its own -L<impi>/lib -lmpi last, after
        # MKL's -L/lib/x86_64-linux-gnu, where Debian's libmpi.so is Open
        # MPI's: the link then took Open MPI's libmpi and pw.x needed two MPIs.
        # QE's configure puts LDFLAGS first on its link line, so Intel MPI's wins.
        if self.spec.satisfies("^[virtuals=mpi] intel-oneapi-mpi"):
            env.set("LDFLAGS", " ".join(f"-L{d}" for d in self.spec["mpi"].libs.directories))


class CMakeBuilder(BuiltinCMakeBuilder):
    """The builtin CMake build (QE 7), with the flavor's own math libraries
    named. Left to itself, QE's CMake looks for MKL first on any x86-64
    (BLA_VENDOR Intel10_64lp), and Debian's MKL sits in the system library
    folder: an OpenBLAS flavor linked MKL's BLAS, ScaLAPACK and FFT."""

    def cmake_args(self):
        spec = self.spec
        blas = spec["blas"].name
        if blas == "intel-oneapi-mkl":
            vendor = "Intel10_64lp" if spec.satisfies("+openmp") else "Intel10_64lp_seq"
        else:
            vendor = _BLA_VENDOR[blas]
        args = [
            *super().cmake_args(),
            self.define("BLA_VENDOR", vendor),
            # QE builds its unit tests and test-suite unless told otherwise
            # (its own option: it ignores CMake's BUILD_TESTING, which Spack
            # sets): built only when Spack is asked to run tests.
            self.define("QE_ENABLE_TEST", self.pkg.run_tests),
        ]
        if spec.satisfies("+scalapack") and spec["scalapack"].name != "intel-oneapi-mkl":
            # QE's FindSCALAPACK looks a library named `scalapack` up: the
            # flavor's is named for its MPI (Debian's libscalapack-mpich).
            args.append(self.define("SCALAPACK_scalapack_LIBRARY", spec["scalapack"].libs[0]))
        fft = spec["fftw-api"]
        if fft.name == "intel-oneapi-mkl":
            args.append(self.define("QE_FFTW_VENDOR", "Intel_DFTI"))
        else:
            args += [self.define("QE_FFTW_VENDOR", "FFTW3"), self.define("FFTW3_ROOT", fft.prefix)]
        return args
