"""The stack's MPIs as the virtual cluster's programs are built and started
with them: Debian's MPICH and Open MPI (the externals its flavors use),
MVAPICH2 and Open MPI 6 where Spack has built them, Intel MPI (the pinned
wheels), MPICH 5 (its wheel, which also implements the MPI-5 standard ABI),
and the translation layers (translated). Intel MPI, MPICH 5 and Open MPI 6
get the settings their flavors get on the site's fabric
(environments/components.yaml); Debian's two and MVAPICH2 the Slurm plugin
and what a run needs, written below. Each has the verbose settings under
which it names the transport it took."""

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional, Tuple

from onestack import paths, spack, stack
from onestack.spack import vendor


@dataclass(frozen=True)
class Mpi:
    """An MPI as a program is built with it and started on it."""

    name: str
    mpicc: str  # its compiler wrappers (a name on PATH or a path)
    mpicxx: str
    srun_mpi: str  # srun's PMI plugin for it: pmi2 (MPICH family), pmix (Open MPI)
    env: Tuple[Tuple[str, str], ...]  # what its runs need
    verbose_env: Tuple[Tuple[str, str], ...]  # makes it print the transport it picked per peer
    transport_pattern: str  # a regex whose group 1 is that transport, on lines about a peer
    # What it names within a node: its shared-memory transports, or none
    # where it names only the network's (Intel MPI, MVAPICH2, MPICH 5: then the
    # latency shows it, tests/cluster/test_imb.py).
    shared_memory: Tuple[str, ...] = ()
    # What the table says of an MPI that names less than both transports.
    transport_note: str = ""
    # What its verbose output says that names the library itself, where it
    # does (the proof of which MPI served a run of a build for another).
    library_pattern: str = ""


# Open MPI refuses to start as root without the two *_ALLOW_* settings; the
# cluster's jobs run as whoever submits them, root in the tests.
OPENMPI_AS_ROOT = (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"))

DEBIAN_MPIS = (
    # Debian's MPICH 4.0.2 is ch4:ucx (mpichversion); UCX logs each endpoint's
    # transports at info level ("ep_cfg[1]: tag(tcp/eth0) ...").
    Mpi(
        "mpich",
        "mpicc.mpich",
        "mpicxx.mpich",
        "pmi2",
        (),
        (("UCX_LOG_LEVEL", "info"),),
        r"ep_cfg\[\d+\]: tag\(((?:(?!self/)[^)])*)\)",
        ("sysv/memory", "posix/memory", "cma/memory"),
    ),
    # Open MPI 4.1.4 (ob1): the BTL module chosen for each peer.
    Mpi(
        "openmpi",
        "mpicc.openmpi",
        "mpicxx.openmpi",
        "pmix",
        OPENMPI_AS_ROOT,
        (("OMPI_MCA_btl_base_verbose", "100"),),
        r"Using (\w+) btl for send to .* on node",
        ("vader",),
    ),
)

# Debian's MPICH 4.0.2 (ch4:ucx) sometimes hangs in MPI_Finalize between
# nodes over TCP: one rank still flushes its UCX endpoint to a peer that sits
# in finalize's PMI barrier and no longer answers. Upstream removed that
# barrier (pmodels/mpich#6596, MPICH 4.2). Seen here in 2-10% of 2-node runs;
# the time limit ends such a run, and the figures it printed before still count.
FINALIZE_HANG = (
    "hung in MPI_Finalize after its output, ended by the time limit (MPICH 4.0.2 ch4:ucx over TCP: pmodels/mpich#6596)"
)


def _settings(component: str) -> Tuple[Tuple[str, str], ...]:
    """An MPI's settings on the site's fabric, as its flavors get them, less
    the srun plugin (an argument of srun here)."""
    return tuple((s.name, s.value) for s in stack.load().mpi_env(component) if s.name != "SLURM_MPI_TYPE")


def _srun_plugin(component: str) -> str:
    return next(s.value for s in stack.load().mpi_env(component) if s.name == "SLURM_MPI_TYPE")


def _vendor_env(package: str) -> Tuple[Tuple[str, str], ...]:
    """A vendor MPI's own variables and its libraries first on the loader's path."""
    layout = vendor.environment(package)
    return (*layout["set"], ("LD_LIBRARY_PATH", dict(layout["prepend"])["LD_LIBRARY_PATH"]))


def _vendor_bin(package: str) -> str:
    return dict(vendor.environment(package)["prepend"])["PATH"]


def intel_mpi() -> Mpi:
    """The stack's Intel MPI with its flavors' settings (I_MPI_FABRICS=shm:ofi,
    the fabric's OFI provider). I_MPI_DEBUG=5 names the OFI provider, also
    within a node, where shm:ofi uses shared memory, and the library (its
    libmpi_abi.so.1 says "library kind: release_mpi5")."""
    return Mpi(
        "impi",
        f"{_vendor_bin('intel-oneapi-mpi')}/mpicc",
        f"{_vendor_bin('intel-oneapi-mpi')}/mpicxx",
        _srun_plugin("impi"),
        (*_vendor_env("intel-oneapi-mpi"), *_settings("impi")),
        (("I_MPI_DEBUG", "5"),),
        r"libfabric provider: (\S+)",
        transport_note="names only its OFI provider; within a node, I_MPI_FABRICS=shm:ofi takes shared memory",
        library_pattern=r"Intel\(R\) MPI Library, Version \S+|library kind: \S+",
    )


def mpich5() -> Mpi:
    """MPICH 5 from its wheel (components.yaml `mpiabi`) with its own ABI
    (libmpi.so.12, the wrappers mpicc and mpicxx), with the settings of the
    standard-ABI flavors it serves. Its debug summary names the library and
    its OFI provider between nodes; shared memory within a node it names not."""
    return Mpi(
        "mpich5",
        f"{_vendor_bin('mpich-abi')}/mpicc",
        f"{_vendor_bin('mpich-abi')}/mpicxx",
        _srun_plugin("mpiabi"),
        (*_vendor_env("mpich-abi"), *_settings("mpiabi")),
        (("MPIR_CVAR_DEBUG_SUMMARY", "1"),),
        r"libfabric provider: (\S+)",
        transport_note="names its OFI provider (libfabric's sockets over TCP); within a node it takes "
        "shared memory and names none",
        library_pattern=r"MPICH \d+\.\d+\.\d+",
    )


def standard_abi() -> Mpi:
    """MPICH 5's MPI-5 standard ABI wrappers (mpicc_abi, mpicxx_abi): a build
    whose only MPI library is libmpi_abi.so.1, started on MPICH 5 by default."""
    native = mpich5()
    return replace(native, name="mpi5", mpicc=f"{native.mpicc}_abi", mpicxx=f"{native.mpicxx}_abi")


def _installed_prefix(spec: str) -> Optional[str]:
    """Where Spack installed a spec, or None (also where no Spack is set up)."""
    if not (paths.spack_root() / "bin" / "spack").is_file():
        return None
    return spack.query("installed_prefix", json.dumps([spec]))[spec]


def mvapich2() -> Optional[Mpi]:
    """MVAPICH2 as the stack builds it (mpis.mvapich2 on the site's fabric),
    where Spack has installed it (with its flavors), started as they are
    (srun's pmi2). Its nemesis channel prints no transport: it takes shared
    memory within a node and its build's only netmod, TCP, between nodes."""
    prefix = _installed_prefix(stack.load().mpi_spec("mvapich2"))
    if prefix is None:
        return None
    return Mpi(
        "mvapich2",
        f"{prefix}/bin/mpicc",
        f"{prefix}/bin/mpicxx",
        "pmi2",
        (),
        (),
        r"(?!)",
        transport_note="ch3:nemesis prints no transport: shared memory within a node, its TCP netmod "
        "between (the build's only one); the latency ratio shows the first",
    )


def openmpi6() -> Optional[Mpi]:
    """Open MPI 6 (components.yaml `openmpi6`) with its own ABI and its
    runtime's settings, where Spack has installed it (`make stack`); its BTL
    names the transport per peer as Open MPI 4's does (sm: its vader). It
    prints nothing of its own version: the loader's trace names the library
    file that served a standard-ABI run."""
    prefix = _installed_prefix(stack.load().mpi_spec("openmpi6"))
    if prefix is None:
        return None
    debian = next(m for m in DEBIAN_MPIS if m.name == "openmpi")
    return replace(
        debian,
        name="openmpi6",
        mpicc=f"{prefix}/bin/mpicc",
        mpicxx=f"{prefix}/bin/mpicxx",
        env=(*OPENMPI_AS_ROOT, ("LD_LIBRARY_PATH", f"{prefix}/lib"), *_settings("openmpi6")),
        verbose_env=(*debian.verbose_env, ("LD_DEBUG", "libs")),
        shared_memory=("sm",),
        library_pattern=rf"{re.escape(prefix)}/lib/libmpi_abi\.so\.1",
    )


def translated(name: str) -> Optional[Mpi]:
    """A translation layer (components.yaml `translators`) as a runtime: its
    target MPI started with the layer's settings, its libraries loaded first
    in every process of the launcher's environment (mpi-runtime/<name> loads
    them in the ranks alone: the same libraries in the processes measured),
    where Spack has installed it; None otherwise."""
    runtime = next(r for r in stack.load().runtimes if r.name == name)
    installed = _installed_prefix(runtime.spec)
    if installed is None:
        return None
    prefix = Path(installed)
    target = next(m for m in DEBIAN_MPIS if m.name == runtime.to)
    from_layer = [(s.name, s.value) for s in runtime.env if s.name != "SLURM_MPI_TYPE"]
    loading = (
        ("LD_PRELOAD", " ".join(runtime.preload_paths(prefix))),
        ("LD_LIBRARY_PATH", ":".join(runtime.library_dirs(prefix))),
    )
    return replace(target, name=name, env=(*target.env, *from_layer, *loading))


def stack_mpis() -> Tuple[Mpi, ...]:
    """The stack's MPIs that are on this machine (MVAPICH2 once built)."""
    built = mvapich2()
    return (*DEBIAN_MPIS, intel_mpi(), *((built,) if built else ()))


def transports(mpi: Mpi, output: str) -> List[str]:
    """What the MPI's verbose output says it used between the ranks (a rank's
    path to itself left out)."""
    return sorted(set(re.findall(mpi.transport_pattern, output)) - {"self"})


def library(mpi: Mpi, output: str) -> str:
    """What the verbose output says of the MPI library itself, or "" (it
    says nothing)."""
    found = re.findall(mpi.library_pattern, output) if mpi.library_pattern else []
    return "; ".join(dict.fromkeys(found))
