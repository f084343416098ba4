# AOCL-FFTW as the site builds it: one library for every CPU generation.
#
# The builtin recipe compiles FFTW's SIMD codelet sets (SSE2, AVX, AVX2,
# AVX-512) only where Spack's target has the instructions: for the site's
# baseline (x86_64_v2 at sites/default) that is SSE2 alone, and every
# newer CPU would run SSE2 FFTs. FFTW compiles each codelet set with its own
# flags and asks the CPU (CPUID and XGETBV) before its planner uses one, so
# building all of them is safe on the oldest generation. AMD's dynamic
# dispatcher (--enable-dynamic-dispatcher: GCC target_clones of its own
# kernels for Zen 1-3, AVX2, AVX, SSE2 and a default, chosen by the loader per
# CPU) is turned on for the same reason. AMD's configure applies both only on
# an AMD build host (it reads the build host's vendor in /proc/cpuinfo): told
# AMD whatever the host (patch below), so that every build host makes the
# same library for the same Spack hash (the dispatcher reads no more of the
# host: it picks per CPU at run time).
#
# Double precision only (spack.yaml): what QE and LAMMPS call.
from spack_repo.builtin.packages.amdfftw.package import Amdfftw as BuiltinAmdfftw

from spack.package import *

SIMD_SETS = ("sse2", "avx", "avx2", "avx512")


class Amdfftw(BuiltinAmdfftw):
    """AOCL-FFTW with every SIMD codelet set and AMD's dynamic dispatcher."""

    conflicts("precision=long_double", msg="the site builds AOCL-FFTW's SIMD precisions only (float, double)")
    conflicts("precision=quad", msg="the site builds AOCL-FFTW's SIMD precisions only (float, double)")
    conflicts("+mpi", msg="QE and LAMMPS distribute their FFTs themselves: the site builds AOCL-FFTW without MPI")
    requires("+amd-dynamic-dispatcher", when="%gcc", msg="the site's AOCL-FFTW runs on every CPU generation")

    def patch(self):
        super().patch()
        filter_file(r"^ISAMDCPU=.*$", "ISAMDCPU=AuthenticAMD", "configure")

    def configure(self, spec, prefix):
        options = [
            f"--prefix={prefix}",
            "--enable-amd-opt",
            "--enable-dynamic-dispatcher",
            "--disable-mpi",
            # The builtin's, the variants' own.
            *(["--enable-debug"] if spec.satisfies("+debug") else []),
            *self.enable_or_disable("shared"),
            *self.enable_or_disable("static"),
            *self.enable_or_disable("openmp"),
            *self.enable_or_disable("threads"),
            *self.enable_or_disable("amd-fast-planner"),
            *self.enable_or_disable("amd-top-n-planner"),
            *self.enable_or_disable("amd-trans"),
            *self.enable_or_disable("amd-app-opt"),
            *(["--disable-fortran"] if not (self.compiler.f77 and self.compiler.fc) else []),
            *(f"--enable-{simd}" for simd in SIMD_SETS),
            # Given, so that configure does not choose its own (AX_CC_MAXOPT),
            # which for GCC tune the code for the build host (-mtune=native,
            # after Spack's own target flags). FFTW's: the rest of that set;
            # the builtin's vector width below AVX-512.
            "CFLAGS=-O3 -fomit-frame-pointer -fstrict-aliasing -mprefer-vector-width=256",
        ]
        for precision in self.selected_precisions:
            with working_dir(precision, create=True):
                Executable("../configure")(*options, *(["--enable-float"] if precision == "float" else []))
