# GROMACS as the site builds it: the builtin recipe plus the one GROMACS
# release this stack can verify offline.
from spack_repo.builtin.packages.gromacs.package import Gromacs as BuiltinGromacs

from spack.package import *

# Spack looks a package's builder up in the package's own module (the builtin
# recipe's cmake_args, GMX_SIMD and MPI among them, live in it); imported
# after spack.package, whose generic CMakeBuilder would otherwise win.
from spack_repo.builtin.packages.gromacs.package import CMakeBuilder  # noqa: E402,F401  isort:skip


class Gromacs(BuiltinGromacs):
    """GROMACS 2022.5, from the release archive Debian's source package
    carries, and 2025.4, from its release tag's commit.

    Per-generation code: GROMACS compiles its kernels for one SIMD level
    (GMX_SIMD), which the builtin recipe picks from the spec's target; the
    stack builds it once per x86-64 level of the site's CPU generations (SSE4.1
    for x86-64-v2, AVX2_256 for -v3, AVX_512 for -v4) behind one entry point
    (onestack-dispatch), like every level flavor."""

    # Debian bookworm's gromacs_2022.5.orig.tar.gz is byte-identical to the
    # upstream release archive (the sha256 the builtin recipe declared for
    # 2022.5 until it dropped the 2022 series). Newer releases: trixie's
    # 2025.2 archive, equal to the builtin 2025.2 checksum, is gone from the
    # Debian archive this machine reads (404 on 2026-11-26).
    version("2022.5", sha256="083cc3c424bb93ffe86c12f952e3e5b4e6c9f6520de5338761f24b75e018c223")
    # The newest release, 2025.4 (the builtin recipe stops at 2025.3), as the
    # commit of its tag v2025.4: no release archive of it is on a host this
    # stack reaches, its git history is (the commit pins the content;
    # offline, `make mirror` archives it from a local clone,
    # setup/offline-sources.yaml). Built from git, it names itself
    # "2025.4-dev" (GROMACS's mark of a build not from a release archive).
    # It needs CMake 3.28: the wheel set-up lays out beside Debian's 3.25
    # (setup/vendor.yaml).
    version("2025.4", commit="560f2601a742e40e9eb183d1b20e4970b0a0bcfd")

    # For GROMACS up to 2022 with MKL's FFT, the builtin cmake_args reads
    # spec["mkl"] (MKL's include folder), which Spack resolves only through a
    # dependency on the `mkl` virtual: without one the MKL flavors failed
    # ("No spec with name mkl"). The same MKL provides it.
    depends_on("mkl", when="@:2022 ^[virtuals=lapack] intel-oneapi-mkl")
