"""The stack's flavors: environments/components.yaml (compilers, MPIs, math
libraries) and one environments/<app>.yaml per application, with the
selected site's facts (what it cannot have, its fabric, its defaults).

Everything is validated (schemas/, then the cross-references below) before
Spack sees it; an error names the file, the key and what is allowed. A
Flavor is a complete value, computed once: its Spack spec, runtime settings
and whether the site can build it.
"""

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

from onestack import data, host, paths, render
from onestack.stack import cpus
from onestack.stack.site import Site

COMPONENTS_FILE = "components.yaml"
InputError = data.InputError
NATIVE_SUFFIX = "-native"  # a native twin's name is its flavor's and this
RUNTIME_MODULE = "mpi-runtime"  # the MPI runtimes' modules (Runtime.module_name): reserved, no application's


@dataclass(frozen=True)
class Setting:
    """An environment variable a module sets, with the reason shown to users."""

    name: str
    value: str
    why: str
    # A hybrid flavor's value at one thread a rank: the MPI-only flavors' (hydra's
    # core:1 is its core), so that flavors loaded together agree on it.
    single: str = ""
    # An MPI-only value's hybrid one ({threads} in it): what a runtime module
    # sets instead over a hybrid flavor of more than one thread a rank.
    hybrid: str = ""


@dataclass(frozen=True)
class Preload:
    """A library of the stack the flavor's programs load before any other
    (LD_PRELOAD): a Spack package of packages/, built beside the flavors."""

    package: str
    library: str  # the file in the package's lib/
    why: str

    def path(self, prefix: str) -> str:
        return f"{prefix}/lib/{self.library}"


@dataclass(frozen=True)
class Application:
    file: Path
    module: str
    spack: str
    variants: str
    description: str
    usage: str
    program: str  # the main executable: what its container image runs
    default_flavor: str  # the site's measured default, else the stack's
    build: Tuple[str, ...]
    ci_build: Tuple[str, ...]  # the part of build a fresh machine builds for `make test`
    math_uses: Tuple[str, ...]  # the math interfaces it links, e.g. ("blas",) for HPL
    baselines: Tuple[Tuple[str, dict], ...] = ()  # what users would pick instead, for the report
    cpu_checked_code: Tuple[str, ...] = ()  # functions run only after asking the CPU (level checks skip them)
    levels_build: Tuple[str, ...] = ()  # flavors built for each newer x86-64 level too (make stack)
    levels_ci_build: Tuple[str, ...] = ()  # the part of those a fresh machine's `make test` builds
    accelerators: Tuple[Tuple[str, dict], ...] = ()  # (name, {args, variant, what}) of its accelerated styles
    lower_level_on: Tuple[Tuple[str, str], ...] = ()  # (cpu class of cpus.yaml, the level its builds stop at there)

    @property
    def package(self) -> str:
        """The Spack package name, e.g. quantum-espresso."""
        return package_name(self.spack)

    @property
    def version(self) -> str:
        """The version users load (qe/<flavor>/<version>): the Spack spec's."""
        return self.spack.split("@")[1]


@dataclass(frozen=True)
class Flavor:
    app: Application
    name: str
    compiler: str
    mpi: str
    mpi_abi: str
    math: str
    spack_spec: str  # the abstract Spack spec that builds it
    providers: Tuple[Tuple[str, str], ...]  # (virtual, package) of what the application links
    env: Tuple[Setting, ...]  # runtime settings of its MPI (on the site's fabric) and math library
    unavailable: Tuple[str, ...] = ()  # why the site cannot build it (empty: it can)
    fat_flags: str = ""  # compiler flags for every CPU generation's code path
    mpi_launcher: str = ""  # the MPI's own launcher, offered as mpirun (empty: the MPI's mpirun)
    kind: str = "flavor"  # flavor (offered), reference (benchmark baseline) or native (twin)
    # (dispatcher level name, Spack spec) of its builds for the newer x86-64
    # levels, when the application lists it under `levels`
    levels: Tuple[Tuple[str, str], ...] = ()
    preload: Optional[Preload] = None  # its math library's (components.yaml `preload`)
    threads: str = "none"  # none (MPI ranks only) or openmp (hybrid MPI+OpenMP)
    variants: str = ""  # its own Spack variants (the flavor's `variants`)
    own_usage: str = ""  # how to run it, where not as its application
    # Its settings in an image, on a desktop (DESKTOP_FABRIC), and why its
    # build cannot run there ("": it can), where the site's fabric is a build
    # choice of its MPI (MVAPICH2's mrail needs InfiniBand)
    desktop_env: Tuple[Setting, ...] = ()
    desktop_unfit: str = ""
    # The version `<app>/<flavor>` loads, among the flavor's versions (one
    # application file each): the site's default version, else the newest.
    default_version: bool = True

    @property
    def usage(self) -> str:
        """How to run it, shown by `module help`."""
        return self.own_usage or self.app.usage

    @property
    def published(self) -> bool:
        """Offered to users as a module (the benchmark-only builds are not)."""
        return self.kind == "flavor"

    @property
    def reference(self) -> bool:
        return self.kind == "reference"

    @property
    def native(self) -> bool:
        return self.kind == "native"

    @property
    def hybrid(self) -> bool:
        """MPI ranks with threads (`threads` other than none)."""
        return self.threads != "none"

    @property
    def module_name(self) -> str:
        """The shortest module name that loads it, and the stack's name for it:
        qe/openblas-mpich for the version that name loads (default_version),
        with the version for the others (lmp/openblas-mpich-omp/20210929.2)."""
        return self.unversioned_name if self.default_version else self.versioned_name

    @property
    def unversioned_name(self) -> str:
        """The flavor without its version (qe/openblas-mpich): the name job
        scripts use, which loads the default version of those published."""
        return f"{self.app.module}/{self.name}"

    @property
    def versioned_name(self) -> str:
        """The module with its version, e.g. qe/openblas-mpich/6.7.0."""
        return f"{self.app.module}/{self.name}/{self.app.version}"

    @property
    def accelerators(self) -> Dict[str, str]:
        """The arguments of each accelerated style it was built with, by name."""
        built = self.spack_spec.split()
        return {name: how["args"] for name, how in self.app.accelerators if how["variant"] in built}

    @property
    def flavor_name(self) -> str:
        """The flavor it is or measures: a native twin's is its fat flavor's."""
        return self.name.removesuffix(NATIVE_SUFFIX) if self.native else self.name

    @property
    def twin_of(self) -> str:
        """A native twin's fat flavor, by its module name (a twin is versioned as its flavor is)."""
        return replace(self, name=self.flavor_name, kind="flavor").module_name

    @property
    def is_default(self) -> bool:
        """What `module load <app>` loads: the default flavor's default version."""
        return self.name == self.app.default_flavor and self.default_version

    def specs(self, ci: bool = False) -> List[str]:
        """What Spack builds for it: its spec, and its level builds where the
        application's `levels` lists it (`levels.ci_build` with ci, for
        `make test`). Every level builds on any host: one the host cannot
        run is checked by its instructions and reported as built, not run
        here (tests/test_fat_binaries.py)."""
        listed = self.app.levels_ci_build if ci else self.app.levels_build
        return [self.spack_spec] + ([spec for _, spec in self.levels] if self.name in listed else [])

    def projection(self) -> Dict[str, str]:
        """Spack module projection naming this flavor's application module.

        The MPI and compiler are already levels of the Lmod hierarchy, so the
        math library is what tells two flavors apart inside one MPI branch,
        and a flavor's own variants (e.g. a hybrid flavor's +openmp) one of
        the same math library from another: its key names them, and the
        environment puts such keys first (Spack takes the first that matches).
        """
        virtual, package = self.providers[0]  # blas for QE and HPL, fftw-api for LAMMPS
        # The flavor module loads this one: where the flavors take the
        # package's own name (gromacs), Spack's module of the package steps
        # aside (gromacs-build), or Lmod would unload one for the other.
        name = "{name}-build" if self.app.module == self.app.package else "{name}"
        if self.variants:
            key = f"{self.app.package} {self.variants} ^[virtuals={virtual}] {package}"
            return {key: f"{name}/{{version}}-{self.name}"}
        return {f"{self.app.package} ^[virtuals={virtual}] {package}": f"{name}/{{version}}-{self.math}"}


@dataclass(frozen=True)
class Runtime:
    """An MPI offered as a runtime for the builds of the ABIs it serves (its
    own family's, and the MPI-5 standard ABI where it implements it)."""

    name: str
    spec: str
    abi: str
    env: Tuple[Setting, ...]
    serves: Tuple[str, ...] = ()
    # A translation layer's (components.yaml `translators`): the MPI of mpis
    # whose launcher starts its jobs, what each rank loads first and that
    # launcher's option it goes through, and the folders of its own prefix
    # first on LD_LIBRARY_PATH.
    to: str = ""
    preload: Tuple[str, ...] = ()
    rank_env_option: str = ""
    library_path: Tuple[str, ...] = ()
    # Built by `make test` too (components.yaml `ci_build`), else only where
    # `make stack` built it: its module is published where it is installed.
    ci_build: bool = True

    @property
    def module_name(self) -> str:
        return f"{RUNTIME_MODULE}/{self.name}"

    @property
    def translator(self) -> bool:
        return bool(self.to)

    def preload_paths(self, prefix: Path) -> List[str]:
        """What a translator's processes load first: its own libraries by
        path, the target MPI's by name (found on the loader's path)."""
        return [str(prefix / p) if "/" in p else p for p in self.preload]

    def library_dirs(self, prefix: Path) -> List[str]:
        return [str(prefix / folder) for folder in self.library_path]


@dataclass(frozen=True)
class Matrix:
    """Every flavor of every application, and the MPI runtimes, for one site."""

    site: Site
    flavors: Tuple[Flavor, ...]
    runtimes: Tuple[Runtime, ...]
    components: dict = field(repr=False)

    def select(self, wanted: Optional[List[str]] = None, ci: bool = False) -> List[Flavor]:
        """The flavors to build: those named (app/flavor), else each app's
        `build` list and the measured-only builds (with ci: `ci_build`),
        leaving out what the site cannot have."""
        if not wanted:
            chosen = [
                f
                for f in self.flavors
                if f.name in (f.app.ci_build if ci else f.app.build) or (not ci and not f.published)
            ]
            return [f for f in chosen if not f.unavailable]
        by_name = {**{f.versioned_name: f for f in self.flavors}, **{f.module_name: f for f in self.flavors}}
        unknown = [w for w in wanted if w not in by_name]
        if unknown:
            names = {f.module_name for f in self.flavors}
            raise InputError(f"unknown flavor(s) {', '.join(unknown)}; {_known_like(unknown, names)}")
        return [by_name[w] for w in wanted]

    def flavor(self, module_name: str) -> Flavor:
        return self.select([module_name])[0]

    def mpi_spec(self, name: str) -> str:
        """The Spack spec of an MPI of components.yaml on the site's fabric."""
        return _mpi_spec(self.components["mpis"][name], self.site.fabric)

    def mpi_env(self, name: str) -> Tuple[Setting, ...]:
        """The settings of an MPI of components.yaml on the site's fabric, the site's own over them."""
        return _mpi_settings(self.components["mpis"][name], self.site.fabric, self.site.mpi_settings.get(name, {}))


# The exec-time dispatcher in front of every flavor's programs: built for
# plain x86-64, so that it can refuse a CPU below the baseline itself.
DISPATCHER = "onestack-dispatch target=x86_64"


def _known_like(unknown: List[str], known) -> str:
    """The flavors of the applications named, else the applications: the
    whole list is thousands of characters."""
    apps = sorted({name.split("/")[0] for name in known})
    named = {w.split("/")[0] for w in unknown} & set(apps)
    where = "(environments/; `make flavors` shows every one, its versions and what it is built with)"
    if not named:
        return f"the applications are {', '.join(apps)} {where}"
    return (
        f"the flavors of {', '.join(sorted(named))}: "
        + ", ".join(sorted(k for k in known if k.split("/")[0] in named))
        + f" {where}"
    )


def preload_packages(selected: List[Flavor]) -> List[str]:
    """The libraries the selected flavors preload (components.yaml
    `preload`): built beside them, never offered as modules of their own."""
    return sorted({f.preload.package for f in selected if f.preload})


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
            f"{data.location(file)}: {key}: -fdefault-real-8 without -fdefault-double-8 turns DOUBLE "
            "PRECISION into software quad precision (20x slower); add -fdefault-double-8"
        )


# Flags that make a compiler emit one code path, for one CPU: a fat binary
# asked for by environments/cpus.yaml would silently become a thin one. GCC's
# and Clang's target and instruction-set flags, Intel's -x<code> (-ax is the
# fat one), -fast, and NVHPC's -tp (its fat form comes from fat_flags).
SINGLE_PATH_FLAGS = re.compile(
    r"""(?<![^\s="'])(-march=|-mcpu=|-m(avx|fma|sse[34]|ssse3|bmi|f16c|popcnt|lzcnt|movbe|amx)"""
    r"""|-x(host|core-avx|common-avx|[a-z]*-?avx|sse|atom)|-fast(?![^\s"'])|-tp[= ])[^\s"']*""",
    re.IGNORECASE,
)


# A variant word: +name, ~name or name=value, the value of the characters
# Spack reads in an unquoted value, and spaces (shlex has taken the quotes
# off such a value; merge_variants quotes it again). Not a variant,
# and so refused where the data gives variants: a dependency (^), a compiler
# (%), a version (@), or an architecture word, which are the stack's to set
# (the baseline target, a level's, the twin's): each would attach the
# flavor's own target and compiler to another spec, or replace them.
VARIANT = re.compile(r"[+~]?[A-Za-z0-9_][A-Za-z0-9_-]*(=[A-Za-z0-9_+*.,:=%^~/ -]+)?")
ARCHITECTURE = {"target", "os", "arch", "platform", "namespace"}
# What starts a spec of components.yaml: a package, and a version of it.
PACKAGE_AT_VERSION = re.compile(r"[a-z0-9][a-z0-9-]*(@[A-Za-z0-9_.-]+)?")


def _check_variants(file: Path, key: str, variants: str) -> None:
    """Variants Spack can parse as words, none of them a single-path flag."""
    _check_variant_words(file, key, _words(file, key, variants))
    _check_single_path(file, key, variants)


def _check_single_path(file: Path, key: str, text: str) -> None:
    found = [match.group(0) for match in SINGLE_PATH_FLAGS.finditer(text)]
    if found:
        raise InputError(
            f"{data.location(file)}: {key}: {found[0]} builds a single code path (one CPU), where every "
            "flavor is a fat binary for the site's CPU generations (cpu_generations); remove it (Spack's "
            "target and the placeholders of the compilers' fat_flags, filled in from cpus.yaml, set the paths)"
        )


def _words(file: Path, key: str, text: str) -> List[str]:
    """The words of a spec's or variants' text, as checked. A backslash or a
    single quote is refused: shlex and Spack's spec parser read them
    differently (`netmod=ucx\\ ^zlib-ng` is one checked word here, and to
    Spack a variant then a dependency), and the text goes into Spack's spec
    as written."""
    odd = next((c for c in "\\'" if c in text), None)
    if odd:
        raise InputError(
            f"{data.location(file)}: {key}: {text!r} holds {odd!r}, which Spack's spec reads otherwise than "
            'shell words; quote a value with spaces in double quotes, e.g. fflags="-O2 -g"'
        )
    try:
        return shlex.split(text)
    except ValueError as err:
        raise InputError(
            f'{data.location(file)}: {key}: {err} in {text!r}; quote a value with spaces whole, e.g. fflags="-O2 -g"'
        ) from None


def _check_variant_words(file: Path, key: str, words: List[str]) -> None:
    odd = [w for w in words if not VARIANT.fullmatch(w) or w.partition("=")[0] in ARCHITECTURE]
    if odd:
        raise InputError(
            f"{data.location(file)}: {key}: {odd[0]!r} is not a variant (+name, ~name or name=value, "
            "a value on one line); a dependency (^), compiler (%), version (@) or target is the "
            "stack's to set: remove it"
        )


def _check_spec(file: Path, key: str, spec: str) -> None:
    """A spec of components.yaml: package@version, then variants only."""
    words = _words(file, key, spec)
    if not words or not PACKAGE_AT_VERSION.fullmatch(words[0]):
        raise InputError(
            f"{data.location(file)}: {key}: {spec!r} must start with a package and its version "
            "(e.g. mpich@4.0.2), then variants"
        )
    _check_variant_words(file, key, words[1:])
    _check_single_path(file, key, spec)


def _check_compiler_version(file: Path, name: str, spec: str) -> None:
    """A compiler names its version: flavors are built with `%name@version`,
    and the native twin's target is the one archspec says that version of
    the compiler can build for (host.twin_target). An MPI may leave it to
    its external."""
    if "@" not in spec.split()[0]:
        raise InputError(
            f"{data.location(file)}: compilers.{name}.spec: {spec!r} names no version; write the "
            f"one the site builds with: {spec.split()[0]}@<version>"
        )


def _check_no_quote_inside(file: Path, key: str, text: str) -> None:
    """A value is written into the Spack spec in double quotes (merge_variants):
    one inside it would end the value there and let the rest be read as more
    of the spec (another dependency, another variant)."""
    if '"' in text:
        raise InputError(
            f"{data.location(file)}: {key}: {text!r} holds a double quote, which would end the "
            "value inside Spack's spec; a flag value takes none"
        )


def check_choice(file: Path, key: str, value: str, allowed, what: str, where: str) -> None:
    if value not in allowed:
        raise InputError(
            f"{data.location(file)}: {key}: unknown {what} '{value}'; "
            f"allowed: {', '.join(sorted(allowed)) or '(none)'} ({where})"
        )


def _settings(*envs: dict, hybrid: bool = False) -> Tuple[Setting, ...]:
    """The settings of envs, a later env's replacing an earlier one's of the
    same name; in a hybrid flavor each takes its `hybrid` value where it has one."""
    chosen = {
        name: Setting(
            name,
            s.get("hybrid", s["value"]) if hybrid else s["value"],
            " ".join(s["why"].split()),
            s["value"] if hybrid else "",
            "" if hybrid else s.get("hybrid", ""),
        )
        for env in envs
        for name, s in env.items()
    }
    return tuple(chosen.values())


def _mpi_settings(mpi: dict, fabric: str, site_env: dict) -> Tuple[Setting, ...]:
    """An MPI's settings of components.yaml, its fabric's over its own, the site's over both."""
    return _settings(mpi["env"], mpi["fabrics"][fabric]["env"], site_env)


def _preload(math: dict) -> Optional[Preload]:
    if "preload" not in math:
        return None
    entry = math["preload"]
    return Preload(entry["package"], entry["library"], " ".join(entry["why"].split()))


def _check_components(file: Path, components: dict, site: Site) -> None:
    """Each MPI says how it runs on every fabric, the desktop's among them;
    the site names known ones."""
    fabrics = components["fabrics"]
    if DESKTOP_FABRIC not in fabrics:
        raise InputError(
            f"{data.location(file)}: fabrics: the desktop fabric `{DESKTOP_FABRIC}` is missing; every flavor's "
            "image runs on it (a desktop's shared memory and Ethernet), whatever the site's fabric: add it back, "
            "with each MPI's entry for it"
        )
    for name, mpi in components["mpis"].items():
        missing = [f for f in fabrics if f not in mpi["fabrics"]]
        if missing:
            raise InputError(
                f"{data.location(file)}: mpis.{name}.fabrics: no entry for {', '.join(missing)}; "
                f"every MPI says how it runs on each of fabrics ({', '.join(fabrics)})"
            )
    check_choice(site.file, "fabric", site.fabric, fabrics, "fabric", f"fabrics of {data.location(file)}")
    for name, translator in components["translators"].items():
        check_choice(file, f"translators.{name}.to", translator["to"], components["mpis"], "MPI", "keys of mpis")
        if "rank_env_option" not in components["mpis"][translator["to"]]:
            raise InputError(
                f"{data.location(file)}: translators.{name}.to: {translator['to']} has no rank_env_option, its"
                f" launcher's option that sets a variable in the ranks, which the translator's preload goes"
                f" through; add mpis.{translator['to']}.rank_env_option (Open MPI's mpirun: -x)"
            )
    for name in site.mpi_settings:
        check_choice(
            site.file, f"mpi_settings.{name}", name, components["mpis"], "MPI", f"mpis of {data.location(file)}"
        )
    for kind, names in site.unavailable.items():
        for name in names:
            check_choice(
                site.file,
                f"unavailable.{kind}.{name}",
                name,
                components[kind],
                kind.rstrip("s"),
                f"{kind} of {data.location(file)}",
            )
    _check_site_compilers(file, site, components["compilers"])
    for kind in ("compilers", "mpis", "translators"):
        for name, entry in components[kind].items():
            _check_spec(file, f"{kind}.{name}.spec", entry["spec"])
    for name, compiler in components["compilers"].items():
        _check_compiler_version(file, name, compiler["spec"])
    for name, mpi in components["mpis"].items():
        for fabric, how in mpi["fabrics"].items():
            _check_variants(file, f"mpis.{name}.fabrics.{fabric}.variants", how.get("variants", ""))
    for name, compiler in components["compilers"].items():
        _check_fat_flags(file, name, compiler["fat_flags"])
        if site.why_unavailable("compilers", name) and "site_external" not in compiler:
            raise InputError(
                f"{data.location(site.file)}: unavailable.compilers.{name}: {data.location(file)} declares "
                f"{name} without a site_external, so its flavors cannot be concretized where it is absent "
                "(Spack 1.x concretizes only against an installed or external compiler). The OS's compiler "
                f"(no site_external) every site has: take it out of unavailable here; a vendor's compiler a "
                f"site may lack needs compilers.{name}.site_external there (where a site that has it has it)"
            )
    site_blocks = [(f"mpi_settings.{name}", env) for name, env in site.mpi_settings.items()]
    translators = [(f"translators.{n}.env", t.get("env", {})) for n, t in components["translators"].items()]
    blocks = [*_env_blocks(components), ("hybrid.env", components["hybrid"]["env"]), *translators]
    _check_threads_placeholder(file, [*_env_blocks(components), *translators])
    _check_threads_placeholder(site.file, site_blocks)
    _check_placeholders(file, blocks)
    _check_placeholders(site.file, site_blocks)
    for key, env in blocks:
        for name, setting in env.items():
            for which in ("value", "hybrid"):
                if which in setting:
                    _check_definition_text(file, f"{key}.{name}.{which}", setting[which])


def _check_definition_text(file: Path, key: str, text: str) -> None:
    """Text a flavor's image carries (its %help, %environment), refused when
    the data loads rather than by `make images` after the builds."""
    try:
        render.def_lines(text)
    except render.Refused as err:
        raise InputError(
            f"{data.location(file)}: {key}: {err}; reword it (an image's definition file holds it)"
        ) from None


# A compiler flag, filled in: it lands in Spack's spec, the modules' help and
# the images' labels, so only what a flag needs (a brace would read as an
# Apptainer build argument there).
FLAG = re.compile(r"-[A-Za-z0-9_+.,:=/-]*")


def _check_fat_flags(file: Path, compiler: str, template: str) -> None:
    key = f"compilers.{compiler}.fat_flags"
    _check_no_quote_inside(file, key, template)
    try:
        filled = cpus.fat_flags(template)
    except InputError:
        raise  # environments/cpus.yaml's own, with its file and key
    except (KeyError, IndexError, ValueError) as err:
        raise InputError(
            f"{data.location(file)}: {key}: cannot fill in {template!r} ({err}); "
            "its placeholders are {intel_ax} and {nvhpc_tp}, and a literal brace is written twice"
        ) from None
    # A word with a placeholder is the stack's own flag for the site's generations (-tp={nvhpc_tp}).
    _check_single_path(file, key, " ".join(w for w in template.split() if "{" not in w))
    odd = [word for word in filled.split() if not FLAG.fullmatch(word)]
    if odd:
        raise InputError(
            f"{data.location(file)}: {key}: {odd[0]!r} is not a compiler flag (a dash, then letters, "
            "digits and _ + . , : = / -)"
        )


def _env_blocks(components: dict):
    """(key, env) of every runtime_env of components.yaml."""
    for name, mpi in components["mpis"].items():
        yield f"mpis.{name}.env", mpi["env"]
        for fabric, how in mpi["fabrics"].items():
            yield f"mpis.{name}.fabrics.{fabric}.env", how["env"]
    for name, math in components["math"].items():
        yield f"math.{name}.env", math["env"]


def _check_site_compilers(file: Path, site, compilers: dict) -> None:
    """A site's `compilers` names a compiler of components.yaml declared
    outside the OS (with a site_external), which the site has."""
    declared = {name: c for name, c in compilers.items() if "site_external" in c}
    for name in site.compilers:
        key = f"compilers.{name}"
        where = f"compilers of {data.location(file)} with a site_external"
        check_choice(site.file, key, name, declared, "compiler", where)
        if site.why_unavailable("compilers", name):
            raise InputError(
                f"{data.location(site.file)}: {key}: the site lists the compiler under "
                f"unavailable.compilers too: delete one of the two"
            )
        # Spack's exact-version spelling (@=2021.10.0) is the same version.
        specs = (site.compilers[name]["spec"], declared[name]["spec"])
        given, wanted = (spec.split()[0].replace("@=", "@") for spec in specs)
        if given != wanted:
            raise InputError(
                f"{data.location(site.file)}: {key}.spec: {given} is not the compiler the flavors are built "
                f"with, {wanted} (compilers.{name}.spec of {data.location(file)}); declare that one here, "
                f"or leave {name} out of compilers and put it under unavailable.compilers"
            )


def _check_threads_placeholder(file: Path, blocks: Iterable[Tuple[str, dict]]) -> None:
    """{threads} is known in hybrid values only: an MPI-only flavor would
    get the placeholder itself as its value."""
    for key, env in blocks:
        for name, setting in env.items():
            if render.THREADS in setting["value"]:
                raise InputError(
                    f"{data.location(file)}: {key}.{name}.value: {render.THREADS} is the threads per rank of a "
                    f"hybrid flavor; put it in `hybrid:` beside `value:` (MPI-only flavors take `value`)"
                )


def _check_placeholders(file: Path, blocks: Iterable[Tuple[str, dict]]) -> None:
    """{threads} is the one placeholder of a setting: a misspelt one
    ({thread}) would reach the modules and images as it stands."""
    for key, env in blocks:
        for name, setting in env.items():
            for which in ("value", "hybrid"):
                rest = setting.get(which, "").replace(render.THREADS, "")
                if "{" in rest or "}" in rest:
                    raise InputError(
                        f"{data.location(file)}: {key}.{name}.{which}: {setting[which]!r} holds a brace that is "
                        f"not {render.THREADS}, the one placeholder of a value (a hybrid flavor's threads per "
                        "rank); spell it so, or take the brace out"
                    )


# Where the images run: a desktop or laptop, shared memory and at most
# Ethernet, whatever the site's fabric (every MPI says how it runs on each
# fabric of components.yaml).
DESKTOP_FABRIC = "tcp"


def _desktop_unfit(mpi_name: str, mpi: dict, fabric: str) -> str:
    """Why a flavor built for the site's fabric cannot run on a desktop, or ""."""
    if _mpi_spec(mpi, fabric) == _mpi_spec(mpi, DESKTOP_FABRIC):
        return ""
    return (
        f"its MPI, {mpi_name}, is built for the site's {fabric} ({mpi['fabrics'][fabric]['variants']}), "
        f"which a desktop lacks; its build for {DESKTOP_FABRIC} ({mpi['fabrics'][DESKTOP_FABRIC]['variants']}) "
        "is another build: no image of it"
    )


def _mpi_spec(mpi: dict, fabric: str) -> str:
    return f"{mpi['spec']} {mpi['fabrics'][fabric]['variants']}".strip()


def _spack_spec(app: Application, entry: dict, components: dict, site: Site, providers, target: str) -> str:
    """The abstract Spack spec of one cell. Every flavor names its target:
    the site's oldest CPU generation (a preference alone lets reuse pick an
    install built for another CPU), or this machine's for a native twin; it
    goes before the %compiler, as what follows that constrains the compiler.
    A build for a newer target (a CPU level's, a native twin's) keeps the
    flavor's dependencies: they run on the baseline or older (`target=:<baseline>`,
    which Debian's generic x86_64 externals satisfy), or Spack would build
    the MPI and libraries again for each level (MVAPICH2's build alone is
    minutes: docs/results.md)."""
    compiler = components["compilers"][entry["compiler"]]
    by_package: Dict[str, List[str]] = {}
    for virtual, package in providers:
        by_package.setdefault(package, []).append(virtual)
    deps = [f"^[virtuals=mpi] {_mpi_spec(components['mpis'][entry['mpi']], site.fabric)}"] + [
        f"^[virtuals={','.join(virtuals)}] {package}" for package, virtuals in by_package.items()
    ]
    if target != cpus.baseline_target():
        deps = [f"{dep} target=:{cpus.baseline_target()}" for dep in deps]
    variants = merge_variants(app.variants, entry["variants"])
    flags = cpus.fat_flags(compiler["fat_flags"])
    if flags:
        variants = merge_variants(variants, " ".join(f'{n}="{flags}"' for n in ("cflags", "cxxflags", "fflags")))
    return " ".join(p for p in [app.spack, variants, f"target={target}", f"%{compiler['spec']}", *deps] if p)


def _flavor(file: Path, app: Application, kind: str, name: str, entry: dict, components: dict, site: Site) -> Flavor:
    """One cell of the matrix, checked against the components."""
    key = f"{'reference' if kind == 'reference' else 'flavors'}.{name}"
    where = f"defined in {data.location(file.parent / COMPONENTS_FILE)}"
    _check_variants(file, f"{key}.variants", entry["variants"])
    _check_definition_text(file, f"{key}.usage", entry.get("usage", ""))
    variants = merge_variants(app.variants, entry["variants"])
    _check_flags(file, f"{key}.variants", variants)
    _check_threads_built(file, key, entry["threads"], variants)
    check_choice(file, f"{key}.compiler", entry["compiler"], components["compilers"], "compiler", where)
    check_choice(file, f"{key}.mpi", entry["mpi"], components["mpis"], "MPI", where)
    check_choice(file, f"{key}.math", entry["math"], components["math"], "math library", where)
    mpi, math = components["mpis"][entry["mpi"]], components["math"][entry["math"]]
    if math["reference_only"] != (kind == "reference"):
        raise InputError(
            f"{data.location(file)}: {key}.math: '{entry['math']}' is "
            + (
                "a reference library (reference_only in components.yaml): far slower and unstable "
                "in the site's measurements, so it may only be the application's `reference`"
                if kind != "reference"
                else "a production library; the reference is the baseline the report compares "
                "flavors against, so it takes a reference_only library (e.g. netlib)"
            )
        )
    # Only what the application links: Spack refuses a provider of a virtual
    # the package does not depend on.
    providers = tuple((v, p) for v, p in math["providers"].items() if v in app.math_uses)
    levels = (
        tuple(
            (level, _spack_spec(app, entry, components, site, providers, level_target))
            for level, level_target in cpus.newer_levels()
        )
        if kind == "flavor"
        else ()
    )
    return Flavor(
        app=app,
        name=name,
        compiler=entry["compiler"],
        mpi=entry["mpi"],
        mpi_abi=mpi["abi"],
        math=entry["math"],
        spack_spec=_spack_spec(app, entry, components, site, providers, cpus.baseline_target()),
        providers=providers,
        env=_hybrid_env(
            entry["threads"],
            components,
            mpi["env"],
            mpi["fabrics"][site.fabric]["env"],
            site.mpi_settings.get(entry["mpi"], {}),
            math["env"],
        ),
        desktop_env=_hybrid_env(
            entry["threads"], components, mpi["env"], mpi["fabrics"][DESKTOP_FABRIC]["env"], math["env"]
        ),
        desktop_unfit=_desktop_unfit(entry["mpi"], mpi, site.fabric),
        unavailable=(
            site.why_unavailable("compilers", entry["compiler"])
            + site.why_unavailable("mpis", entry["mpi"])
            + site.why_unavailable("math", entry["math"])
        ),
        fat_flags=cpus.fat_flags(components["compilers"][entry["compiler"]]["fat_flags"]),
        mpi_launcher=mpi["launcher"],
        kind=kind,
        levels=levels,
        preload=_preload(math),
        threads=entry["threads"],
        variants=entry["variants"],
        own_usage=entry.get("usage", ""),
    )


# Spack's spellings of a boolean variant turned off, as the variants' words
# (_check_variants) may hold them: ~openmp, openmp=false, in any case.
WITHOUT_OPENMP = re.compile(r"~openmp|openmp==?false", re.IGNORECASE)


def _check_threads_built(file: Path, key: str, threads: str, variants: str) -> None:
    """A hybrid flavor is built with its OpenMP code: built without it, each
    rank would run one thread, whatever its module sets."""
    off = next((word for word in shlex.split(variants) if WITHOUT_OPENMP.fullmatch(word)), None)
    if threads == "openmp" and off:
        raise InputError(
            f"{data.location(file)}: {key}.threads: openmp, but its variants build it without OpenMP "
            f"({off}, the application's `variants` where the flavor's do not "
            f"replace it); add +openmp "
            f"to {key}.variants, or make it threads: none"
        )


def _hybrid_env(threads: str, components: dict, *envs: dict) -> Tuple[Setting, ...]:
    """A flavor's runtime settings: its MPI's and math library's, and in a
    hybrid flavor their hybrid values and components.yaml's `hybrid` env."""
    if threads == "none":
        return _settings(*envs)
    return _settings(*envs, components["hybrid"]["env"], hybrid=True)


def _application(file: Path, doc: dict, site: Site) -> Application:
    names = doc["flavors"]
    # The module's default flavor: the site's, else the file's (both checked
    # against every version of the module, _check_module_defaults).
    default = site.default_flavors.get(doc["module"], {}).get("flavor")
    app = Application(
        file=file,
        module=doc["module"],
        spack=doc["spack"],
        variants=doc["variants"],
        description=doc["description"],
        usage=doc["usage"],
        program=doc["program"],
        default_flavor=default or doc["default_flavor"],
        build=tuple(doc["build"]),
        ci_build=tuple(doc["ci_build"]),
        math_uses=tuple(doc["math_uses"]),
        baselines=tuple(doc["baselines"].items()),
        cpu_checked_code=tuple(doc["cpu_checked_code"]),
        levels_build=tuple(doc["levels"]["build"]),
        levels_ci_build=tuple(doc["levels"]["ci_build"]),
        accelerators=tuple(doc["accelerators"].items()),
        lower_level_on=tuple(doc["lower_level_on"].items()),
    )
    if app.module == RUNTIME_MODULE:
        raise InputError(
            f"{data.location(file)}: module: '{RUNTIME_MODULE}' is the module of the MPI runtimes "
            f"({RUNTIME_MODULE}/<mpi>), which its flavors would collide with; name the application's module otherwise"
        )
    _check_lower_levels(file, app.lower_level_on)
    _check_variants(file, "variants", app.variants)
    _check_flags(file, "variants", app.variants)
    for key in ("description", "usage"):
        _check_definition_text(file, key, doc[key])
    for i, name in enumerate(app.build):
        check_choice(file, f"build[{i}]", name, names, "flavor", "keys of flavors")
    for i, name in enumerate(app.levels_build):
        check_choice(file, f"levels.build[{i}]", name, app.build, "flavor", "it must be in build")
    return app


def _check_lower_levels(file: Path, lower: Tuple[Tuple[str, str], ...]) -> None:
    """Each class is one of cpus.yaml, each level one of its generations'
    below the newest: shared data, the same for every site (a site's
    dispatchers leave out a level below its baseline, dispatch.rules)."""
    levels = sorted({cpus.level_name(g["x86_64_level"]) for g in cpus.described()})
    for name, level in lower:
        check_choice(file, "lower_level_on", name, cpus.cpu_classes(), "CPU class", "cpu_classes of cpus.yaml")
        check_choice(
            file, f"lower_level_on.{name}", level, levels[:-1], "level", "a level of cpus.yaml below its newest"
        )


def _load_application(file: Path, components: dict, site: Site) -> List[Flavor]:
    doc = data.load(file, "application")
    app = _application(file, doc, site)
    flavors = [_flavor(file, app, "flavor", name, entry, components, site) for name, entry in doc["flavors"].items()]
    flavors += [
        _flavor(file, app, "reference", name, entry, components, site) for name, entry in doc["reference"].items()
    ]
    if "native_twin" in doc:
        check_choice(file, "native_twin", doc["native_twin"], app.build, "flavor", "it must be in build")
        twin = next(f for f in flavors if f.name == doc["native_twin"])
        entry = doc["flavors"][twin.name]
        flavors.append(
            replace(
                twin,
                name=f"{twin.name}{NATIVE_SUFFIX}",
                kind="native",
                levels=(),
                spack_spec=_spack_spec(app, entry, components, site, twin.providers, twin_target(components, twin)),
            )
        )
    _check_unique_names(file, flavors)
    # The reference and the native twin are built for `make test` only where
    # ci_build names them: a QE twin is much of CI's budget (docs/site-staff/ci.md).
    measured_only = [f.name for f in flavors if not f.published]
    for i, name in enumerate(app.ci_build):
        check_choice(
            file,
            f"ci_build[{i}]",
            name,
            list(app.build) + measured_only,
            "flavor",
            "it must be in build, or be the reference or the native twin",
        )
    for i, name in enumerate(app.levels_ci_build):
        check_choice(
            file,
            f"levels.ci_build[{i}]",
            name,
            set(app.levels_build) & set(app.ci_build),
            "flavor",
            "it must be in levels.build and in ci_build",
        )
    _check_accelerators_built(file, app, flavors)
    return flavors


def _check_unique_names(file: Path, flavors: List[Flavor]) -> None:
    """A reference or a native twin named like a flavor would be picked in
    its place wherever the stack looks a build up by name."""
    seen = {}
    for flavor in flavors:
        if flavor.name in seen:
            key = "native_twin" if flavor.kind == "native" else f"{flavor.kind}.{flavor.name}"
            raise InputError(
                f"{data.location(file)}: {key}: its build is named {flavor.name}, the name of a "
                f"{seen[flavor.name]} of this file; rename one of them"
            )
        seen[flavor.name] = flavor.kind


def _check_accelerators_built(file: Path, app: Application, flavors: List[Flavor]) -> None:
    """An accelerated style no flavor is built with would never run, and its
    tests would never say so."""
    for name, how in app.accelerators:
        if not any(how["variant"] in f.spack_spec.split() for f in flavors if f.published):
            raise InputError(
                f"{data.location(file)}: accelerators.{name}.variant: no flavor's spec has "
                f"{how['variant']}; add it to a flavor's variants, or remove the accelerator"
            )


def _check_site_versions(site: Site, flavors: List[Flavor]) -> None:
    """The site's `versions` name applications and versions the stack has."""
    known = versions_by_module(flavors)
    for app, chosen in site.versions.items():
        check_choice(site.file, f"versions.{app}", app, known, "application", "modules of environments/")
        named = [("default", chosen["default"])] if "default" in chosen else []
        named += [(f"deprecated.{v}", v) for v in chosen["deprecated"]]
        named += [(f"hidden[{i}]", v) for i, v in enumerate(chosen["hidden"])]
        for key, version in named:
            check_choice(
                site.file,
                f"versions.{app}.{key}",
                version,
                sorted(known[app]),
                "version",
                f"the versions of {app} in environments/",
            )
    # What `module load <module>/<flavor>` loads (the site's default version
    # where the flavor has it, else its newest) is not a hidden version
    # while the flavor has a listed one: a flavor hidden whole is retired.
    offered = [f for f in flavors if f.kind == "flavor"]
    for (module, name), versions in sorted(_loadable_versions(offered).items()):
        hidden = set(site.versions.get(module, {}).get("hidden", []))
        loads, listed = default_version(site, module, versions), sorted(versions - hidden, key=version_key)
        if loads in hidden and listed:
            raise InputError(
                f"{data.location(site.file)}: versions.{module}.hidden: {loads} is the version "
                f"`module load {module}/{name}` loads (the site's default where the flavor has it, else its "
                f"newest), while {', '.join(listed)} stays listed; make that the default (versions.{module}.default), "
                "or leave it listed"
            )


def versions_by_module(flavors: List[Flavor]) -> Dict[str, set]:
    """Each module's versions among flavors."""
    found: Dict[str, set] = {}
    for flavor in flavors:
        found.setdefault(flavor.app.module, set()).add(flavor.app.version)
    return found


def _check_module_defaults(site: Site, flavors: List[Flavor]) -> None:
    """`module load <module>` loads one flavor, whatever versions the
    module's files hold: the site's default flavor, else the one every file
    names; a flavor of one version at least (a newer version may not offer
    it yet), in its `build` list, and one the site can build."""
    for module in sorted({f.app.module for f in flavors}):
        names = {f.name for f in flavors if f.app.module == module and f.published and f.name in f.app.build}
        where = f"the `build` lists of the {module} files of environments/"
        if module in site.default_flavors:
            chosen = site.default_flavors[module]["flavor"]
            # ...in a version the site lists: a flavor hidden whole is retired.
            hidden = set(site.versions.get(module, {}).get("hidden", []))
            buildable = {
                f.name
                for f in flavors
                if f.app.module == module and f.name in names and not f.unavailable and f.app.version not in hidden
            }
            check_choice(
                site.file,
                f"default_flavors.{module}.flavor",
                chosen,
                buildable,
                "flavor",
                f"{where}, buildable here, in a version not hidden (versions.{module}.hidden)",
            )
            continue
        named = {f.app.file: f.app.default_flavor for f in flavors if f.app.module == module}
        first = min(named)
        for file, default in sorted(named.items()):
            check_choice(file, "default_flavor", default, names, "flavor", where)
            if default != named[first]:
                raise InputError(
                    f"{data.location(file)}: default_flavor: {default}, but {data.location(first)} names "
                    f"{named[first]}: `module load {module}` loads one flavor; name the same in every {module} file"
                )
        _check_default_buildable(site, module, named[first], flavors)


def _check_default_buildable(site: Site, module: str, default: str, flavors: List[Flavor]) -> None:
    """The stack's default flavor of a module where the site names none: one
    the site can build, else `module load <module>` would quietly load
    another (publish's fallback) than the one the site staff expect."""
    chosen = [f for f in flavors if f.app.module == module and f.name == default]
    if chosen and all(f.unavailable for f in chosen):
        raise InputError(
            f"{data.location(site.file)}: default_flavors.{module}: the stack's default, {module}/{default}, "
            f"cannot be built here ({'; '.join(chosen[0].unavailable)}); name this site's own default flavor of "
            f"{module} under default_flavors (flavor, why, measured_on)"
        )


def default_version(site: Site, module: str, versions) -> str:
    """The version `<module>/<flavor>` loads among versions: the site's
    default version (its `versions`) where it is one of them, else the newest."""
    chosen = site.versions.get(module, {}).get("default")
    return chosen if chosen in versions else max(versions, key=version_key)


def version_key(version: str) -> tuple:
    """Versions in numeric order (6.7.0 < 7.5 < 20210929.2 < 20250204.dfsg1)."""
    return tuple(int(part) if part.isdigit() else -1 for part in version.replace("-", ".").split("."))


def _versions_by_flavor(flavors: List[Flavor]) -> Dict[Tuple[str, str], set]:
    """The versions each flavor (module, flavor name) is offered in."""
    versions: Dict[Tuple[str, str], set] = {}
    for f in flavors:
        versions.setdefault((f.app.module, f.flavor_name), set()).add(f.app.version)
    return versions


def _loadable_versions(flavors: List[Flavor]) -> Dict[Tuple[str, str], set]:
    """The versions among which `<module>/<flavor>` loads its default: those
    whose `build` list has the flavor, else (a cell of the matrix no version
    builds) every version that defines it. A newer release that defines a
    flavor it does not build (LAMMPS 2025's openblas-openmpi) must not take
    the name that loads the older release's build."""
    defined = _versions_by_flavor(flavors)
    built = _versions_by_flavor([f for f in flavors if f.flavor_name in f.app.build])
    return {key: built.get(key, versions) for key, versions in defined.items()}


def _mark_default_versions(flavors: List[Flavor], site: Site) -> List[Flavor]:
    """Each flavor offered in several versions (one application file each)
    loads, by its unversioned name, its default version."""
    versions = _loadable_versions(flavors)
    return [
        replace(
            f,
            default_version=f.app.version == default_version(site, f.app.module, versions[f.app.module, f.flavor_name]),
        )
        for f in flavors
    ]


def _runtimes(components: dict, site: Site) -> Tuple[Runtime, ...]:
    own = [
        Runtime(
            name,
            _mpi_spec(mpi, site.fabric),
            mpi["abi"],
            _mpi_settings(mpi, site.fabric, site.mpi_settings.get(name, {})),
            tuple(mpi.get("serves", [mpi["abi"]])),
            ci_build=mpi["ci_build"],
        )
        for name, mpi in components["mpis"].items()
        if mpi["runtime"] and not site.why_unavailable("mpis", name)
    ]
    # A site without an MPI has neither its runtime nor a translator onto it.
    translators = {n: t for n, t in components["translators"].items() if not site.why_unavailable("mpis", t["to"])}
    return (*own, *(_translator(name, t, components, site) for name, t in translators.items()))


def _translator(name: str, translator: dict, components: dict, site: Site) -> Runtime:
    """A translation layer as a runtime: its own settings, then those of the
    MPI it runs the jobs on (on the site's fabric)."""
    target = components["mpis"][translator["to"]]
    return Runtime(
        name,
        translator["spec"],
        target["abi"],
        _settings(
            translator["env"],
            target["env"],
            target["fabrics"][site.fabric]["env"],
            site.mpi_settings.get(translator["to"], {}),
        ),
        tuple(translator["serves"]),
        to=translator["to"],
        preload=tuple(translator["preload"]),
        rank_env_option=target["rank_env_option"],
        library_path=tuple(translator["library_path"]),
    )


def launcher_program(launcher: str) -> str:
    """The program an MPI's `launcher` of components.yaml names (empty: the MPI's own mpirun)."""
    return launcher or "mpirun"


def twin_target(components: dict, flavor: Flavor) -> str:
    """The Spack target of a flavor's native twin: this host's CPU, as the
    flavor's compiler can build for it (host.twin_target)."""
    return host.twin_target(components["compilers"][flavor.compiler]["spec"])


def package_name(spec: str) -> str:
    """The package of a spec: intel-oneapi-compilers-classic@2021.10.0 +x -> intel-oneapi-compilers-classic."""
    return spec.split()[0].split("@")[0]


def _spec_names(tree) -> List[str]:
    """The packages of every `spec` and `providers` in a tree of the data."""
    if not isinstance(tree, dict):
        return []
    own = [tree["spec"]] if isinstance(tree.get("spec"), str) else []
    own += list(tree.get("providers", {}).values())
    return [package_name(s) for s in own] + [name for value in tree.values() for name in _spec_names(value)]


def _check_build_first(file: Path, components: dict, flavors: List[Flavor]) -> None:
    """Each package build_first names is one the stack builds: a misspelt
    name would order nothing, and say nothing."""
    known = {f.app.package for f in flavors} | set(_spec_names(components))
    for i, spec in enumerate(components["build_first"]):
        where = "the applications' and components' specs"
        check_choice(file, f"build_first[{i}]", package_name(spec), known, "package", where)


def load_matrix(site: Site) -> Matrix:
    """Every flavor of every application of environments/, validated, for the site."""
    env_dir = paths.environments_dir()
    components_file = env_dir / COMPONENTS_FILE
    components = data.load(components_file, "components")
    _check_components(components_file, components, site)
    flavors: List[Flavor] = []
    modules: Dict[str, Path] = {}
    files: Dict[Tuple[str, str], Path] = {}
    for file in sorted(env_dir.glob("*.yaml")):
        if file.name in (COMPONENTS_FILE, cpus.CPUS_FILE):
            continue
        app_flavors = _load_application(file, components, site)
        app = app_flavors[0].app
        if (app.module, app.version) in files:
            raise InputError(
                f"{data.location(file)}: spack: {app.module} {app.version} is already the version of "
                f"{data.location(files[app.module, app.version])}; each version of an application has one "
                "file (give this one another version in `spack`, or another `module`)"
            )
        modules.setdefault(app.module, file)
        files[app.module, app.version] = file
        flavors.extend(app_flavors)
    if not flavors:
        raise InputError(f"{data.location(env_dir)}: no application files (<app>.yaml) found")
    flavors = _mark_default_versions(flavors, site)
    for app in site.default_flavors:
        check_choice(site.file, f"default_flavors.{app}", app, modules, "application", "modules of environments/")
    _check_site_versions(site, flavors)
    _check_module_defaults(site, flavors)
    _check_build_first(components_file, components, flavors)
    return Matrix(site=site, flavors=tuple(flavors), runtimes=_runtimes(components, site), components=components)
