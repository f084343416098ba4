"""Container images: the SIF of a published flavor carries what Apptainer
reads (definition, labels, squashfs system partition), its payload runs the
test problem with the MPI inside it, and with the host's Intel MPI through the
MPICH ABI (Apptainer's hybrid model). Apptainer is not obtainable here, so the
payload runs under bubblewrap the way Apptainer runs it (onestack/sif.py)."""

import json
import os
import re
import subprocess

import pytest

from conftest import onestack
from onestack import containers, data, problems, sif, stack
from onestack.modules import lmod, publish

FLAVOR = "qe/openblas-mpich"
PROBLEM = "pw_scf-ncpp"


@pytest.fixture(scope="session")
def flavor():
    return next(f for f in stack.load().flavors if f.module_name == FLAVOR)


@pytest.fixture(scope="session")
def image(flavor):
    """`make images` for the test flavor (rebuilt only when its inputs changed)."""
    onestack("images", FLAVOR, check=True)
    return containers.sif_path(flavor)


@pytest.fixture(scope="session")
def image_root(image, tmp_path_factory):
    return sif.extract(image, tmp_path_factory.mktemp("image") / "root")


def test_definition_is_spack_containerize_multistage(flavor, image):
    definition = (containers.context_dir(flavor) / "Singularity.def").read_text()
    roots = publish.installed_roots([flavor])[1]
    assert definition.count("Bootstrap: docker") == 2
    assert "Stage: build" in definition and "Stage: final" in definition
    assert "%files from build\n  /opt/spack-environment /opt\n  /opt/software /opt" in definition
    assert f"org.onestack.flavor {FLAVOR}" in definition
    assert f"quantum-espresso/{roots[flavor.spack_spec]['hash']}" in definition
    assert '%runscript\nexec pw.x "$@"' in definition
    assert "%test\nexec /opt/onestack/test/run" in definition
    # The runtime OS packages were read off the binaries: MPICH's library and launcher.
    assert "libmpich12" in definition and " mpich" in definition


def test_sif_has_what_apptainer_reads(flavor, image):
    types = [d["type"] for d in sif.descriptors(image)]
    assert types == ["Def.FILE", "JSON.Generic", "FS (Squashfs/*System/amd64)"], types
    assert sif.dump(image, "Def.FILE").decode() == (containers.context_dir(flavor) / "Singularity.def").read_text()
    labels = json.loads(sif.dump(image, "JSON.Generic"))
    assert labels["org.onestack.flavor"] == FLAVOR
    assert labels["org.onestack.cpu-paths"].startswith("x86_64_v2 baseline")


def test_where_images_names_the_folder(image):
    proc = onestack("where-images", check=True)
    assert proc.stdout.strip() == str(image.parent)


def test_image_self_test_passes(flavor, image_root, tmp_path):
    proc = subprocess.run(sif.exec_argv(image_root, "test"), text=True, capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Every quantity the image's test problem checks, each printed and within tolerance.
    for name in containers.test_problem(flavor)["checks"]:
        assert re.search(rf"^{name}: .* ok$", proc.stdout, re.M), proc.stdout


def test_image_runs_problem_with_its_own_mpi(init_script, image_root, tmp_path):
    problem = problems.load("qe")[PROBLEM]
    how = problems.How(wrapper=tuple(sif.exec_argv(image_root, "exec")), inside=True)
    checks = problems.run(problem, how, tmp_path, init_script)
    assert all(c.passed for c in checks), "\n".join(map(str, checks))


def test_host_intel_mpi_runs_the_images_mpich_build(init_script, image_root, tmp_path):
    """Desktop use with the host's MPI: Intel MPI launches one container per
    rank, its libraries bound in (apptainer --bind, --env LD_LIBRARY_PATH)."""
    problem = problems.load("qe")[PROBLEM]
    host = lmod.clean_shell(init_script, "module load mpi-runtime/impi\necho $I_MPI_ROOT; echo $LD_LIBRARY_PATH")
    assert host.returncode == 0, host.stderr
    mpi_root, library_path = host.stdout.split()[-2:]
    # The host MPI's folder, with where its library links point (a site binds e.g. /opt/intel).
    mpi_tree = os.path.commonpath([mpi_root, os.path.realpath(f"{mpi_root}/lib/libmpi.so.12")])
    binds = [mpi_tree, *(d for d in library_path.split(":") if d and not d.startswith(mpi_tree))]
    wrapper = sif.exec_argv(image_root, "exec", binds=binds, env={"LD_LIBRARY_PATH": library_path})
    how = problems.How(modules=("mpi-runtime/impi",), env=(("I_MPI_DEBUG", "4"),), wrapper=tuple(wrapper))
    checks = problems.run(problem, how, tmp_path, init_script)
    assert all(c.passed for c in checks), "\n".join(map(str, checks))
    assert "Intel(R) MPI Library, Version 2021.18.1" in (tmp_path / "output.txt").read_text()


def test_intel_mpi_flavor_is_refused_with_the_reason():
    flavor = next(f for f in stack.load().flavors if f.module_name == "hpl/mkl-impi")
    built, roots = publish.installed_roots([flavor])
    assert built, "hpl/mkl-impi is in hpl's ci_build list: it should be built"
    with pytest.raises(containers.ContainerError, match=r"libmpi\.so\.12 belongs to no OS package"):
        containers.write_context(flavor, roots[flavor.spack_spec])


def test_bad_image_settings_name_the_file_and_key(tmp_path):
    bad = tmp_path / "images.yaml"
    bad.write_text(containers.IMAGES_FILE.read_text().replace("suite: bookworm", "suite: 12\nbase: debian"))
    with pytest.raises(data.InputError) as err:
        data.load(bad, "images")
    message = str(err.value)
    assert "images.yaml: 2 problem(s)" in message
    assert "suite: 12 is not of type 'string'" in message
    assert "Additional properties are not allowed ('base' was unexpected)" in message
