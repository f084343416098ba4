"""Binaries for site staff through the registry that serves the images: the
builds of hpl/openblas-mpich (its level builds included) pushed as a Spack
OCI buildcache (what `make push-binaries` does), installed into an empty
second prefix with `spack install --cache-only` from the registry alone,
relocated there, and run on the HPL problem. Spack 1.1 cannot sign OCI
buildcaches, and unpacks an altered tarball without a word: every blob is
read back against its sha256 digest before anything installs (an altered
one is refused). HPL: the mechanism is the same for every flavor, and its
closure is the smallest (a QE flavor's took two minutes more).

The figure printed: installing from the registry against building from
source, side by side. The source build is not repeated here: its time is
what Spack recorded when it built these very installs
(<prefix>/.spack/install_times.json)."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import assert_checks

from onestack import paths, problems, spack, stack
from onestack.images.push import buildcache_url
from onestack.spack import SpackError, oci_buildcache, query

from .image_helpers import TIMINGS, timed

FLAVOR = "hpl/openblas-mpich"


def build_seconds(prefixes: list) -> dict:
    """What building from source took here, per package: Spack records each
    install's phases in <prefix>/.spack/install_times.json ("cache": false
    for a source build)."""
    times = {}
    for prefix in prefixes:
        record = Path(prefix) / ".spack" / "install_times.json"
        if record.is_file():
            found = json.loads(record.read_text())
            if not found.get("cache"):
                times[found["name"]] = found["total"]
    return times


@pytest.fixture(scope="module")
def pushed(reg, published_flavors, workdir):
    if FLAVOR not in published_flavors:
        pytest.fail(f"{FLAVOR} is not published")
    flavor = stack.load().flavor(FLAVOR)
    _, roots = spack.installed([flavor])
    env = {
        **os.environ,
        **reg.trust_env(),
        oci_buildcache.USER_VARIABLE: reg.username,
        oci_buildcache.PASSWORD_VARIABLE: reg.password,
    }
    url = buildcache_url(f"{reg.host}/onestack")
    hashes = spack.build_hashes(flavor, roots)
    timed(
        f"spack buildcache push {FLAVOR} (oci://, loopback)",
        oci_buildcache.push,
        hashes,
        oci_buildcache.write_scope(workdir / "push-scope", url),
        env,
    )
    return {"root": roots[flavor.spack_spec], "url": url, "env": env}


def _in_second(prefix: str, second: Path) -> Path:
    """Where an install of the site's tree lies in the second prefix (an
    external, such as Debian's MPICH, stays where it is)."""
    software = paths.prefix() / "software"
    return second / Path(prefix).relative_to(software) if Path(prefix).is_relative_to(software) else Path(prefix)


def test_second_prefix_installs_from_the_registry_and_runs_it(pushed, reg, workdir, tmp_path):
    """As another machine of the site installs: `bin/onestack install-binaries`
    with the hash push-binaries printed."""
    second = workdir / "second-prefix"
    proc = timed(
        f"bin/onestack install-binaries {FLAVOR} (empty prefix)",
        subprocess.run,
        [str(paths.REPO / "bin" / "onestack"), "install-binaries", f"/{pushed['root']['hash']}", str(second)],
        env={**pushed["env"], "ONESTACK_REGISTRY": f"{reg.host}/onestack"},
        capture_output=True,
        text=True,
    )
    seconds = TIMINGS[-1][1]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    flavor = stack.load().flavor(FLAVOR)
    app_bin = _in_second(pushed["root"]["prefix"], second) / "bin"
    mpi_bin = _in_second(pushed["root"]["mpi"]["prefix"], second) / "bin"
    program = app_bin / flavor.app.program
    linked = subprocess.run(["ldd", str(program)], text=True, capture_output=True, check=True).stdout
    assert "not found" not in linked, linked
    assert str(paths.prefix() / "software") not in linked, f"{program.name} still links the first prefix:\n{linked}"
    problem = problems.load(flavor.app.module)[problems.across_nodes_problem(flavor.app.module).case]
    checks = problems.run(problem, problems.How(path=(str(mpi_bin), str(app_bin))), tmp_path)
    assert_checks(f"{FLAVOR} from the second prefix", checks)
    _print_benchmark(seconds, pushed["root"]["hash"], flavor.app.package)


def _print_benchmark(seconds: float, root_hash: str, package: str) -> None:
    """A figure, not a goal: the application's own build alone is a lower
    bound of a source build's wall time."""
    closure = query("runtime_closure", root_hash)["installed"]
    built = build_seconds([n["prefix"] for n in closure])
    TIMINGS.append(
        (
            f"build from source, recorded: {package} {built[package]:.0f} s, its closure "
            f"{sum(built.values()):.0f} s ({len(built)} packages)",
            0.0,
        )
    )
    print(
        f"\n{FLAVOR}: install from the registry {seconds:.0f} s; build from source: {package} alone "
        f"{built[package]:.0f} s, {len(built)} packages {sum(built.values()):.0f} s; "
        f"{built[package] / seconds:.1f}x"
    )


def test_an_altered_blob_fails_the_install(pushed, reg, workdir):
    """The registry's storage changed under it (a byte of the buildcache's
    largest blob): Spack refuses what does not match its sha256."""
    storage = reg.folder / "storage" / "docker" / "registry" / "v2"
    layers = (storage / "repositories" / "onestack" / "buildcache" / "_layers" / "sha256").iterdir()
    blobs = [storage / "blobs" / "sha256" / d.name[:2] / d.name / "data" for d in layers]
    largest = max(blobs, key=lambda b: b.stat().st_size)
    original = largest.read_bytes()
    try:
        with open(largest, "r+b") as f:
            f.seek(len(original) // 2)
            f.write(bytes([original[len(original) // 2] ^ 0xFF]))
        scope = oci_buildcache.write_scope(
            workdir / "tampered-scope", pushed["url"], install_root=workdir / "third-prefix"
        )
        with pytest.raises(SpackError) as refused:
            oci_buildcache.install(pushed["root"]["hash"], scope, pushed["env"])
        assert "the registry's copy is altered; nothing was installed" in str(refused.value), refused.value
        assert not (workdir / "third-prefix").exists()
    finally:
        largest.write_bytes(original)
