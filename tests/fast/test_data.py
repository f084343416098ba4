"""Every data file of the repository against its schema, in seconds: the
schemas themselves, the catalog that maps files to them, the pipeline file
against GitLab's, and the whole stack loaded for every site of sites/."""

import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from onestack import ci, data, paths, problems, stack, validate
from onestack.spack import scope
from onestack.stack import flavors


def test_every_schema_is_valid_and_titled():
    files = sorted(data.SCHEMAS.glob("*.schema.yaml"))
    assert files
    for file in files:
        schema = data.schema(file.name.removesuffix(".schema.yaml"))
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$id"] == file.name and schema.get("title"), file.name


def test_every_yaml_file_has_a_schema():
    documents = data.every_document(paths.REPO)
    assert len(documents) > 20
    for file in documents:
        data.schema_of(file.relative_to(paths.REPO).as_posix())  # KeyError names the file


def test_every_document_is_valid_and_the_stack_loads():
    checked = validate.check_all()
    print(checked)
    assert checked["flavors"] > 30 and checked["problems"] >= 8 and checked["goals"] >= 5


def test_the_site_set_up_checks_every_data_file_first(monkeypatch):
    """`make stack` starts with `onestack site`: a bad test problem stops it
    there, before any Spack solve (stack.load alone reads no problem)."""
    from onestack import cli

    def refused():
        raise data.InputError("tests/problems/qe/x.yaml: refused")

    monkeypatch.setattr(validate, "check_all", refused)
    monkeypatch.setattr(stack, "load", lambda: pytest.fail("the stack was loaded before every file was checked"))
    with pytest.raises(data.InputError, match="refused"):
        cli.cmd_site(None)


def test_the_pipeline_file_is_valid_and_a_broken_one_is_not(tmp_path):
    """.gitlab-ci.yml against GitLab's own schema (ci.validate, offline)."""
    ci.validate(ci.PIPELINE_FILE)
    broken = yaml.safe_load(ci.PIPELINE_FILE.read_text())
    broken["build"]["trigger"]["strategy"] = "wait-for-it"
    (tmp_path / "broken.yml").write_text(yaml.safe_dump(broken))
    with pytest.raises(ci.CiError, match="strategy"):
        ci.validate(tmp_path / "broken.yml")


def test_the_test_jobs_check_the_pipelines_builds_with_the_concretize_jobs_artifacts(tmp_path, monkeypatch):
    """Before the publish stage, the live tree is not the pipeline's: each
    test job publishes the build stage's builds into a tree of its own, from
    the environment and lock the concretize job handed over."""
    monkeypatch.setattr(ci, "out_dir", lambda: tmp_path)
    monkeypatch.setenv("CI_PIPELINE_ID", "4242")
    monkeypatch.setenv("CI_JOB_NAME", "concretize")
    out = ci._test_pipeline([stack.load().flavor("hpl/openblas-mpich")])
    ci.validate(out)
    job = yaml.safe_load(out.read_text())["test hpl/openblas-mpich"]
    assert job["needs"] == [{"pipeline": "4242", "job": "concretize"}], job
    assert job["script"] == ["make -s check-built FLAVORS=hpl/openblas-mpich"], job


def test_a_shared_buildcache_is_read_beside_the_hosts_own(tmp_path, monkeypatch):
    """Where build jobs push to a site's shared buildcache, every job's
    set-up reads it too: the publish job installs what they built."""
    monkeypatch.setattr(scope.spack, "site_scope", lambda: tmp_path / "scope")
    monkeypatch.setattr(scope, "buildcache_signed", lambda: False)
    monkeypatch.setenv("ONESTACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ONESTACK_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("ONESTACK_BUILDCACHE_URL", "s3://site-cache/onestack")
    scope.write_mirror_config()
    mirrors = yaml.safe_load((tmp_path / "scope" / "mirrors.yaml").read_text())["mirrors"]
    shared = [m for m in mirrors.values() if m["url"] == "s3://site-cache/onestack"]
    assert shared == [{"url": "s3://site-cache/onestack", "signed": False, "source": False}], mirrors
    assert ci.buildcache_url() == "s3://site-cache/onestack"
    monkeypatch.delenv("ONESTACK_BUILDCACHE_URL")
    scope.write_mirror_config()
    assert len(yaml.safe_load((tmp_path / "scope" / "mirrors.yaml").read_text())["mirrors"]) == 2


def test_defaults_come_from_the_schema():
    """A key a file leaves out reads as its schema's default (one place)."""
    matrix = stack.load()
    lammps = next(f for f in matrix.flavors if f.app.module == "lmp")
    assert lammps.app.math_uses == ("fftw-api",)
    hpl = next(f for f in matrix.flavors if f.module_name == "hpl/openblas-mpich")
    assert hpl.fat_flags == "" and hpl.mpi_launcher == ""
    assert matrix.site.permissions == {"read": "world"}


@pytest.mark.parametrize("site", sorted(p.name for p in (paths.REPO / "sites").iterdir()))
def test_every_site_loads(site, monkeypatch):
    monkeypatch.setenv("ONESTACK_SITE", site)
    matrix = stack.load()
    assert matrix.site.name == site and matrix.flavors


@pytest.mark.parametrize("app", problems.apps())
def test_every_application_names_its_emulated_and_its_cross_node_case(app):
    assert problems.emulation_problem(app)["emulation_params"] is not None
    assert problems.across_nodes_problem(app)["across_nodes"]


@pytest.mark.parametrize("name", ["ONESTACK_PREFIX", "ONESTACK_MODULES"])
def test_a_prefix_from_the_environment_is_checked_as_the_site_files_is(name, monkeypatch):
    """Both land in every module users load, in Lua strings Spack writes unescaped."""
    monkeypatch.setenv(name, '/srv/a")os.execute("id")--')
    with pytest.raises(data.InputError, match=f"{name}=.*choose such a path"):
        stack.site.prefix()


def test_a_site_folder_whose_name_would_break_the_generated_files_is_refused(tmp_path, monkeypatch):
    """The site's name heads the generated spack.yaml and names its state folders."""
    folder = tmp_path / "x\nconfig: {concretizer: x}\n#"
    folder.mkdir()
    monkeypatch.setenv("ONESTACK_SITE", str(folder))
    with pytest.raises(data.InputError, match="a site folder is named with .*rename it"):
        stack.load()


def test_a_data_file_whose_name_a_script_would_read_is_refused(tmp_path):
    """A test case's name goes into its run script, an application file's into its image's definition."""
    file = tmp_path / "melt\ntouch x #.yaml"
    file.write_text("app: lmp\n")
    with pytest.raises(data.InputError, match="rename it"):
        data.load(file, "problem")


def test_an_empty_data_file_says_so(tmp_path):
    file = tmp_path / "site.yaml"
    file.write_text("# nothing yet\n")
    with pytest.raises(data.InputError, match="site.yaml: empty; it needs the keys of site.schema.yaml"):
        data.load(file, "site")


def test_a_pattern_ending_in_dollar_refuses_a_final_newline():
    """Python's $ also matches before a final newline (ECMA's, which JSON
    Schema means, does not): "/opt/x\\n" would reach a module's Lua."""
    site = {"description": "a site", "fabric": "tcp", "cpu_generations": ["nehalem"]}
    assert not list(data._validator("site").iter_errors({**site, "prefix": "/opt/x"}))
    assert list(data._validator("site").iter_errors({**site, "prefix": "/opt/x\n"}))


def test_an_unknown_flavor_lists_its_applications_flavors_only():
    matrix = stack.load()
    with pytest.raises(data.InputError) as err:
        matrix.select(["qe/mkl-nosuchmpi"])
    assert "unknown flavor(s) qe/mkl-nosuchmpi; the flavors of qe: " in str(err.value)
    assert "qe/openblas-mpich," in str(err.value) and "hpl/" not in str(err.value)
    with pytest.raises(data.InputError, match="the applications are gromacs, hpl, lmp, qe"):
        matrix.select(["nosuchapp/openblas-mpich"])


def test_a_named_flavor_the_site_cannot_have_is_refused_with_its_reason():
    """`make stack FLAVORS=qe/mkl-impi-intel` where the site lacks Intel's
    compilers: refused with the site's reason before Spack is asked."""
    proc = subprocess.run(
        [str(paths.REPO / "bin" / "onestack"), "render", "qe/mkl-impi-intel"], capture_output=True, text=True
    )
    reason = stack.load().flavor("qe/mkl-impi-intel").unavailable[0]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the site cannot build qe/mkl-impi-intel" in proc.stderr and reason in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "variants, without",
    [
        ("+kspace ~openmp", True),
        ("openmp=false", True),
        ("fft=fftw3 openmp==False", True),
        ("+openmp", False),
        ("~openmp-package +openmp", False),
        ("openmp=true", False),
        ('+openmp cflags="-O2 -openmp"', False),
    ],
)
def test_every_spelling_of_a_build_without_openmp_is_known(variants, without):
    """A hybrid flavor built without OpenMP is refused (tests/bad-input/):
    in each way a variant word (_check_variants) spells it, and only those."""
    where = Path("environments/lammps.yaml")
    if without:
        with pytest.raises(flavors.InputError, match="build it without OpenMP"):
            flavors._check_threads_built(where, "flavors.x", "openmp", variants)
    else:
        flavors._check_threads_built(where, "flavors.x", "openmp", variants)
