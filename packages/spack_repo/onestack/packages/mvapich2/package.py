# MVAPICH2 as the site builds it: 2.3.7-1 from its GA release commit, with
# every generated file (configure, Makefile.in, ...) made by autogen.sh with the
# build host's own autotools.
#
# The release tarball is on no host this stack reaches; the GA sources are, as
# a git import of the releases (one commit per release, nothing generated in
# it). An archive of that commit is not upstream's tarball (another sha256, and
# a builtin checksum is never edited to fit), so 2.3.7-1 is declared by commit:
# the commit pins the content. Offline, `make mirror` archives that commit from
# a local clone named by ONESTACK_MVAPICH2_GIT into the source mirror
# (setup/offline-sources.yaml, onestack/spack/mirror.py); Spack looks there first.
#
# Fabric: the builtin default, fabrics=mrail, is MVAPICH2's InfiniBand channel
# (rdma-core, an HCA at run time). A host without InfiniBand selects
# fabrics=nemesis (ch3:nemesis: shared memory within a node, TCP between
# nodes); a site with InfiniBand selects fabrics=mrail.
from spack_repo.builtin.packages.mvapich2.package import Mvapich2 as BuiltinMvapich2

from spack.package import *


class Mvapich2(BuiltinMvapich2):
    """MVAPICH2 2.3.7-1 from its GA release commit, configure made by autogen.sh."""

    git = "https://github.com/kumattau/mvapich2.git"

    # Replaces the builtin's 2.3.7-1 (its release tarball) in this recipe: the
    # same release, fetched as the commit "MVAPICH2 2.3.7-1 GA Release". The
    # builtin's patches for 2.3.7-1 (fix-torque.patch, to hydra's configure.ac,
    # and the MPIR_Attr_delete_list fix) apply to it unchanged, before autogen.
    version("2.3.7-1", commit="7b3539c49333409736664ecf03e4ea4a099dcaa0")

    # autogen.sh checks these minimum versions itself (autoconf 2.67, automake
    # 1.15, libtool 2.4.4) and runs perl scripts that generate sources.
    with when("@2.3.7-1"):
        depends_on("autoconf@2.67:", type="build")
        depends_on("automake@1.15:", type="build")
        depends_on("libtool@2.4.4:", type="build")
        depends_on("m4", type="build")
        depends_on("perl", type="build")

    # 2.3.7 rewrote the TCP address lookups (getaddrinfo, inet_ntop) with
    # slips that stop fabrics=nemesis (its TCP netmod) from compiling:
    # `mpierrno` for `mpi_errno` ("'mpierrno' undeclared", tcp_init.c:391) and
    # inet_ntop given a struct for a pointer and a char* array for a buffer
    # ("incompatible type for argument 2 of 'inet_ntop'", tcp_getip.c:155; the
    # sock channel's ch3u_getinterfaces.c has the same lines, fixed alike);
    # and `if (!mpi_errno);`
    # ends the lookup's retry loop after the first try whatever its result.
    # They came with the 2.3.7 GA release commit and are still in 2.3.7-1
    # (upstream's default fabric, mrail, never compiles these files).
    patch("tcp-address-lookup-2.3.7.patch", when="@2.3.7")

    def autoreconf(self, spec, prefix):
        # The commit has no configure. autogen.sh, not a bare autoreconf, is
        # MVAPICH2's way to make it: it also generates sources (error message
        # tables, Fortran bindings, logging states) and runs each bundled
        # project's (hydra, romio, openpa, hwloc) own autoreconf.
        Executable("./autogen.sh")()

    def configure_args(self):
        # Shared libraries only, as Open MPI builds by default: a program
        # linked with a static libmpi.a carries this MPI inside it and cannot
        # run on another MPI of its family (the swap the stack's modules
        # offer), and libtool compiles every file a second time, without
        # -fPIC, for the archive: half of MVAPICH2's compiles.
        return super().configure_args() + ["--disable-static"]


# The builtin recipe pins `depends_on("automake@1.15", type="build")` for every
# version ("needed for torque patch"): fix-torque.patch edits hydra's
# configure.ac, and a release tarball's Makefiles then regenerate hydra's
# configure with the automake that made the tarball, 1.15 exactly. Here
# autogen.sh regenerates every generated file from the patched sources with the
# host's autotools (Debian: automake 1.16), so the pin has no reason, and no
# registry here carries automake 1.15.
#
# Spack has no directive that takes back an inherited one. DirectiveMeta runs
# the base class's directives again on the subclass, into dictionaries of the
# subclass's own (Mvapich2.dependencies: {when-spec: {name: Dependency}}), so
# once the class statement is done the pin can be removed from this recipe
# alone; the builtin recipe keeps it. Only the exact pin is removed: should the
# builtin change it, it stays and the concretizer says so.
_pin = Mvapich2.dependencies.get(Spec(), {}).get("automake")
if _pin is not None and _pin.spec == Spec("automake@1.15"):
    del Mvapich2.dependencies[Spec()]["automake"]
