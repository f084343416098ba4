# Open MPI 6.0 before its release, built for the MPI-5 standard ABI
# (libmpi_abi.so.1, --enable-standard-abi, on by default from 6.0): the
# stack offers it as a runtime of the flavors built for that ABI
# (environments/components.yaml `openmpi6`), never as a flavor's build MPI.
#
# No Open MPI release has the ABI yet (Debian sid carries 6.0.0~rc2; the
# clones here hold no 6.0 tag), and Spack's builtin openmpi recipe stops at
# 5.0 with configure options 6.0 dropped: hence a recipe of its own, of the
# v6.0.x branch pinned by commit (its VERSION file: 6.0.0a1). Its PMIx and
# PRRTE are the git submodules that commit pins, built inside it (the
# internal ones), as Open MPI's own release tarballs bundle them; offline,
# `make mirror` archives the commit with its submodules from local clones
# (setup/offline-sources.yaml). The bindings generator, pympistandard, is a
# submodule at a commit no clone here has: its PyPI release instead
# (py-pympistandard).
#
# C only: no Fortran ABI across implementations exists (Open MPI's own
# Fortran library would serve Open MPI builds alone).
from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class OpenmpiAbi(AutotoolsPackage):
    """Open MPI 6.0 (pre-release 6.0.0a1) with its MPI-5 standard ABI
    library, internal PMIx and PRRTE, C only."""

    homepage = "https://www.open-mpi.org"
    git = "https://github.com/open-mpi/ompi.git"

    # The v6.0.x branch of 2026-08-18 ("Merge pull request #14324"), with the
    # submodules the build compiles in (and theirs), those the site mirror
    # archives (setup/offline-sources.yaml): not 3rd-party/pympistandard, whose
    # folder the ABI bindings' generator would read before py-pympistandard
    # below, so that a build from a clone and one from the mirror would differ.
    _SUBMODULES = ["3rd-party/openpmix", "3rd-party/prrte", "config/oac"]
    version(
        "6.0.0a1",
        commit="bb1c85d203cdb7162f0cd92f71f7298048cd9581",
        submodules=lambda package: package._SUBMODULES,
    )

    # A build with it (mpicc_abi) is a standard-ABI build, as with mpich-abi.
    provides("mpi@:5")

    depends_on("c", type="build")
    # configure checks that C and C++ link together (mpicxx is built too).
    depends_on("cxx", type="build")
    # autogen.pl makes configure; the internal PMIx's build runs flex.
    depends_on("autoconf@2.69:", type="build")
    depends_on("automake@1.13.4:", type="build")
    depends_on("libtool@2.4.2:", type="build")
    depends_on("m4", type="build")
    depends_on("perl", type="build")
    depends_on("flex", type="build")
    depends_on("python@3.6:", type="build")
    depends_on("py-pympistandard", type="build")
    depends_on("hwloc@2:")
    depends_on("libevent@2:")

    # The wrappers (mpicc, mpicc_abi, ...) name the compilers of the build,
    # Spack's compiler wrappers, which run only inside Spack: the real ones
    # instead, as the builtin openmpi recipe does.
    filter_compiler_wrappers("openmpi/*-wrapper-data*", relative_root="share")

    def autoreconf(self, spec, prefix):
        # Open MPI's own bundled hwloc and libevent are tarballs in the tree
        # that the build never opens here (it links Spack's, below).
        Executable("./autogen.pl")("--no-3rdparty=libevent,hwloc")

    def configure_args(self):
        return [
            f"--with-hwloc={self._found_at('hwloc')}",
            f"--with-libevent={self._found_at('libevent')}",
            "--with-pmix=internal",
            "--with-prrte=internal",
            "--enable-mpi-fortran=no",
            # The manual pages' sources need Sphinx; OpenSHMEM is not MPI.
            "--disable-sphinx",
            "--disable-oshmem",
        ]

    def _found_at(self, name):
        # The OS's own (externals in /usr) as "external", found on the
        # compiler's default paths: configure's search below a prefix looks
        # in lib/ and lib64/, not Debian's lib/x86_64-linux-gnu/.
        prefix = self.spec[name].prefix
        return "external" if prefix == "/usr" else prefix

    @property
    def libs(self):
        return find_libraries("libmpi_abi", self.prefix.lib, shared=True)

    def setup_dependent_package(self, module, dependent_spec):
        self.spec.mpicc = join_path(self.prefix.bin, "mpicc_abi")
