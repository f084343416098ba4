"""What the stack's data becomes, without Spack or Lmod: Spack specs and
config, Lua modules and shell scripts. Every free-text value goes through
the escaping of the language it lands in: a quote, a newline, `]]` and
`$(...)` render as text (executed by Lua and bash here, with stubs), or the
schema refuses them (tests/bad-input/)."""

import contextlib
import dataclasses
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import lupa
import pytest
import yaml

from onestack import apt_sources, cli, commands, data, files, host, paths, render, spack, stack
from onestack.images import ImageError, base
from onestack.images import flavor as images
from onestack.images.apptainer import Apptainer, ApptainerError
from onestack.modules import abi, dispatch, publish
from onestack.problems import How, Problem, runner
from onestack.spack import environment, scope, vendor
from onestack.stack import site
from onestack.stack.flavors import Preload, Setting
from tests.fast.test_bad_input import edited_copy

HOSTILE = [
    "say \"hi\" and 'bye'",
    "two\nlines",
    "ends in ]]",
    "]==] and ]] and ]=]",
    "$(touch {marker})",
    "back\\slash `tick` ${HOME} ;& |",
    "tab\tand\rreturn",
    "ünïcödé ✓",
]


# What Spack is asked for where those compilers exist: Intel's -ax dispatch
# over every generation of cpus.yaml (never -fast), and for NVHPC, whose -tp
# takes one target, the baseline generation's.
FAT_FLAGS = {"intel": "-O3 -ip -axCORE-AVX512,CORE-AVX2,AVX,SSE4.2", "nvhpc": "-O3 -tp=px"}


@pytest.mark.parametrize("module", [f.module_name for f in stack.load().flavors if f.compiler in FAT_FLAGS])
def test_intel_and_nvhpc_flavors_ask_their_compiler_for_every_path(module):
    flavor = stack.load().flavor(module)
    for flags in ("cflags", "cxxflags", "fflags"):
        assert f'{flags}="{FAT_FLAGS[flavor.compiler]}"' in flavor.spack_spec, f"{module}: {flavor.spack_spec}"
    assert "-fast" not in flavor.spack_spec, f"{module}: {flavor.spack_spec}"


def test_flavor_specs_name_every_choice():
    assert stack.load().flavor("qe/mkl-mvapich2").spack_spec == (
        "quantum-espresso@6.7.0 ~openmp ~epw +scalapack hdf5=none target=x86_64_v2 %gcc@12.2.0 "
        "^[virtuals=mpi] mvapich2@2.3.7-1 process_managers=hydra fabrics=nemesis "
        "^[virtuals=blas,lapack,scalapack,fftw-api] intel-oneapi-mkl"
    )


def test_a_second_site_changes_no_shared_file(monkeypatch):
    """example-infiniband: another fabric, prefix, reader group and what it
    lacks, all from its own folder; the shared data is read as it is."""
    default = stack.load()
    monkeypatch.setenv("ONESTACK_SITE", "example-infiniband")
    other = stack.load()
    assert "fabrics=mrail" in other.flavor("qe/mkl-mvapich2").spack_spec
    assert "fabrics=nemesis" in default.flavor("qe/mkl-mvapich2").spack_spec
    # Its nodes from Haswell on: built for AVX2's level, one level build above it.
    assert " target=x86_64_v3 " in other.flavor("hpl/openblas-mpich").spack_spec
    assert [level for level, _ in other.flavor("hpl/openblas-mpich").levels] == ["x86-64-v4"]
    assert " target=x86_64_v2 " in default.flavor("hpl/openblas-mpich").spack_spec
    env = {s.name: s.value for s in other.flavor("hpl/openblas-impi").env}
    assert env["I_MPI_OFI_PROVIDER"] == "mlx" and env["I_MPI_FABRICS"] == "shm:ofi"
    assert not other.flavor("qe/mkl-impi-intel").unavailable, "this site has the Intel compilers"
    assert other.flavor("hpl/openblas-mpich-nvhpc").unavailable == ("no NVHPC licence at this center",)
    assert other.site.prefix == Path("/apps/onestack") and default.site.prefix == Path("/opt/onestack")
    assert other.flavor("qe/openblas-mpich").is_default is False  # the stack's default, not site default's
    assert other.flavor("qe/mkl-mvapich2").is_default and default.flavor("qe/openblas-mvapich2").is_default


@pytest.mark.parametrize(
    "generations, baseline, levels, at_most",
    [
        (["nehalem", "sandybridge", "haswell"], "x86_64_v2", ["x86-64-v3"], "x86-64-v3"),
        (["haswell"], "x86_64_v3", [], "x86-64-v3"),
        (["skylake_avx512"], "x86_64_v4", [], "x86-64-v4"),
    ],
)
def test_a_site_of_other_cpu_generations_gets_their_builds(
    generations, baseline, levels, at_most, tmp_path, monkeypatch
):
    """The shared data serves a site of any generations: its baseline is
    the level of its oldest, its level builds those above; GROMACS's advice
    for CPUs with one AVX-512 FMA unit (at most x86-64-v3) is raised to the
    site's baseline where that is higher (the dispatcher refuses a level no
    build has)."""
    own = yaml.safe_load((paths.REPO / "sites" / "default" / "site.yaml").read_text())
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({**own, "cpu_generations": generations}))
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path))
    gromacs = stack.load().flavor("gromacs/openblas-mpich")
    assert f" target={baseline} " in gromacs.spack_spec, gromacs.spack_spec
    assert [level for level, _ in gromacs.levels] == levels
    assert {r["level"] for r in dispatch.rules(gromacs)} == {at_most}


def test_a_sites_own_mpi_settings_go_over_the_stacks(tmp_path, monkeypatch):
    """A site whose Slurm serves MPICH and Intel MPI over its PMIx plugin
    says so in its site file: the flavors' and runtimes' modules set it, with
    the site's reason; the images, for desktops, keep the stack's."""
    own = yaml.safe_load((paths.REPO / "sites" / "default" / "site.yaml").read_text())
    pmix = {"SLURM_MPI_TYPE": {"value": "pmix", "why": "this site's Slurm has no pmi2 plugin"}}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump({**own, "mpi_settings": {"mpich": pmix, "impi": pmix}}))
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path))
    for module in ("hpl/openblas-mpich", "hpl/openblas-impi"):
        flavor = stack.load().flavor(module)
        assert ("SLURM_MPI_TYPE", "pmix", "this site's Slurm has no pmi2 plugin") in [
            (s.name, s.value, s.why) for s in flavor.env
        ], module
        assert ("SLURM_MPI_TYPE", "pmi2") in [(s.name, s.value) for s in flavor.desktop_env], module
    runtime = next(r for r in stack.load().runtimes if r.name == "impi")
    assert ("SLURM_MPI_TYPE", "pmix") in [(s.name, s.value) for s in runtime.env]
    assert ("SLURM_MPI_TYPE", "pmix") in [(s.name, s.value) for s in stack.load().mpi_env("mpich")]


def test_a_site_that_has_intels_compilers_gets_them_declared(tmp_path, monkeypatch):
    """`spack external find` looks on the OS's PATH only: the compilers a
    site has in a vendor's prefix are declared in its Spack scope, from its
    site file's `compilers` (else the vendor's default prefix), and set-up
    stops, naming the key, where their programs are not there. (Not Intel's
    compilers: executables named like them, for the declaration alone.)"""
    monkeypatch.setenv("ONESTACK_SITE", "example-infiniband")
    defaults = stack.load().components["compilers"]["intel"]["site_external"]["extra_attributes"]["compilers"]
    if all(os.access(program, os.X_OK) for program in defaults.values()):
        print(f"Intel's compilers are in their default prefix here: declared, no refusal to check ({defaults['c']})")
        assert scope.site_compilers()
    else:
        with pytest.raises(paths.SetupError, match=r"compilers\.intel .*not executables here: /opt/intel/.*/icc"):
            scope.site_compilers()
    bin_dir = tmp_path / "intel" / "bin"
    bin_dir.mkdir(parents=True)
    for program in ("icc", "icpc", "ifort"):
        (bin_dir / program).write_text("#!/bin/sh\n")
        (bin_dir / program).chmod(0o755)
    programs = {"c": f"{bin_dir}/icc", "cxx": f"{bin_dir}/icpc", "fortran": f"{bin_dir}/ifort"}
    own = yaml.safe_load((paths.REPO / "sites" / "example-infiniband" / "site.yaml").read_text())
    own["compilers"] = {
        "intel": {
            "spec": "intel-oneapi-compilers-classic@2021.10.0",
            "prefix": str(tmp_path / "intel"),
            "extra_attributes": {"compilers": programs},
        }
    }
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "site.yaml").write_text(yaml.safe_dump(own))
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path / "site"))
    monkeypatch.setenv("ONESTACK_CACHE", str(tmp_path / "cache"))
    spack.site_scope().mkdir(parents=True)
    (spack.site_scope() / "packages.yaml").write_text(yaml.safe_dump({"packages": {"gcc": {"buildable": False}}}))
    scope.declare_compilers()
    packages = yaml.safe_load((spack.site_scope() / "packages.yaml").read_text())["packages"]
    assert packages["intel-oneapi-compilers-classic"]["externals"][0]["extra_attributes"]["compilers"] == programs
    assert "gcc" in packages and "nvhpc" not in packages, "detected externals kept, an absent compiler not declared"
    # The stack's compiler becomes another package (components.yaml, and the
    # site file with it), then the first again: the one declared in between
    # is dropped (not one of components.yaml's names).
    monkeypatch.setattr(spack, "site_scope", lambda scope=spack.site_scope(): scope)  # the same scope
    for folder, spec in (
        ("renamed", "intel-oneapi-compilers@2025.0.4"),
        ("back", "intel-oneapi-compilers-classic@2021.10.0"),
    ):
        keys = ("compilers.intel.spec", "compilers.intel.site_external.spec")
        case = {"file": "environments/components.yaml", "edits": [{"set": key, "value": spec} for key in keys]}
        monkeypatch.setenv("ONESTACK_DATA_ROOT", str(edited_copy(case, tmp_path / folder)))
        own["compilers"]["intel"]["spec"] = spec
        (tmp_path / folder / "site").mkdir()
        (tmp_path / folder / "site" / "site.yaml").write_text(yaml.safe_dump(own))
        monkeypatch.setenv("ONESTACK_SITE", str(tmp_path / folder / "site"))
        scope.declare_compilers()
        packages = yaml.safe_load((spack.site_scope() / "packages.yaml").read_text())["packages"]
        assert [p for p in packages if p.startswith("intel")] == [spec.partition("@")[0]], packages


def test_a_site_compiler_other_than_the_stacks_is_refused(tmp_path, monkeypatch):
    """A site's Intel compilers of another version than the flavors are
    built with (%intel-oneapi-compilers-classic@2021.10.0) would pass set-up
    and fail in Spack's solve: refused with the data, naming both."""
    own = yaml.safe_load((paths.REPO / "sites" / "example-infiniband" / "site.yaml").read_text())
    programs = {"c": "/opt/intel/bin/icc", "cxx": "/opt/intel/bin/icpc", "fortran": "/opt/intel/bin/ifort"}
    own["compilers"] = {
        "intel": {
            "spec": "intel-oneapi-compilers-classic@2021.9.0",
            "prefix": "/opt/intel",
            "extra_attributes": {"compilers": programs},
        }
    }
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(own))
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path))
    with pytest.raises(data.InputError, match=r"compilers\.intel\.spec: intel-oneapi-compilers-classic@2021\.9\.0 is"):
        stack.load()


def test_spack_config_carries_the_baseline_and_the_sites_permissions(tmp_path, monkeypatch):
    monkeypatch.setenv("ONESTACK_SITE", "example-infiniband")
    matrix = stack.load()
    config = yaml.safe_load(environment.render(matrix.select(), tmp_path).read_text())
    assert config["packages"]["all"] == {
        "target": ["x86_64_v3"],  # the level of the oldest of its cpu_generations
        "permissions": {"read": "group", "write": "user", "group": "hpcusers"},
    }
    spec = matrix.flavor("qe/mkl-mvapich2").spack_spec
    assert spec in config["definitions"][0]["flavors"] and "fabrics=mrail" in spec


def test_site_recipes_are_solved_afresh_not_reused(tmp_path):
    """Spack reuses an installed spec whatever its recipe says now: each
    package of a site recipe is left out of reuse, so a changed recipe
    (a patch added) gives a new build on a warm tree."""
    environment.render(stack.load().select(), tmp_path)
    excluded = yaml.safe_load((tmp_path / "spack.yaml").read_text())["spack"]["concretizer"]["reuse"]["exclude"]
    assert all((environment.SITE_RECIPES / name.replace("-", "_") / "package.py").is_file() for name in excluded)
    assert {"lammps", "onestack-dispatch", "onestack-mkl-cpu-path", "gromacs-regressiontests"} <= set(excluded)


def test_the_bytecode_spack_writes_beside_a_recipe_asks_for_no_new_solve(tmp_path, monkeypatch):
    """Spack imports the site recipes, and Python writes their bytecode
    beside them (unless PYTHONDONTWRITEBYTECODE): not an input of a solve.
    The recipes and their patches are."""
    recipe = tmp_path / "packages" / "spack_repo" / "onestack" / "packages" / "x" / "package.py"
    recipe.parent.mkdir(parents=True)
    recipe.write_text("class X: pass\n")
    (recipe.parent / "fix.patch").write_text("")
    monkeypatch.setattr(paths, "REPO", tmp_path)
    monkeypatch.setattr(spack, "site_scope", lambda: tmp_path / "scope")
    before = spack._recipe_files()
    (recipe.parent / "__pycache__").mkdir()
    (recipe.parent / "__pycache__" / "package.cpython-311.pyc").write_bytes(b"\0")
    assert spack._recipe_files() == before and {recipe, recipe.parent / "fix.patch"} <= set(before)


def test_two_sites_and_two_prefixes_keep_state_folders_of_their_own(tmp_path, monkeypatch):
    """Two sites build from one checkout and one cache: each its own Spack
    environment (spack.yaml, and the lock Spack writes beside it) and its own
    scope; a second prefix of one site (a developer's tree) is another."""
    monkeypatch.setenv("ONESTACK_CACHE", str(tmp_path / "cache"))
    seen = {}
    for name, prefix in (("default", ""), ("example-infiniband", ""), ("default", str(tmp_path / "mine"))):
        monkeypatch.setenv("ONESTACK_SITE", name)
        monkeypatch.setenv("ONESTACK_PREFIX", prefix)
        state = tmp_path / site.state_key()
        environment.render(stack.load().select(), state)
        env = yaml.safe_load((state / "spack.yaml").read_text())["spack"]
        included = [entry["path"] for entry in env["include"]]
        assert (state / included[0]).resolve() == paths.REPO / "modulefiles" / "modules.yaml"
        assert included[1] == "flavors.yaml" and (state / "flavors.yaml").is_file()
        assert (state / env["repos:"]["onestack"]).resolve() == paths.REPO / "packages" / "spack_repo" / "onestack"
        seen[(name, prefix)] = (site.state_key(), site.state_dir(), included[2])
    keys, states, scopes = zip(*seen.values())
    assert keys[:2] == ("default", "example-infiniband") and keys[2].startswith("default-"), keys
    assert len(set(states)) == len(set(scopes)) == 3, seen
    assert all(Path(scope).is_relative_to(tmp_path / "cache" / "sites") for scope in scopes), scopes
    # A copy of a site folder edited elsewhere, at the site's prefix, is that
    # site; one of another name is another, refused until it is set up.
    for name in ("default", "edited"):
        shutil.copytree(paths.REPO / "sites" / "default", tmp_path / "elsewhere" / name)
        monkeypatch.setenv("ONESTACK_SITE", str(tmp_path / "elsewhere" / name))
        monkeypatch.setenv("ONESTACK_PREFIX", "")
        assert site.state_key() == name
    with pytest.raises(spack.SpackError, match=r"site edited at prefix .* is not set up on this machine"):
        spack.concretize()
    # A center's own site folder named as one of sites/, at a prefix of its
    # own, shares none of that site's folders.
    center = tmp_path / "center" / "default"
    shutil.copytree(paths.REPO / "sites" / "default", center)
    file = center / "site.yaml"
    file.write_text(file.read_text().replace("prefix: /opt/onestack", "prefix: /apps/onestack"))
    monkeypatch.setenv("ONESTACK_SITE", str(center))
    assert site.state_key() == "default-" + hashlib.sha256(b"/apps/onestack").hexdigest()[:8]


class LuaModule:
    """A rendered module run by real Lua with Lmod's functions stubbed: what
    each call received, exactly."""

    def __init__(self, text: str, asked: str = "", mode: str = "load", loaded: bool = False):
        """asked: the name the user typed (Lmod's myModuleUsrName); by
        default the module's own name, from its whatis. mode: Lmod's mode().
        loaded: the module is loaded already (`module refresh`), else it is
        being loaded (pending)."""
        self.calls = []
        lua = lupa.LuaRuntime(unpack_returned_tuples=True)

        def record(name):
            return lambda *args: self.calls.append((name, *args))

        for name in (
            "whatis",
            "help",
            "pushenv",
            "family",
            "depends_on",
            "prepend_path",
            "append_path",
            "module_version",
            "hide_version",
            "LmodError",
            "LmodMessage",
            "unload",
        ):
            lua.globals()[name] = record(name)
        lua.globals()["myModuleUsrName"] = lambda: asked or self.values("whatis")[0][0].removeprefix("Name: ")
        lua.globals()["myModuleFullName"] = lua.globals()["myModuleUsrName"]
        lua.globals()["capture"] = lambda command: self.calls.append(("capture", command)) or ("", True)
        lua.globals()["isloaded"] = lambda name: True
        lua.globals()["isPending"] = lambda name: not loaded
        lua.globals()["mode"] = lambda: mode
        lua.execute(text)

    def values(self, name: str) -> list:
        return [call[1:] for call in self.calls if call[0] == name]


@pytest.mark.parametrize(
    "asked, known",
    [
        ("qe", True),
        ("qe/default", True),
        ("qe/openblas-impi", True),
        ("qe/openblas-impi/6.7.0", True),
        ("qe/openblas-impi/default", False),
        ("qe/openblas-impi/6.7", False),
        ("qe/openblas-impi/7.5.0", False),
        ("qe/typo", False),
        ("qe/openblas-imp", False),
        ("qe/openblas-impi-omp", False),
        ("hpl/openblas-impi", False),
    ],
)
def test_a_flavor_module_refuses_a_name_the_user_did_not_mean(asked, known, tmp_path):
    """Lmod 8.6 resolves `module load qe/typo` to the default flavor's file:
    the file itself refuses a name that is not its application, its flavor
    or one of its versions."""
    flavor = stack.load().flavor("qe/openblas-impi")
    errors = LuaModule(_flavor_module(flavor, "", tmp_path), asked=asked).values("LmodError")
    assert (not errors) if known else (errors and asked in errors[0][0]), (asked, errors)


def _hostile_flavor(text: str):
    flavor = stack.load().flavor("qe/openblas-impi")
    app = dataclasses.replace(flavor.app, description=text, usage=text)
    return dataclasses.replace(
        flavor,
        app=app,
        env=(Setting("ONESTACK_TEST", text, text),),
        desktop_env=(Setting("ONESTACK_TEST", text, text),),
        preload=Preload("onestack-mkl-cpu-path", "libx.so", text),
    )


def _root() -> dict:
    node = {"name": "quantum-espresso", "version": "6.7.0", "hash": "x"}
    return {
        **node,
        "target": "x86_64_v2",
        "compiler": {"name": "gcc", "version": "12.2.0"},
        "mpi": {"name": "intel-oneapi-mpi", "version": "2021.18.1"},
    }


def _flavor_module(flavor, text: str, tmp_path: Path) -> str:
    return render.text(
        publish.TEMPLATES,
        "flavor.lua.j2",
        flavor=flavor,
        root=_root(),
        modules={"compiler": "gcc/12.2.0", "mpi": "intel-oneapi-mpi/2021.18.1", "app": "qe/x"},
        math_line=text,
        release="r1",
        source_file="environments/qe.yaml",
        site=stack.load().site,
        launcher_dir=str(tmp_path / text),
        dispatch={
            "bin": str(tmp_path / "d" / text),
            "check": str(tmp_path / text / "check"),
            "levels": ["x86-64-v2", "x86-64-v3"],
            "programs": 2,
        },
        preload_path=str(tmp_path / text / "libx.so") if flavor.preload else "",
        runtimes=["mpi-runtime/impi"],
        deprecated=text,
    )


@pytest.mark.parametrize(
    "loaded, refused",
    [
        (
            {"ONESTACK_MPI_RUNTIME": "impi", "ONESTACK_MPI_RUNTIME_SERVES": "mpich,mpi5"},
            "mpi-runtime/impi is loaded; load the flavor first, then the runtime: module unload mpi-runtime; "
            "module load qe/openblas-mpich mpi-runtime/impi",
        ),
        (
            {"ONESTACK_MPI_RUNTIME": "openmpi6", "ONESTACK_MPI_RUNTIME_SERVES": "mpi5"},
            "mpi-runtime/openmpi6 is loaded, which does not serve this flavor's mpich ABI: module unload "
            "mpi-runtime; module load qe/openblas-mpich",
        ),
        ({"ONESTACK_LOADED_MPI": "wi4mpi/3.7.1"}, "wi4mpi/3.7.1 is loaded, whose mpirun"),
        ({"ONESTACK_LOADED_MPI": "intel-oneapi-mpi/2021.18.1"}, ""),  # its own MPI (_flavor_module's)
        ({"ONESTACK_FLAVOR_SETTINGS": "X:OPENBLAS_NUM_THREADS", "OPENBLAS_NUM_THREADS": "4"}, "it sets OPENBLAS_NUM"),
        ({"ONESTACK_FLAVOR_SETTINGS": "X:OPENBLAS_NUM_THREADS", "OPENBLAS_NUM_THREADS": "1"}, ""),
        ({"OPENBLAS_NUM_THREADS": "4"}, ""),  # the user's own, which the flavor replaces
    ],
)
def test_a_flavor_refuses_what_it_would_silently_override(loaded, refused, tmp_path, monkeypatch):
    """Loaded after a runtime (whose settings it would override), after a
    bare MPI or translator of another MPI (whose mpirun would start it), or
    beside a flavor that set one of its settings otherwise: refused, saying
    what to do."""
    every = ("ONESTACK_MPI_RUNTIME", "ONESTACK_MPI_RUNTIME_SERVES", "ONESTACK_LOADED_MPI", "ONESTACK_FLAVOR_SETTINGS")
    for name in (*every, "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in loaded.items():
        monkeypatch.setenv(name, value)
    module = LuaModule(_flavor_module(stack.load().flavor("qe/openblas-mpich"), "x", tmp_path))
    errors = [e for (e,) in module.values("LmodError")]
    assert (refused in errors[0]) if refused else not errors, errors
    names = [setting.name for setting in stack.load().flavor("qe/openblas-mpich").env]
    appended = [value for name, value in module.values("append_path") if name == "ONESTACK_FLAVOR_SETTINGS"]
    assert appended == names and "OPENBLAS_NUM_THREADS" in names, appended


@pytest.mark.parametrize("forced, said", [("x86-64-v4", True), ("x86_64_v3", True), ("x86-64-v3", False), ("", False)])
def test_a_forced_level_the_flavor_has_no_build_of_is_said_at_load(forced, said, tmp_path, monkeypatch):
    """ONESTACK_CPU_LEVEL naming a level the flavor lacks would stop each of
    its programs (the dispatcher exits 125): `module load` says so, with the
    fix, as a message (a warning would make `module load` exit 1)."""
    monkeypatch.setenv("ONESTACK_CPU_LEVEL", forced)
    module = LuaModule(_flavor_module(stack.load().flavor("qe/openblas-mpich"), "x", tmp_path))
    messages = " ".join(m for (m,) in module.values("LmodMessage"))
    assert ("unset ONESTACK_CPU_LEVEL" in messages and "x86-64-v2 x86-64-v3" in messages) is said, messages


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_flavor_module_keeps_any_text_as_text(text, tmp_path):
    flavor = _hostile_flavor(text)
    module = LuaModule(_flavor_module(flavor, text, tmp_path))
    assert ("ONESTACK_TEST", text) in module.values("pushenv")
    # The site's deprecation message, said at load
    deprecated = f"{flavor.versioned_name} is deprecated: {' '.join(text.split())}"
    assert (deprecated,) in module.values("LmodMessage"), module.values("LmodMessage")
    assert (f"Description: {text}",) in module.values("whatis")
    assert (f"Math: {text}",) in module.values("whatis")
    [help_text] = module.values("help")
    assert help_text[0].count(text) >= 4, help_text  # description, usage, the setting's value and why
    assert ("PATH", str(tmp_path / text)) in module.values("prepend_path")
    assert ("LD_PRELOAD", str(tmp_path / text / "libx.so")) in module.values("prepend_path")
    # The load-time check is a shell command (Lmod's capture): its path
    # reaches the program as one word, and nothing in it runs.
    check = tmp_path / text / "check"
    check.parent.mkdir()
    check.write_text('#!/bin/sh\nprintf "%s:%s" "$#" "$0"\n')
    check.chmod(0o755)
    [(command,)] = module.values("capture")
    ran = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True)
    assert ran.stdout.decode() == f"0:{check}", (command, ran.stdout, ran.stderr)
    assert not (tmp_path / "{marker}").exists(), command


@pytest.mark.parametrize(
    "job, threads",
    [
        ({"SLURM_CPUS_PER_TASK": "3", "OMP_NUM_THREADS": "8"}, "3"),  # Slurm's --cpus-per-task first
        ({"OMP_NUM_THREADS": "2"}, "2"),  # what the user set before the load
        ({}, "1"),
        ({"SLURM_CPUS_PER_TASK": "2; rm -rf ~"}, "1"),  # a number, or 1
    ],
)
def test_a_hybrid_flavor_module_sets_threads_placement_and_binding_from_the_job(job, threads, tmp_path, monkeypatch):
    for name in ("SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in job.items():
        monkeypatch.setenv(name, value)
    flavor = stack.load().flavor("lmp/openblas-mpich-omp")
    set_to = dict(LuaModule(_flavor_module(flavor, "x", tmp_path)).values("pushenv"))
    assert set_to["OMP_NUM_THREADS"] == threads and set_to["SRUN_CPUS_PER_TASK"] == threads, set_to
    # One thread a rank: the MPI-only flavors' binding (hydra's core:1 is core), which they then agree on.
    binding = "core" if threads == "1" else f"core:{threads}"
    assert set_to["HYDRA_BINDING"] == binding and set_to["OPENBLAS_NUM_THREADS"] == threads, set_to
    assert (set_to["OMP_PLACES"], set_to["OMP_PROC_BIND"]) == ("cores", "close"), set_to
    assert set_to["ONESTACK_THREADS"] == threads, "read by a runtime loaded over it"
    mpi_only = dict(
        LuaModule(_flavor_module(stack.load().flavor("lmp/openblas-mpich"), "x", tmp_path)).values("pushenv")
    )
    assert (mpi_only["HYDRA_BINDING"], mpi_only["OPENBLAS_NUM_THREADS"]) == (
        "core",
        "1",
    ) and "OMP_PLACES" not in mpi_only


def test_module_help_names_the_accelerated_styles_a_flavor_has(tmp_path):
    def help_of(module):
        return LuaModule(_flavor_module(stack.load().flavor(module), "x", tmp_path)).values("help")[0][0]

    hybrid = help_of("lmp/openblas-mpich-omp")
    assert "-sf intel: the INTEL package" in hybrid and "-sf opt: the OPT package" in hybrid, hybrid
    assert "-sf intel" not in help_of("lmp/openblas-mpich"), "the MPI-only flavor has no INTEL package"
    assert "Accelerated styles" not in help_of("lmp/openblas-mpich/20210929.2")


def _runtime_module() -> str:
    """mpi-runtime/impi's module, with hostile text in its data."""
    runtime = dataclasses.replace(stack.load().runtimes[0], env=(Setting("X", HOSTILE[3], HOSTILE[1]),))
    return render.text(
        publish.TEMPLATES,
        "mpi-runtime.lua.j2",
        runtime=runtime,
        root={"name": "intel-oneapi-mpi", "version": "2021.18.1"},
        release="r1",
        shim_dir=Path("/x y"),
        vendor_env={"set": [("I_MPI_ROOT", "/a'b")], "prepend": []},
        container_binds=["/x y/lib", "/a'b"],
    )


def test_default_and_runtime_modules_are_lua_literals():
    module = LuaModule(
        render.text(publish.TEMPLATES, "modulerc.lua.j2", default='qe/a"b', hidden=["qe/a/1]]"], site=stack.load().site)
    )
    assert module.values("module_version") == [('qe/a"b', "default")]
    assert module.values("hide_version") == [("qe/a/1]]",)]
    text = _runtime_module()
    module = LuaModule(text)
    assert ("X", HOSTILE[3]) in module.values("pushenv") and ("I_MPI_ROOT", "/a'b") in module.values("pushenv")
    assert ("ONESTACK_MPI_BINDS", "/x y/lib,/a'b") in module.values("pushenv")
    assert ("LD_LIBRARY_PATH", "/x y/lib") in module.values("prepend_path")
    assert not module.values("LmodError")
    # `module load mpi-runtime`, the bare name: refused, naming the runtimes.
    assert "name the runtime" in LuaModule(text, asked="mpi-runtime").values("LmodError")[0][0]
    # `module refresh` runs the loaded runtime again in load mode, as its short name: no refusal.
    assert not LuaModule(text, asked="mpi-runtime", loaded=True).values("LmodError")


def test_a_runtime_runs_over_one_flavor(monkeypatch):
    """Over two flavors, unloading one would give the runtime's settings back
    to the other's values (pushenv): refused; over one, it loads."""
    text = _runtime_module()
    monkeypatch.setenv("ONESTACK_LOADED_FLAVORS", "qe/a/1:hpl/b/2")
    assert "it runs one flavor, and qe/a/1, hpl/b/2 are loaded" in LuaModule(text).values("LmodError")[0][0]
    monkeypatch.setenv("ONESTACK_LOADED_FLAVORS", "qe/a/1")
    assert not LuaModule(text).values("LmodError")


def test_a_flavor_unloaded_under_a_runtime_takes_the_runtime_first(tmp_path, monkeypatch):
    """Unloading pops each variable's top value, the runtime's: the runtime
    is unloaded before the flavor's values are, and the unload says so; a
    later load under a runtime is refused."""
    monkeypatch.setenv("ONESTACK_MPI_RUNTIME", "impi")
    monkeypatch.setenv("ONESTACK_MPI_RUNTIME_SERVES", "mpich")
    text = _flavor_module(stack.load().flavor("qe/openblas-mpich"), "x", tmp_path)
    module = LuaModule(text, mode="unload")
    first_pop = next(i for i, call in enumerate(module.calls) if call[0] == "pushenv")
    assert module.calls.index(("unload", "mpi-runtime/impi")) < first_pop, module.calls
    said = " ".join(m for (m,) in module.values("LmodMessage"))
    assert "mpi-runtime/impi, which ran qe/openblas-mpich" in said and "is unloaded with it" in said, said
    errors = LuaModule(text).values("LmodError")
    assert errors and "load the flavor first" in errors[0][0], errors
    # `module refresh` runs a loaded flavor again in load mode, under its runtime: no refusal.
    assert not LuaModule(text, loaded=True).values("LmodError")


def _translator_module(task_prolog: str = "/x y/task-prolog", runtime=None) -> LuaModule:
    translator = runtime or next(r for r in stack.load().runtimes if r.translator)
    return LuaModule(
        render.text(
            publish.TEMPLATES,
            "mpi-translator.lua.j2",
            runtime=translator,
            root={"name": "wi4mpi", "version": "3.6.4"},
            release="r1",
            shim_dir=Path("/x y"),
            preload="/w'i/libwi4mpi.so:libmpi.so.40",
            task_prolog=Path(task_prolog),
            library_path=["/w i/fake"],
        )
    )


@pytest.mark.parametrize("users", ["", "/home/u/my-prolog"])
def test_a_translator_module_leaves_the_shells_preload_alone(users, monkeypatch):
    """mpi-runtime/<translator>: nothing on the shell's LD_PRELOAD (its
    mpirun and srun's task prolog set it in the ranks); a task prolog the
    user had kept, for the module's to run first; its settings and the
    target MPI's as Lua literals."""
    monkeypatch.setenv("SLURM_TASK_PROLOG", users)
    translator = next(r for r in stack.load().runtimes if r.translator)
    hostile = dataclasses.replace(translator, env=(*translator.env, Setting("X", HOSTILE[3], HOSTILE[1])))
    module = _translator_module(runtime=hostile)
    assert not [call for call in module.calls if "LD_PRELOAD" in call[1:2]], module.calls
    pushed = module.values("pushenv")
    assert ("SLURM_TASK_PROLOG", "/x y/task-prolog") in pushed and ("SLURM_ONESTACK_USER_TASK_PROLOG", users) in pushed
    assert ("X", HOSTILE[3]) in pushed and ("PATH", "/x y/bin") in module.values("prepend_path")
    assert ("SLURM_MPI_TYPE", "pmix") in pushed, "the target MPI's own settings"
    assert ("mpi_runtime",) in module.values("family") and not module.values("LmodError")


@pytest.mark.parametrize("threads, mapping", [("2", "slot:PE=2"), ("1", "core"), (None, "core"), ("2;x", "core")])
def test_a_runtime_over_a_hybrid_flavor_gives_each_rank_its_threads_cores(threads, mapping, monkeypatch):
    """Open MPI 4's mpirun bound a hybrid rank of 2 threads to one core under
    the translator: over a hybrid flavor of more than one thread a rank (its
    ONESTACK_THREADS), a runtime sets its settings' hybrid values."""
    monkeypatch.delenv("ONESTACK_THREADS", raising=False)
    if threads:
        monkeypatch.setenv("ONESTACK_THREADS", threads)
    assert dict(_translator_module().values("pushenv"))["OMPI_MCA_rmaps_base_mapping_policy"] == mapping


@pytest.mark.parametrize("flavors", ["", "/f/libx.so"])
@pytest.mark.parametrize("users", ["", "user"])
def test_srun_sets_a_translators_preload_in_each_task_before_the_flavors(flavors, users, tmp_path):
    """The task prolog prints the line Slurm sets in the task: the
    translator's libraries, then the flavor's own preload where it has one;
    after the lines of the user's own task prolog, where there was one."""
    prolog = tmp_path / "task-prolog"
    render.write(publish.TEMPLATES, "task-prolog.sh.j2", prolog, mode=0o755, preload="/w'i/a.so:b.so")
    theirs = tmp_path / "users-prolog"
    theirs.write_text("#!/bin/sh\necho export FROM_USER=1\n")
    theirs.chmod(0o755)
    env = {
        **commands.clean_env(),
        "LD_PRELOAD": flavors,
        "SLURM_ONESTACK_USER_TASK_PROLOG": str(theirs) if users else "",
    }
    printed = subprocess.run([prolog], env=env, capture_output=True, text=True, check=True).stdout
    ours = "export LD_PRELOAD=/w'i/a.so:b.so" + (f":{flavors}" if flavors else "") + "\n"
    assert printed == ("export FROM_USER=1\n" if users else "") + ours, printed


RUN = ("-n", "2", "prog", "--task-prolog=/its/own")


@pytest.mark.parametrize(
    "shell, words, passed, theirs",
    [
        ({}, RUN, RUN, ""),
        ({"SLURM_ONESTACK_USER_TASK_PROLOG": "/u/before"}, RUN, RUN, "/u/before"),
        ({}, ("--task-prolog=/u/p", *RUN), RUN, "/u/p"),
        ({}, ("--task-pro", "/u/p", *RUN), RUN, "/u/p"),
        ({}, ("--task-prolog", "./p", *RUN), RUN, "{cwd}/./p"),
        ({}, ("--task-prolog", "on-path", *RUN), RUN, "{slurm}/on-path"),
        ({}, ("-D", "/scratch", "--task-prolog=./p", *RUN), ("-D", "/scratch", *RUN), "/scratch/./p"),
        ({}, ("-lD/scratch", "--task-prolog=./p", *RUN), ("-lD/scratch", *RUN), "/scratch/./p"),
        ({}, ("--chd", "/scratch", "--task-prolog=./p", *RUN), ("--chd", "/scratch", *RUN), "/scratch/./p"),
        ({}, ("-J", "test", "-ln", "2", "--task-prolog=/u/p", "prog"), ("-J", "test", "-ln", "2", "prog"), "/u/p"),
        ({}, ("-Jtest", "--ntasks", "2", "--task-prolog=/u/p", "prog"), ("-Jtest", "--ntasks", "2", "prog"), "/u/p"),
        ({}, ("-n2", "./not-built", "--task-prolog", "x"), ("-n2", "./not-built", "--task-prolog", "x"), ""),
        ({}, ("-n2", "--", "prog", "--task-prolog=/a"), ("-n2", "--", "prog", "--task-prolog=/a"), ""),
        ({"SLURM_TASK_PROLOG": "/u/after"}, RUN, RUN, "/u/after"),
        ({"SLURM_TASK_PROLOG": "/u/after"}, ("--task-prolog=/u/p", *RUN), RUN, "/u/p"),
    ],
)
def test_a_translators_srun_keeps_its_task_prolog_and_runs_the_users_first(shell, words, passed, theirs, tmp_path):
    """Slurm runs one task prolog a step: a user's, given to srun or set
    after the module, would replace the one that loads the translator. The
    translator's srun hands it to that one (which runs it first), found as
    srun finds it, and starts Slurm's srun, the next on PATH, with srun's
    other options and the program's arguments unchanged."""
    own = tmp_path / "task-prolog"
    shim = render.write(
        publish.TEMPLATES,
        "srun-prolog.sh.j2",
        tmp_path / "bin" / "srun",
        mode=0o755,
        module="mpi-runtime/x",
        release="r1",
        task_prolog=own,
    )
    slurm = tmp_path / "slurm"
    slurm.mkdir()
    (slurm / "srun").write_text(
        '#!/bin/bash\nprintf "arg:%s\\n" "$@"\n'
        'printf "prolog:%s\\nusers:%s\\n" "$SLURM_TASK_PROLOG" "$SLURM_ONESTACK_USER_TASK_PROLOG"\n'
    )
    for name in ("srun", "prog", "on-path"):
        (slurm / name).touch()
        (slurm / name).chmod(0o755)
    # A link to it first on PATH (a user's ~/bin): not started again.
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "srun").symlink_to(shim)
    # As the module leaves the shell: its task prolog set, the user's from before kept.
    path = f"{tmp_path / 'home'}:{tmp_path / 'bin'}:{slurm}:/usr/bin:/bin"
    env = {**commands.clean_env(), "PATH": path, "SLURM_TASK_PROLOG": str(own), **shell}
    printed = subprocess.run(
        [tmp_path / "home" / "srun", *words], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert printed.returncode == 0, printed.stderr
    args = "".join(f"arg:{arg}\n" for arg in passed)
    users = theirs.format(cwd=tmp_path, slurm=slurm)
    assert printed.stdout == f"{args}prolog:{own}\nusers:{users}\n", printed.stdout


@pytest.mark.parametrize("prefix", ["/a b", "/a:b", "/a\nb"])
def test_a_translator_under_a_prefix_its_launchers_would_split_is_refused(prefix):
    """LD_PRELOAD splits at spaces and colons, the task prolog's line at a
    newline: such a preload is refused at publish."""
    translator = next(r for r in stack.load().runtimes if r.translator)
    with pytest.raises(publish.PublishError, match="ONESTACK_PREFIX"):
        publish._rank_preload(translator, Path(prefix))


@pytest.mark.parametrize("flavors", ["", "/f/libx.so"])
def test_a_translators_mpirun_preloads_it_in_the_ranks_alone(flavors, tmp_path):
    """Through its launcher's option (Open MPI's -x), read when it starts:
    the translator's libraries, then the shell's own preload."""
    translator = next(r for r in stack.load().runtimes if r.translator)
    shim = _mpirun_shim(tmp_path, ["mpich"], preload="/w'i/a.so:b.so", rank_env_option=translator.rank_env_option)
    env = {**commands.clean_env(), "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "LD_PRELOAD": flavors}
    printed = subprocess.run([shim, "-n", "2", "prog"], env=env, capture_output=True, text=True).stdout
    preload = "/w'i/a.so:b.so" + (f":{flavors}" if flavors else "")
    assert f"arg:-x\narg:LD_PRELOAD={preload}\narg:-n\narg:2\narg:prog\n" in printed, printed
    # One of the user's would replace it in the ranks: refused.
    theirs = subprocess.run([shim, "-x", "LD_PRELOAD=/u.so", "prog"], env=env, capture_output=True, text=True)
    assert theirs.returncode == 1 and "would replace the translator's libraries" in theirs.stderr, theirs.stderr
    assert "arg:" not in theirs.stdout
    # The program's own -x is its own.
    programs = subprocess.run(
        [shim, "-n", "2", "fake-launcher", "-x", "LD_PRELOAD=/u.so"], env=env, capture_output=True
    )
    assert programs.returncode == 0, programs.stderr


def _mpirun_shim(tmp_path: Path, serves: list, preload: str = "", rank_env_option: str = "") -> Path:
    """A runtime's mpirun that starts fake-launcher (tmp_path/bin), which prints its arguments."""
    _fake_program(tmp_path / "bin", "fake-launcher")
    return render.write(
        publish.TEMPLATES,
        "mpirun-check.sh.j2",
        tmp_path / "mpirun",
        mode=0o755,
        module="mpi-runtime/x",
        serves=", ".join(serves),
        foreign=abi.foreign_libraries(serves),
        release="r1",
        launcher="fake-launcher",
        preload=preload,
        rank_env_option=rank_env_option,
    )


def test_every_abi_family_names_the_library_its_builds_link():
    """A runtime's mpirun refuses the builds of every ABI it does not serve,
    known by the C library they link."""
    schema = yaml.safe_load((paths.REPO / "schemas" / "components.schema.yaml").read_text())
    families = schema["$defs"]["mpi"]["properties"]["abi"]["enum"]
    assert sorted(abi.C_LIBRARIES) == sorted(families)


def _linked_to(folder: Path, soname: str) -> Path:
    """A program linked to a library of that soname (built here, empty)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lib.c").write_text("int onestack_lib(void) { return 0; }\n")
    (folder / "main.c").write_text("int onestack_lib(void);\nint main(void) { return onestack_lib(); }\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", folder / soname, folder / "lib.c"], check=True
    )
    program = folder / "prog"
    subprocess.run(["gcc", "-o", program, folder / "main.c", folder / soname, f"-Wl,-rpath,{folder}"], check=True)
    return program


@pytest.mark.parametrize(
    "soname, refused", [("libmpi.so.12", "mpich"), ("libmpi.so.40", "openmpi"), ("libmpi_abi.so.1", "")]
)
def test_a_runtimes_mpirun_refuses_a_build_of_an_abi_it_does_not_serve(soname, refused, tmp_path):
    """Under a runtime of the MPI-5 ABI alone, an MPICH build and an Open MPI
    build are refused, by name, before the launcher starts; a standard-ABI
    build starts."""
    shim = _mpirun_shim(tmp_path, ["mpi5"])
    program = _linked_to(tmp_path / "p", soname)
    env = {**commands.clean_env(), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    proc = subprocess.run([shim, "-n", "2", program], env=env, capture_output=True, text=True)
    if refused:
        assert proc.returncode == 1 and f"is a build of the {refused} ABI ({soname})" in proc.stderr, proc.stderr
        assert "arg:" not in proc.stdout, "the launcher started"
    else:
        assert proc.returncode == 0 and f"arg:{program}" in proc.stdout, (proc.stdout, proc.stderr)


def _fake_program(folder: Path, name: str, variable: str = "ONESTACK_TEST") -> None:
    """Prints its arguments, one per line, and the variable under test."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f'#!/bin/bash\nprintf "arg:%s\\n" "$@"\nprintf "env:%s\\n" "${variable}"\n')
    (folder / name).chmod(0o755)


def _run_script(tmp_path: Path, how: How, prepare: tuple = (), after: tuple = ()) -> subprocess.CompletedProcess:
    """A problem running `prog -in in.txt`, its script written and run the way How says."""
    problem = Problem(
        "app",
        "case",
        {
            "ranks": 2,
            "ranks_pattern": "x",
            "command": "prog -in {input}",
            "prepare": list(prepare),
            "after": list(after),
            "env": {},
            "params": {},
            "checks": {},
            "input": "in.txt",
        },
    )
    script = tmp_path / "run.sh"
    script.write_text(runner.script(problem, how, tmp_path, tmp_path, None))
    return subprocess.run(["bash", str(script)], env=commands.clean_env(), capture_output=True)


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_run_script_passes_any_text_as_one_word(text, tmp_path):
    marker = tmp_path / "marker"
    text = text.replace("{marker}", str(marker))
    _fake_program(tmp_path / "bin", "fake-launcher")
    how = How(
        env=(("ONESTACK_TEST", text),), path=(str(tmp_path / "bin"),), launcher=("fake-launcher", "-n", "{ranks}", text)
    )
    # A preparing step, and a step after the program, get the text as one word too.
    step = shlex.join(["fake-launcher", text])
    proc = _run_script(tmp_path, how, prepare=(step,), after=(step,))
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.decode()  # bytes: text mode would turn a \r into a newline
    assert f"env:{text}\n" in printed and f"arg:{text}\n" in printed
    assert printed.count(f"arg:{text}\n") >= 3, "the preparing or after step did not get the text as one word"
    assert "arg:prog\narg:-in\narg:in.txt" in printed
    assert not marker.exists(), "a $(...) in the data ran"


def test_an_emulated_run_hands_glibc_its_tunables(tmp_path):
    """The script's wiring, not qemu: the command qemu-x86_64 is given (a
    program here that prints its arguments and GLIBC_TUNABLES) gets the
    emulated CPU and the program's path, and the emulated program glibc's
    tunables (runner.EMULATED_GLIBC_TUNABLES says why)."""
    bin_dir = tmp_path / "bin"
    _fake_program(bin_dir, "qemu-x86_64", "GLIBC_TUNABLES")
    _fake_program(bin_dir, "prog")
    proc = _run_script(tmp_path, How(path=(str(bin_dir),), emulate="Haswell"))
    printed = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr
    assert f"arg:-cpu\narg:Haswell\narg:{bin_dir}/prog\narg:-in\narg:in.txt\n" in printed, printed
    assert f"env:{runner.EMULATED_GLIBC_TUNABLES}\n" in printed, printed


# Time for bash to start its child and say its pid, on a loaded CI machine.
KILL_AFTER_S = 3


def test_a_run_past_its_time_is_killed_with_every_process_it_started(tmp_path, monkeypatch):
    """The launcher and its ranks (here a sleep the script started, in a
    process group of its own), not the shell alone: none is left running."""
    monkeypatch.setattr(runner, "TIMEOUT_S", KILL_AFTER_S)
    script = tmp_path / "run.sh"
    # In a process group of its own, as Open MPI's launchers put their ranks.
    script.write_text(
        f"python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' >/dev/null 2>&1 &\n"
        f"echo $! > {tmp_path}/pid\nwait\n"
    )
    code, printed = runner._bash(script)
    assert code == -signal.SIGKILL and printed.startswith(f"killed after {KILL_AFTER_S} s")
    _assert_killed(int((tmp_path / "pid").read_text()))


@pytest.fixture
def stop_signals_at_their_defaults():
    """SIGTERM and SIGHUP as a shell without nohup or a trap leaves them, and
    Ctrl-C as Python's own handler takes it: a runner that ignores them (a
    shell ignores SIGINT in a command it starts in the background) would
    leave stopped_as_exit and _Held nothing to arm."""
    before = {sig: signal.getsignal(sig) for sig in (*commands.STOP_SIGNALS, signal.SIGINT)}
    for sig in commands.STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_command_is_ended_with_every_process_it_started_when_we_are_stopped(tmp_path):
    """A SIGTERM (a cancelled CI job) ends Python without its except blocks,
    and a command in a session of its own does not get its caller's group's
    signal: run_whole turns it into Stopped and ends the command's session."""
    script = (
        "python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' >/dev/null 2>&1 &\n"
        f"echo $! > {tmp_path}/pid\nkill -TERM $PPID\nwait\n"
    )
    with pytest.raises(commands.Stopped):
        commands.run_whole(["bash", "-c", script], 60)
    _assert_killed(int((tmp_path / "pid").read_text()))


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
@pytest.mark.parametrize("signum, raised", [(signal.SIGTERM, commands.Stopped), (signal.SIGINT, KeyboardInterrupt)])
def test_a_command_is_ended_when_we_are_stopped_while_it_starts(signum, raised, monkeypatch):
    """A SIGTERM or a Ctrl-C inside Popen (after its fork, before it returns:
    the command runs, its pid unknown to the caller) is held until the
    command's session can be ended, then raised. A loaded CI machine met it."""
    started = []

    def popen_then_stopped(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        started.append(proc.pid)
        os.kill(os.getpid(), signum)
        time.sleep(0.5)  # the handler runs in here
        return proc

    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", popen_then_stopped)
    try:
        with pytest.raises(raised):
            commands.run_whole(["sleep", "300"], 60)
        _assert_killed(started[0])
    finally:
        with contextlib.suppress(ProcessLookupError, IndexError):
            os.kill(started[0], signal.SIGKILL)


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_spack_command_is_ended_with_onestack_when_it_is_stopped(tmp_path, monkeypatch):
    """`kill <onestack>` (SIGTERM to onestack alone, not its group) ended
    Python at once and freed its lock on the prefix, while Spack (a module
    refresh, an install and its builds) went on writing there."""
    script = (
        "python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' >/dev/null 2>&1 &\n"
        f"echo $! > {tmp_path}/pid\nkill -TERM {os.getpid()}\nwait\n"
    )
    monkeypatch.setattr(spack, "command", lambda *args: ["bash", "-c", script])
    monkeypatch.setattr(spack, "install", lambda: spack.run("install"))
    monkeypatch.setattr(cli, "_check_baseline", lambda: None)
    monkeypatch.setattr(cli, "_concretize", lambda args: None)
    monkeypatch.setattr(cli.mirror, "fill", lambda **kw: None)
    assert cli.main(["build"]) == 128 + signal.SIGTERM
    _assert_killed(int((tmp_path / "pid").read_text()))


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_stop_between_commands_runs_onestacks_finally_blocks(tmp_path, monkeypatch):
    """Outside any command, a SIGTERM ended Python where it stood: a partial
    file was left, a lock kept past what it guards."""
    partial = tmp_path / "image.sif"

    def stopped_half_way(args):
        with files.replacing(partial) as writing:
            writing.write_text("half")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)

    monkeypatch.setattr(cli, "_check_baseline", lambda: stopped_half_way(None))
    assert cli.main(["build"]) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
@pytest.mark.parametrize("signum, raised", [(signal.SIGTERM, commands.Stopped), (signal.SIGINT, KeyboardInterrupt)])
def test_a_block_that_must_finish_raises_a_stop_at_its_end(signum, raised):
    """A cluster's removal cut short by a SIGTERM or a Ctrl-C left its
    namespaces, bridge and firewall table: the signal, even one that reaches
    a command the block runs, is raised once the block is done."""
    done = []
    with pytest.raises(raised):
        with commands.finished_whole():
            code, out, _ = commands.run_whole(["bash", "-c", f"kill -{signum} {os.getpid()}; sleep 0.5; echo ran"], 30)
            done.append((code, out))
            time.sleep(0.1)
            done.append("after")
    assert done == [(0, "ran\n"), "after"]


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_stop_while_a_block_that_must_finish_starts_a_command_lets_the_command_run(monkeypatch):
    """Within such a block, a SIGTERM inside Popen is the block's to raise:
    the command it starts runs to its end, and so does the block."""

    def popen_then_stopped(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler runs in here
        return proc

    real_popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", popen_then_stopped)
    done = []
    with pytest.raises(commands.Stopped):
        with commands.finished_whole():
            done.append(commands.run_whole(["echo", "ran"], 30)[:2])
    assert done == [(0, "ran\n")]


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_block_that_must_finish_and_fails_keeps_its_error_and_says_the_stop():
    """A removal that failed (its leftovers listed) while a SIGTERM was held:
    raised over its error, the signal hid it, and the CLI said all was removed."""
    with pytest.raises(RuntimeError, match="not fully removed") as failed:
        with commands.finished_whole():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            raise RuntimeError("cluster oscl not fully removed: namespace oscl-n1")
    assert "(stopped by signal 15 meanwhile)" in failed.value.__notes__


def test_spack_runs_from_a_terminal(tmp_path):
    """In a session of its own, the terminal it was given as stdin is not
    its controlling one: Spack's build log asks it for its foreground group
    (tcgetpgrp), failed, and lost the build's output."""
    probe = "import os, sys; sys.exit(1 if os.isatty(0) and os.tcgetpgrp(0) < 0 else 0)"
    program = (
        "import sys\nfrom onestack import spack\n"
        f"spack.command = lambda *args: [sys.executable, '-c', {probe!r}]\n"
        "spack.run('install')\n"
    )
    (tmp_path / "run.py").write_text(program)
    shell = subprocess.run(
        ["script", "-qec", f"{shlex.quote(sys.executable)} {tmp_path / 'run.py'}", "/dev/null"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(paths.REPO)},
    )
    assert shell.returncode == 0, shell.stdout + shell.stderr


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_stop_while_a_commands_session_is_killed_leaves_none_of_it_running(monkeypatch):
    """A SIGTERM that reaches us while the session of a command past its time
    is being killed is raised once every process of it is killed, not
    between two kills."""
    killed = []

    def kill_then_stopped(pid, signum):
        if not killed:
            real_kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)  # the handler runs in here
        killed.append(pid)
        real_kill(pid, signum)

    real_kill = os.kill
    monkeypatch.setattr(commands.os, "kill", kill_then_stopped)
    with pytest.raises(commands.Stopped):
        commands.run_whole(["bash", "-c", "sleep 300 & sleep 300 & wait"], 1)
    assert len(killed) == 3, f"bash and its two sleeps, killed: {killed}"
    for pid in killed:
        _assert_killed(pid)


@pytest.mark.usefixtures("stop_signals_at_their_defaults")
def test_a_stop_within_an_outer_stop_block_leaves_the_signals_ignored_to_its_end():
    """The cluster's removal after a SIGTERM that reached a command within it
    (run_whole inside cluster.running) is not cut short by a second one; and
    a signal ignored before (nohup's SIGHUP) stays ignored."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with pytest.raises(commands.Stopped):
        with commands.stopped_as_exit():
            with commands.stopped_as_exit():
                assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            assert False, "not stopped"
    with commands.stopped_as_exit():
        with pytest.raises(commands.Stopped):
            with commands.stopped_as_exit():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN, "re-armed within the outer block"


def _assert_killed(pid: int) -> None:
    status = Path(f"/proc/{pid}/status")
    # A SIGKILL takes effect when the process next runs: on a loaded machine
    # a moment after the kill returned. Five seconds at most.
    for _ in range(50):
        try:
            if "State:\tZ" in status.read_text():
                return
        except FileNotFoundError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the run's child outlived the kill:\n{status.read_text()}")


def test_an_apptainer_command_past_its_time_is_killed_with_every_process_it_started(tmp_path):
    """As for a run (runuser's child, apptainer's starter): none left
    running, the error says it was killed; its input reached it."""
    fake = tmp_path / "apptainer"
    fake.write_text(
        f"#!/bin/bash\ncat > {tmp_path}/input\n"
        f"python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' >/dev/null 2>&1 &\n"
        f"echo $! > {tmp_path}/pid\nwait\n"
    )
    fake.chmod(0o755)
    with pytest.raises(ApptainerError, match=f"killed after {KILL_AFTER_S} s"):
        Apptainer(fake).run(["exec"], input="a key", timeout=KILL_AFTER_S)
    assert (tmp_path / "input").read_text() == "a key"
    _assert_killed(int((tmp_path / "pid").read_text()))


def test_vendor_environment_scripts_set_what_the_data_says(tmp_path):
    """env/vars.sh, as Spack sources it: every path below the layout."""
    how = vendor.every()["intel-oneapi-mpi"]
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "vars.sh").write_text(vendor.vars_sh("intel-oneapi-mpi", how))
    proc = subprocess.run(
        ["bash", "-c", f'. "{tmp_path}/env/vars.sh"; echo "$I_MPI_ROOT|$FI_PROVIDER_PATH|$PATH"'],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == f"{tmp_path}|{tmp_path}/lib|{tmp_path}/bin:/usr/bin:/bin"


def _definition(flavor, help_text: str = "help", base: str = "/b/base.sif") -> str:
    return render.text(
        images.CONTAINERS,
        "flavor.def.j2",
        flavor=flavor,
        base=base,
        spack_root="/s",
        spack_packages="/p",
        site_repo="/r",
        recipe_index=[("/i/providers", "/opt/spack-cache/providers")],
        context="/c",
        vendor_copies=[],
        build_packages=["python3"],
        roots=["/abc"],
        in_view=["/abc"],
        view="/opt/views/view",
        final_packages=["mpich"],
        launcher_alternative="/usr/bin/mpirun.mpich",
        environment=[("I_MPI_ROOT", "/v w", False), ("PATH", "/v w/bin", True)],
        labels={"org.onestack.flavor": flavor.module_name},
        help=help_text,
        threads=images.THREADS_SH,
        buildcache="/opt/buildcache",
        at=images.IN_IMAGE,
    )


@pytest.mark.parametrize(
    "given,threads",
    [
        ({}, "1"),
        ({"OMP_NUM_THREADS": "3"}, "3"),
        ({"SLURM_CPUS_PER_TASK": "4", "OMP_NUM_THREADS": "8"}, "4"),
        ({"SLURM_CPUS_PER_TASK": "2; rm -rf ~"}, "1"),
        ({"OMP_NUM_THREADS": "04"}, "1"),
    ],
)
def test_a_hybrid_images_threads_follow_the_job(given, threads, tmp_path):
    """A hybrid flavor's image sets its threads per rank as its module does:
    Slurm's cpus per task in a job, else what the user set, else 1, and 1
    for anything but a number (the
    image of gromacs/openblas-mpich once exported OMP_NUM_THREADS={threads})."""
    flavor = next(f for f in stack.load().flavors if f.threads == "openmp" and f.published)
    environment = _definition(flavor).split("%environment\n")[1].split("\n%")[0]
    (tmp_path / "env.sh").write_text(environment + '\nprintf "%s" "$OMP_NUM_THREADS"\n')
    proc = subprocess.run(
        ["sh", str(tmp_path / "env.sh")], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **given}
    )
    assert proc.stdout == threads, f"{flavor.module_name}: OMP_NUM_THREADS={proc.stdout!r} with {given}"
    assert "{threads}" not in environment


def test_an_infiniband_sites_images_run_on_a_desktop(monkeypatch, tmp_path):
    """Images run on desktops, which have no InfiniBand: at a site whose
    fabric is, they get the settings of shared memory and TCP, and a flavor
    whose MPI is built for the fabric (MVAPICH2's mrail) gets no image, with
    the reason."""
    monkeypatch.setenv("ONESTACK_SITE", "example-infiniband")
    impi = stack.load().flavor("hpl/openblas-impi")
    assert ("I_MPI_OFI_PROVIDER", "mlx") in [(s.name, s.value) for s in impi.env]
    environment = _definition(impi).split("%environment\n")[1].split("\n%")[0]
    assert "export I_MPI_OFI_PROVIDER=tcp" in environment and "mlx" not in environment, environment
    ompi = stack.load().flavor("hpl/openblas-openmpi")
    assert "ucx" not in _definition(ompi).split("%environment\n")[1].split("\n%")[0]
    assert not impi.desktop_unfit and not ompi.desktop_unfit
    mvapich2 = stack.load().flavor("hpl/openblas-mvapich2")
    assert "fabrics=mrail" in mvapich2.spack_spec
    assert mvapich2.desktop_unfit.startswith("its MPI, mvapich2, is built for the site's infiniband (fabrics=mrail)")
    with pytest.raises(ImageError, match="which a desktop lacks"):
        images.build(mvapich2, {})
    # `make images` builds the others, and fails only where none is left
    # (its lock in a prefix of the test's own, not a live tree's).
    monkeypatch.setenv("ONESTACK_PREFIX", str(tmp_path))
    monkeypatch.setattr(images.spack, "installed", lambda flavors: (flavors, {}))
    monkeypatch.setattr(images, "build", lambda flavor, roots: flavor.module_name)
    monkeypatch.setattr(images.publish, "current_release", lambda: tmp_path / "release")
    monkeypatch.setattr(images.publish, "release_manifest", lambda release: {"flavors": [impi.module_name]})
    assert images.build_all([impi, mvapich2]) == ["hpl/openblas-impi"]
    with pytest.raises(ImageError, match="they run only on the site's fabric"):
        images.build_all([mvapich2])
    monkeypatch.delenv("ONESTACK_SITE")
    assert not any(f.desktop_unfit for f in stack.load().flavors), "the default site's fabric is a desktop's"


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_definition_quotes_runtime_settings_for_the_shell(text, tmp_path):
    definition = _definition(_hostile_flavor(text.replace("{marker}", str(tmp_path / "m"))))
    environment = definition.split("%environment\n")[1].split("\n%")[0]
    (tmp_path / "env.sh").write_text(environment + '\nprintf "%s" "$ONESTACK_TEST"\n')
    proc = subprocess.run(["sh", str(tmp_path / "env.sh")], capture_output=True)
    assert proc.stdout.decode() == text.replace("{marker}", str(tmp_path / "m"))
    assert not (tmp_path / "m").exists()


def test_a_definition_puts_a_vendor_bin_first_on_the_images_path(tmp_path):
    """Intel MPI's bin/ goes before the PATH Apptainer sets, which stays
    (a quoted '$PATH' once left the image's %test without mktemp)."""
    definition = _definition(stack.load().flavor("qe/openblas-mpich"))
    environment = definition.split("%environment\n")[1].split("\n%")[0]
    (tmp_path / "env.sh").write_text(environment + '\nprintf "%s" "$PATH"\n')
    proc = subprocess.run(
        ["sh", str(tmp_path / "env.sh")], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert proc.stdout == "/v w/bin:/opt/onestack/dispatch/bin:/opt/views/view/bin:/usr/bin:/bin"


def test_a_definition_refuses_a_line_that_would_open_a_section():
    """Apptainer starts a section at any line whose first word begins with
    %, inside quotes or not: such text is refused, never rendered."""
    with pytest.raises(render.Refused, match="opens a section"):
        _definition(_hostile_flavor("first line\n  %post rm -rf /"))
    with pytest.raises(render.Refused, match="opens a section"):
        _definition(stack.load().flavor("qe/openblas-mpich"), help_text="usage\n%runscript")
    with pytest.raises(render.Refused, match="on one line"):
        render.def_line("label\nvalue")


@pytest.mark.parametrize(
    "text, why",
    [
        ("x\nBootstrap: docker\nFrom: alpine", "starts another build stage"),
        ("x\nbootstrap: localimage", "starts another build stage"),
        ("runs {{ n }} steps", "as a build argument"),
    ],
)
def test_a_definition_refuses_what_apptainer_would_read_as_its_own(text, why):
    """Apptainer splits a definition into stages at any line starting with
    `Bootstrap:` (the last stage is the image signed) and fills in
    `{{ name }}` as a build argument, inside quotes or not."""
    with pytest.raises(render.Refused, match=why):
        _definition(_hostile_flavor(text))
    with pytest.raises(render.Refused, match=why):
        _definition(stack.load().flavor("qe/openblas-mpich"), help_text=text)


@pytest.mark.parametrize("base", ["/home/ops#2/.cache/onestack/images/base/bookworm.sif", "/cache/x\\"])
def test_a_header_value_apptainer_would_cut_or_continue_is_refused(base):
    """Apptainer reads `From: /home/ops#2/...` as From: /home/ops."""
    flavor = stack.load().flavor("qe/openblas-mpich")
    with pytest.raises(render.Refused, match="header cuts a value at #"):
        _definition(flavor, base=base)


@pytest.mark.parametrize(
    "path",
    [
        "/home/a b/cache",
        "/srv/it's",
        '/srv/"x"',
        "/srv/c$(touch${IFS}/tmp/p)",
        "/srv/`id`",
        "/srv/$USER",
        "/srv/[ab]",
        "/srv/{a,b}",
    ],
)
def test_a_files_path_apptainer_would_split_or_expand_is_refused(path):
    """Apptainer expands a %files source as a shell word on the build host:
    `$(...)` ran there, `$USER` or a glob copied another tree."""
    with pytest.raises(render.Refused, match="is absolute and may hold letters, digits and . _ / [+] - alone"):
        render.def_path(path)
    assert render.def_path("/home/ops/.cache/onestack/spack-export+2") == "/home/ops/.cache/onestack/spack-export+2"


def test_a_preloaded_library_is_built_beside_its_flavors_and_never_a_module(tmp_path):
    """MKL's CPU-path remedy (components.yaml mkl `preload`): every MKL
    flavor carries it, and the rendered environment builds it once."""
    matrix = stack.load()
    mkl = [f for f in matrix.flavors if f.math == "mkl"]
    assert mkl and all(f.preload and f.preload.package == "onestack-mkl-cpu-path" for f in mkl)
    assert not any(f.preload for f in matrix.flavors if f.math != "mkl")
    config = yaml.safe_load(environment.render([mkl[0], matrix.flavor("qe/openblas-mpich")], tmp_path).read_text())
    assert "onestack-mkl-cpu-path" in config["definitions"][1]["runtimes"]
    assert "onestack-mkl-cpu-path" in config["modules"]["default"]["lmod"]["exclude"]


def test_a_vendor_library_only_an_unavailable_component_uses_is_not_laid_out(tmp_path, monkeypatch):
    """A center without MKL (site.yaml `unavailable`) gets no MKL vendor tree."""
    assert {"intel-oneapi-mkl", "intel-oneapi-mpi", "netlib-lapack"} <= scope.used_packages()
    site = yaml.safe_load((paths.REPO / "sites" / "default" / "site.yaml").read_text())
    site["unavailable"]["math"] = {"mkl": "no MKL licence at this center"}
    # Its default was an MKL flavor: such a center measures its own.
    site["default_flavors"]["hpl"] = {**site["default_flavors"]["hpl"], "flavor": "openblas-mvapich2"}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path))
    used = scope.used_packages()
    assert "intel-oneapi-mkl" not in used and "intel-oneapi-mpi" in used, used


def test_a_vendor_build_tool_is_declared_beside_the_os_one_which_stays_preferred():
    """CMake 3.31 from its wheel for GROMACS 2025 joins the CMake `spack
    external find` detected, which every other build keeps (preferred); set-up
    run again declares it once; a vendor library the OS lacks is the only
    external of its package. What the vendor declared goes again with it."""
    detected = {"externals": [{"spec": "cmake@3.25.1", "prefix": "/usr"}]}
    packages = {"cmake": {"externals": list(detected["externals"])}}
    for _ in range(2):
        for package in ("cmake", "intel-oneapi-mpi"):
            vendor._undeclare(packages, package)
            vendor._declare(packages, package)
    assert [e["spec"] for e in packages["cmake"]["externals"]] == ["cmake@3.25.1", "cmake@3.31.6"]
    assert packages["cmake"]["version"] == ["3.25.1"] and "buildable" not in packages["cmake"]
    assert packages["intel-oneapi-mpi"]["buildable"] is False
    for package in ("cmake", "intel-oneapi-mpi"):
        vendor._undeclare(packages, package)
    assert packages == {"cmake": detected}


def test_a_vendor_build_tool_is_laid_out_where_a_package_built_with_it_is_used():
    assert {"cmake", "py-pympistandard"} <= scope.used_packages()


@pytest.mark.parametrize("host_level", ["v2", "v3", "v4"])
def test_make_test_builds_every_level_on_any_host(host_level, monkeypatch):
    """With the ci_build lists every level build of `levels.ci_build` is
    built whatever the host runs: a v4 build on a Zen 3 too, where its tests
    check its instructions and say it was not run here."""
    monkeypatch.setattr(host, "level", lambda: host_level)
    flavor = next(f for f in stack.load().flavors if f.name in f.app.levels_ci_build)
    built = {level for level, spec in flavor.levels if spec in flavor.specs(ci=True)}
    assert built == {"x86-64-v3", "x86-64-v4"}, f"{flavor.module_name} on a {host_level} host: make test builds {built}"
    assert len(flavor.specs(ci=False)) == 1 + len(flavor.levels)


def test_a_runtime_spack_builds_gets_its_module_from_its_install_prefix():
    """mpi-runtime/openmpi6 (Open MPI 6, built by Spack): its libraries,
    launcher and PATH from the install prefix; a vendor runtime's from its
    layout (setup/vendor.yaml)."""
    runtimes = {r.name: r for r in stack.load().runtimes}
    lib, launcher, env = publish._runtime_layout(runtimes["openmpi6"], {"name": "openmpi-abi", "prefix": "/sw/o6"})
    assert (str(lib), str(launcher)) == ("/sw/o6/lib", "/sw/o6/bin/mpirun")
    assert [(k, str(v)) for k, v in env["prepend"]] == [("PATH", "/sw/o6/bin"), ("LD_LIBRARY_PATH", "/sw/o6/lib")]
    lib, launcher, env = publish._runtime_layout(runtimes["impi"], {"name": "intel-oneapi-mpi", "prefix": "/unused"})
    assert str(launcher).endswith("/vendor/intel-oneapi-mpi/mpi/2021.18/bin/mpiexec.hydra")
    assert ("I_MPI_ROOT", str(lib.parent)) in env["set"]


def test_make_test_leaves_out_the_runtimes_only_make_stack_builds(tmp_path):
    """Open MPI 6 (components.yaml ci_build: false) is a root of the site
    environment for `make stack`, not for `make test`."""
    flavor = stack.load().flavor("hpl/openblas-mpiabi")
    for ci, expected in ((True, False), (False, True)):
        config = yaml.safe_load(environment.render([flavor], tmp_path, ci=ci).read_text())
        assert any(s.startswith("openmpi-abi@") for s in config["definitions"][1]["runtimes"]) is expected, ci


def test_a_site_without_an_mpi_gets_neither_its_runtime_nor_a_translator_onto_it(tmp_path, monkeypatch):
    """Intel MPI and Open MPI unavailable at a site (site.yaml `unavailable`):
    no mpi-runtime/impi, no Open MPI 6, no Wi4MPI onto Open MPI among the
    environment's roots (Spack could build none of them there)."""
    site = yaml.safe_load((paths.REPO / "sites" / "default" / "site.yaml").read_text())
    site["unavailable"]["mpis"] = {name: "not at this center" for name in ("impi", "impi-intel", "openmpi", "openmpi6")}
    site["default_flavors"] = {}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    runtimes = {r.name for r in stack.load().runtimes}
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path))
    left = {r.name for r in stack.load().runtimes}
    assert {"impi", "openmpi6", "openmpi-wi4mpi"} <= runtimes and not left & {"impi", "openmpi6", "openmpi-wi4mpi"}
    config = yaml.safe_load(environment.render(stack.load().select(["hpl/openblas-mpich"]), tmp_path / "s").read_text())
    roots = " ".join(config["definitions"][1]["runtimes"])
    assert not any(package in roots for package in ("intel-oneapi-mpi", "openmpi-abi", "wi4mpi")), roots


def test_spack_is_started_again_only_when_the_lock_or_its_inputs_changed(tmp_path, monkeypatch, request):
    """Concretize and the installed roots ask Spack once; with nothing
    changed they ask it nothing; a lock edited since, or an install, asks
    again."""
    monkeypatch.setenv("ONESTACK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ONESTACK_PREFIX", str(tmp_path / "prefix"))
    # The state of this prefix lives in the checkout (.generated/<key>), and
    # pytest names a tmp_path again once its folder is gone: a lock and its
    # stamps from an earlier run of this test would answer for this one;
    # removed after it too, or each run would leave one in the checkout.
    state = site.state_dir()
    shutil.rmtree(state, ignore_errors=True)
    request.addfinalizer(lambda: shutil.rmtree(state, ignore_errors=True))
    spack.site_scope().mkdir(parents=True)
    (spack.site_scope() / "packages.yaml").write_text("packages: {}\n")
    spack.set_up_mark().write_text("set up\n")
    environment.render(stack.load().select(ci=True), ci=True)
    started = []

    def fake_run(*args, quiet=False, env=None):
        started.append(args[0])
        (site.state_dir() / "spack.lock").write_text(f"solved {len(started)}\n")

    def fake_query(script, *args):
        started.append(script)
        return {} if script == "not_buildable" else {"hpl": {"installed": True}}

    monkeypatch.setattr(spack, "run", fake_run)
    monkeypatch.setattr(spack, "query", fake_query)
    database = tmp_path / "prefix" / "software" / ".spack-db" / "index.json"
    database.parent.mkdir(parents=True)
    database.write_text("{}")
    for _ in range(2):
        spack.concretize()
        assert spack._flavor_roots(["hpl"]) == {"hpl": {"installed": True}}
    assert started == ["not_buildable", "concretize", "flavor_roots"], started
    (site.state_dir() / "spack.lock").write_text("edited\n")
    spack.concretize()
    assert started[3:] == ["concretize"], started
    database.write_text('{"installed": 1}')
    spack._flavor_roots(["hpl"])
    assert started[4:] == ["flavor_roots"], started


def test_the_image_base_takes_the_mirror_from_either_apt_format(tmp_path, monkeypatch):
    """deb822 stanzas (Debian's cloud images, whose URI may be a list of
    mirrors) or one-line entries (its installer's sources.list): Debian's
    entry for this release, deb822 first."""
    monkeypatch.setattr(apt_sources, "APT_SOURCES", tmp_path / "sources.list.d")
    monkeypatch.setattr(apt_sources, "release_codename", lambda: "bookworm")
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "deb [signed-by=/d.gpg] https://docker.invalid/linux/debian bookworm stable\n"
        "deb http://one.invalid/debian-security bookworm-security main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.invalid/debian bookworm main\n"
    )
    assert base.debian_mirror() == ("http://one.invalid/debian", "bookworm")
    # debian-source.sh's deb-src entry takes the keyring too
    assert apt_sources.release_entry().signed_by == "/k.gpg"
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://stanza.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert base.debian_mirror() == ("http://stanza.invalid/debian", "bookworm")
    # The images install Debian's updates and security fixes from the same entries
    updates = [
        ("http://stanza.invalid/debian", "bookworm-updates"),
        ("http://one.invalid/debian-security", "bookworm-security"),
    ]
    assert base.debian_updates() == updates
    apt_sh = render.text(images.CONTAINERS, "apt.sh.j2", components=["main", "non-free"], updates=updates)
    sources = tmp_path / "image-sources.list"
    sources.write_text("deb http://stanza.invalid/debian bookworm main\n")
    lines = [
        line.replace("/etc/apt/sources.list", str(sources)) for line in apt_sh.splitlines() if "sources.list" in line
    ]
    for _ in range(2):  # each stage that installs runs it; a line is added once
        subprocess.run(["sh", "-ec", "\n".join(lines)], check=True)
    assert sources.read_text().splitlines() == [
        "deb http://stanza.invalid/debian bookworm main non-free",
        "deb http://stanza.invalid/debian bookworm-updates main non-free",
        "deb http://one.invalid/debian-security bookworm-security main non-free",
    ]
    (tmp_path / "mirrors.list").write_text("http://listed.invalid/debian\tpriority:1\nhttp://second.invalid/debian\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        f"Types: deb\nURIs: mirror+file://{tmp_path}/mirrors.list\nSuites: bookworm\nComponents: main\n"
    )
    assert base.debian_mirror() == ("http://listed.invalid/debian", "bookworm")


@pytest.mark.parametrize(
    "admin_file, kept",
    [("{root}/releases/r0/init/admin.list", False), ("/etc/lmod/site-admin.list", True), ("", False)],
)
def test_the_init_script_goes_first_and_keeps_the_sites_own_settings(admin_file, kept, tmp_path):
    """Sourcing a release's init script puts its tree first in MODULEPATH
    and LMOD_RC, keeps the site's other entries, drops an earlier release's,
    and leaves the site's own Lmod admin list (an earlier release's, which
    set one of its own, goes)."""
    root = tmp_path / "modules"
    script = tmp_path / "bash"
    render.write(
        publish.TEMPLATES,
        "init-bash.j2",
        script,
        release="r1",
        example="hpl/openblas-mpich",
        lmod_init=tmp_path / "no-lmod",  # never sourced: `module` is defined below
        modulepath=f"{root}/releases/r1/flavors",
        modules_root=root,
        lmodrc=root / "releases" / "r1" / "init" / "lmodrc.lua",
    )
    before = {
        "MODULEPATH": f"/site/modules:{root}/current/flavors",
        "LMOD_RC": f"{root}/releases/r0/init/lmodrc.lua:/site/lmodrc.lua",
        "LMOD_ADMIN_FILE": admin_file.format(root=root),
    }
    shell = 'module() { :; }\nsource "$1"\nprintf "%s\\n" "$MODULEPATH" "$LMOD_RC" "${LMOD_ADMIN_FILE-unset}"'
    ran = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", shell, "bash", str(script)],
        env={"PATH": os.environ["PATH"], **{k: v for k, v in before.items() if v}},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        f"{root}/releases/r1/flavors:/site/modules",
        f"{root}/releases/r1/init/lmodrc.lua:/site/lmodrc.lua",
        before["LMOD_ADMIN_FILE"] if kept else "unset",
    ]
