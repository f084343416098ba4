"""The stack's flavor data: environments/components.yaml (compilers, MPIs,
math libraries) and one environments/<app>.yaml per application.

Everything is validated (JSON schema, then cross-references) before Spack
sees it; an error names the file, the key and what is allowed.
"""

import dataclasses
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import jsonschema
import yaml

from onestack import paths

COMPONENTS_FILE = "components.yaml"
CPUS_FILE = "cpus.yaml"
SCHEMA_FILE = "schema.json"
MATH_INTERFACES = ("blas", "lapack", "scalapack", "fftw-api")


class InputError(ValueError):
    """Bad stack data; str() is the message for the site engineer."""


@dataclass(frozen=True)
class Application:
    file: Path
    module: str
    spack: str
    variants: str
    description: str
    usage: str
    program: str  # the main executable: what its container image runs
    default_flavor: str
    build: tuple
    ci_build: tuple  # the part of build a fresh machine builds for `make test`
    math_uses: tuple  # the math interfaces it links, e.g. ("blas",) for HPL, ("fftw-api",) for LAMMPS
    baselines: tuple = ()  # ((name, entry), ...): what users would pick instead, for the report

    @property
    def package(self) -> str:
        """The Spack package name, e.g. quantum-espresso."""
        return self.spack.split("@")[0].split()[0]


@dataclass(frozen=True)
class Flavor:
    app: Application
    name: str
    compiler: str
    compiler_spec: str
    mpi: str
    mpi_spec: str
    mpi_abi: str
    math: str
    providers: tuple  # ((virtual, package), ...)
    env: tuple  # ((name, value, why), ...): runtime settings of the MPI and math library
    unavailable: tuple  # why a component cannot be had on this machine (empty: it can)
    variants: str = ""  # this flavor's own variants, over the application's
    fat_flags: str = ""  # compiler flags for every CPU generation's code path
    mpi_launcher: str = ""  # the MPI's own launcher, offered as mpirun (empty: the MPI's mpirun)
    reference: bool = False  # the benchmark baseline: built and measured, never published
    native: bool = False  # a twin built for this machine's CPU only: measured, never published

    @property
    def published(self) -> bool:
        """Offered to users as a module (the benchmark-only builds are not)."""
        return not (self.reference or self.native)

    @property
    def module_name(self) -> str:
        """What users load, e.g. qe/openblas-mpich."""
        return f"{self.app.module}/{self.name}"

    @property
    def is_default(self) -> bool:
        return self.name == self.app.default_flavor

    def spack_spec(self) -> str:
        """The abstract Spack spec that builds this flavor."""
        by_package: Dict[str, List[str]] = {}
        for virtual, package in self.providers:
            by_package.setdefault(package, []).append(virtual)
        deps = [f"^[virtuals=mpi] {self.mpi_spec}"] + [
            f"^[virtuals={','.join(virtuals)}] {package}" for package, virtuals in by_package.items()
        ]
        variants = merge_variants(self.app.variants, self.variants)
        if self.fat_flags:
            flags = " ".join(f'{name}="{self.fat_flags}"' for name in ("cflags", "cxxflags", "fflags"))
            variants = merge_variants(variants, flags)
        # Every flavor names its target: the site's oldest CPU generation (a
        # preference alone lets reuse pick an install built for another CPU),
        # or, for the native twin, this machine's (Spack's -march=native).
        # It goes before the %compiler: what follows that constrains the compiler.
        target = "target=" + (paths.host_target() if self.native else cpu_generations()[0]["spack_target"])
        return " ".join(p for p in [self.app.spack, variants, target, f"%{self.compiler_spec}", *deps] if p)

    def projection(self) -> Dict[str, str]:
        """Spack module projection naming this flavor's application module.

        The MPI and compiler are already levels of the Lmod hierarchy, so the
        math library is what tells two flavors apart inside one MPI branch.
        """
        virtual, package = self.providers[0]  # blas for QE and HPL, fftw-api for LAMMPS
        key = f"{self.app.package} ^[virtuals={virtual}] {package}"
        return {key: f"{{name}}/{{version}}-{self.math}"}


def merge_variants(base: str, override: str) -> str:
    """Spack variants of base, each replaced by override's variant of the same
    name; quoted values (fflags="-O2 -g") stay one variant."""
    def name(token: str) -> str:
        return token.lstrip("+~").split("=")[0]

    def quoted(token: str) -> str:
        key, _, value = token.partition("=")
        return f'{key}="{value}"' if " " in value else token

    replaced = {name(t) for t in shlex.split(override)}
    tokens = [t for t in shlex.split(base) if name(t) not in replaced] + shlex.split(override)
    return " ".join(quoted(t) for t in tokens)


def _check_flags(file: Path, key: str, variants: str) -> None:
    """GFortran's -fdefault-real-8 also promotes DOUBLE PRECISION to 16-byte
    quad precision, done in software (libquadmath): 20x slower. Only with
    -fdefault-double-8 beside it does it mean what its users want."""
    if "-fdefault-real-8" in variants and "-fdefault-double-8" not in variants:
        raise InputError(
            f"{_location(file)}: {key}: -fdefault-real-8 without -fdefault-double-8 turns DOUBLE "
            "PRECISION into software quad precision (20x slower); add -fdefault-double-8"
        )


# Flags that make a compiler emit one code path, for one CPU: a fat binary
# asked for by environments/cpus.yaml would silently become a thin one.
SINGLE_PATH_FLAGS = ("-march=", "-mcpu=", "-xHost", "-fast", "-tp=host", "-tp=native")


def _check_single_path(file: Path, key: str, variants: str) -> None:
    found = [flag for flag in SINGLE_PATH_FLAGS if flag in variants]
    if found:
        raise InputError(
            f"{_location(file)}: {key}: {found[0]} builds a single code path (one CPU), where every "
            "flavor is a fat binary for the generations of environments/cpus.yaml; remove it (the "
            "compiler's fat_flags in components.yaml and Spack's target set the paths)"
        )


def _location(file: Path) -> str:
    try:
        return str(file.relative_to(paths.REPO))
    except ValueError:
        return str(file)


def _load_yaml(file: Path) -> dict:
    try:
        data = yaml.safe_load(file.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise InputError(
            f"{_location(file)}: not valid YAML{where}: {getattr(err, 'problem', err)}"
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{_location(file)}: expected a mapping of keys at the top level")
    return data


def _schema_errors(file: Path, data: dict, definition: str) -> None:
    schema = json.loads((Path(__file__).parent.parent / "environments" / SCHEMA_FILE).read_text())
    schema = {**schema, "$ref": f"#/$defs/{definition}"}
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path)
    )
    if not errors:
        return
    lines = [f"{_location(file)}: {len(errors)} problem(s):"]
    for err in errors:
        key = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        message, hint = err.message, ""
        if err.validator == "additionalProperties" and "properties" in err.schema:
            hint = f"; allowed keys: {', '.join(err.schema['properties'])}"
        if err.validator == "oneOf" and all(set(s) == {"required"} for s in err.validator_value):
            # jsonschema would print the whole mapping; name the keys instead.
            message = f"needs exactly one of: {', '.join(k for s in err.validator_value for k in s['required'])}"
        if err.validator == "dependentRequired":
            # jsonschema says "'b' is a dependency of 'a'"; say what to add, and what it is.
            given, needed = next((k, m) for k, ms in err.validator_value.items() if k in err.instance
                                 for m in ms if m not in err.instance)
            message = f"'{given}' needs '{needed}' beside it: {err.schema['properties'][needed]['description']}"
        lines.append(f"  {key}: {message}{hint}")
    raise InputError("\n".join(lines))


def load_data(file: Path, definition: str) -> dict:
    """A YAML file of the stack's data, validated against its schema definition."""
    data = _load_yaml(file)
    _schema_errors(file, data, definition)
    return data


def _check_choice(file: Path, key: str, value: str, allowed, what: str, where: str) -> None:
    if value not in allowed:
        raise InputError(
            f"{_location(file)}: {key}: unknown {what} '{value}'; "
            f"allowed: {', '.join(sorted(allowed)) or '(none)'} ({where})"
        )


def load_components(env_dir: Path) -> dict:
    file = env_dir / COMPONENTS_FILE
    if not file.is_file():
        raise InputError(f"{_location(file)}: missing: it defines the compilers, MPIs and math")
    data = load_data(file, "components")
    return data


def _runtime_env(*components: dict) -> tuple:
    return tuple(
        (name, setting["value"], " ".join(setting["why"].split()))
        for component in components
        for name, setting in component.get("env", {}).items()
    )


def _flavor(file: Path, app: Application, section: str, name: str, entry: dict, components: dict) -> Flavor:
    """One cell of the matrix, checked against the components; section is
    `flavors` (offered to users) or `reference` (the benchmark baseline)."""
    key = f"{section}.{name}"
    where = f"defined in {_location(file.parent / COMPONENTS_FILE)}"
    _check_flags(file, f"{key}.variants", merge_variants(app.variants, entry.get("variants", "")))
    _check_single_path(file, f"{key}.variants", entry.get("variants", ""))
    _check_choice(file, f"{key}.compiler", entry["compiler"], components["compilers"], "compiler", where)
    _check_choice(file, f"{key}.mpi", entry["mpi"], components["mpis"], "MPI", where)
    _check_choice(file, f"{key}.math", entry["math"], components["math"], "math library", where)
    mpi, math = components["mpis"][entry["mpi"]], components["math"][entry["math"]]
    reference = section == "reference"
    if math.get("reference_only", False) != reference:
        raise InputError(
            f"{_location(file)}: {key}.math: '{entry['math']}' is "
            + ("a reference library (reference_only in components.yaml): 1.6x-5x slower and unstable "
               "in the site's measurements, so it may only be the application's `reference`"
               if not reference else
               "a production library; the reference is the baseline the report compares "
               "flavors against, so it takes a reference_only library (e.g. netlib)")
        )
    return Flavor(
        app=app,
        name=name,
        compiler=entry["compiler"],
        compiler_spec=components["compilers"][entry["compiler"]]["spec"],
        mpi=entry["mpi"],
        mpi_spec=mpi["spec"],
        mpi_abi=mpi["abi"],
        math=entry["math"],
        # Only what the application links: Spack refuses a provider of a
        # virtual the package does not depend on.
        providers=tuple((virtual, package) for virtual, package in math["providers"].items()
                        if virtual in app.math_uses),
        env=_runtime_env(mpi, math),
        unavailable=tuple(
            component["unavailable"]
            for component in (components["compilers"][entry["compiler"]], mpi, math)
            if "unavailable" in component
        ),
        variants=entry.get("variants", ""),
        fat_flags=_fat_flags(components["compilers"][entry["compiler"]], file.parent),
        mpi_launcher=mpi.get("launcher", ""),
        reference=reference,
    )


def _load_application(file: Path, components: dict) -> List[Flavor]:
    data = load_data(file, "application")
    app = Application(
        file=file,
        module=data["module"],
        spack=data["spack"],
        variants=data.get("variants", ""),
        description=data["description"],
        usage=data["usage"],
        program=data["program"],
        default_flavor=data["default_flavor"],
        build=tuple(data["build"]),
        ci_build=tuple(data["ci_build"]),
        math_uses=tuple(data.get("math_uses", MATH_INTERFACES)),
        baselines=tuple(data.get("baselines", {}).items()),
    )
    names = data["flavors"]
    if app.module == app.package:
        # Spack's own module of the package sits in the Lmod hierarchy under
        # that name; a flavor module of the same name makes Lmod recurse.
        raise InputError(f"{_location(file)}: module: '{app.module}' is the Spack package's own "
                         f"module name; pick another (e.g. qe for quantum-espresso)")
    _check_flags(file, "variants", app.variants)
    _check_single_path(file, "variants", app.variants)
    _check_choice(file, "default_flavor", app.default_flavor, names, "flavor", "keys of flavors")
    for i, name in enumerate(app.build):
        _check_choice(file, f"build[{i}]", name, names, "flavor", "keys of flavors")
    flavors = [_flavor(file, app, "flavors", name, entry, components) for name, entry in names.items()]
    flavors += [_flavor(file, app, "reference", name, entry, components)
                for name, entry in data.get("reference", {}).items()]
    if "native_twin" in data:
        _check_choice(file, "native_twin", data["native_twin"], app.build, "flavor", "it must be in build")
        twin = next(f for f in flavors if f.name == data["native_twin"])
        flavors.append(dataclasses.replace(twin, name=f"{twin.name}-native", native=True))
    # The reference and the native twin are built for `make test` only where
    # ci_build names them: a QE twin is 20 min of CI's 90.
    measured_only = [f.name for f in flavors if not f.published]
    for i, name in enumerate(app.ci_build):
        _check_choice(file, f"ci_build[{i}]", name, list(app.build) + measured_only, "flavor",
                      "it must be in build, or be the reference or the native twin")
    for i, name in enumerate(app.build):
        reasons = next(f.unavailable for f in flavors if f.name == name)
        if reasons:
            raise InputError(f"{_location(file)}: build[{i}]: flavor '{name}' cannot be built on this "
                             f"machine: {'; '.join(reasons)} (remove it from build, or the "
                             f"`unavailable` line in {COMPONENTS_FILE} if it can be had)")
    return flavors


def load(env_dir: Optional[Path] = None) -> List[Flavor]:
    """Every flavor of every application, validated."""
    env_dir = env_dir or paths.environments_dir()
    components = load_components(env_dir)
    flavors: List[Flavor] = []
    modules: Dict[str, Path] = {}
    for file in sorted(env_dir.glob("*.yaml")):
        if file.name in (COMPONENTS_FILE, CPUS_FILE):
            continue
        app_flavors = _load_application(file, components)
        module = app_flavors[0].app.module
        if module in modules:
            raise InputError(
                f"{_location(file)}: module: '{module}' is already the module of "
                f"{_location(modules[module])}; each application needs its own name"
            )
        modules[module] = file
        flavors.extend(app_flavors)
    if not flavors:
        raise InputError(f"{_location(env_dir)}: no application files (<app>.yaml) found")
    return flavors


def cpu_generations(env_dir: Optional[Path] = None) -> List[dict]:
    """The site's CPU generations, oldest (the build baseline) first."""
    file = (env_dir or paths.environments_dir()) / CPUS_FILE
    data = load_data(file, "cpus")
    return data["generations"]


def intel_ax_flag(generations: List[dict]) -> str:
    """Intel's automatic CPU dispatch over every generation, newest first
    (-ax with only some of them yields those paths plus a generic one)."""
    return "-ax" + ",".join(g["intel_ax"] for g in reversed(generations))


def _fat_flags(compiler: dict, env_dir: Path) -> str:
    """A compiler's fat_flags with the site's CPU generations filled in."""
    if "fat_flags" not in compiler:
        return ""
    generations = cpu_generations(env_dir)
    return compiler["fat_flags"].format(intel_ax=intel_ax_flag(generations), nvhpc_tp=generations[0]["nvhpc_tp"])


def select(flavors: List[Flavor], wanted: Optional[List[str]] = None, ci: bool = False) -> List[Flavor]:
    """The flavors to build: those named (app/flavor), else each app's `build`
    list and the measured-only builds (with ci: the `ci_build` list)."""
    if not wanted:
        if ci:
            return [f for f in flavors if f.name in f.app.ci_build]
        return [f for f in flavors if not f.published or f.name in f.app.build]
    by_name = {f.module_name: f for f in flavors}
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise InputError(
            f"unknown flavor(s) {', '.join(unknown)}; the flavors defined in "
            f"{_location(paths.environments_dir())}/ are: {', '.join(sorted(by_name))}"
        )
    return [by_name[w] for w in wanted]


@dataclass(frozen=True)
class Runtime:
    """An MPI offered as a runtime for the other members of its ABI family."""

    name: str
    spec: str
    abi: str
    env: tuple

    @property
    def module_name(self) -> str:
        return f"mpi-runtime/{self.name}"


def runtimes(env_dir: Optional[Path] = None) -> List[Runtime]:
    components = load_components(env_dir or paths.environments_dir())
    return [
        Runtime(name, mpi["spec"], mpi["abi"], _runtime_env(mpi))
        for name, mpi in components["mpis"].items()
        if mpi.get("runtime")
    ]


def render(selected: List[Flavor], out_dir: Optional[Path] = None) -> Path:
    """Write the Spack config for the selected flavors (included by spack.yaml)."""
    out_dir = out_dir or paths.generated_dir()
    projections: Dict[str, str] = {}
    for flavor in selected:
        projections.update(flavor.projection())
    # The benchmark baseline is built, never offered: no module of it either.
    hidden = [f"{f.app.package} target={paths.host_target()}" if f.native else next(iter(f.projection()))
              for f in selected if not f.published]
    config = {
        "definitions": [{"flavors": [f.spack_spec() for f in selected]},
                        {"runtimes": [r.spec for r in runtimes()]}],
        "modules": {"default": {"lmod": {"projections": projections, "exclude": hidden}}},
        # The oldest CPU generation of the site is every package's target.
        "packages": {"all": {"target": [cpu_generations()[0]["spack_target"]]}},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / "flavors.yaml"
    tmp = out.with_suffix(".tmp")
    header = "# Generated by `onestack render` from environments/*.yaml: do not edit.\n"
    tmp.write_text(header + yaml.safe_dump(config, sort_keys=False, width=200))
    tmp.replace(out)
    return out
