"""Checks the project did not write (tests/community/checks.yaml), run by
ReFrame against the published module tree: ReFrame and the EESSI test suite
in a virtualenv of their own (setup/reframe-requirements.txt), a ReFrame
configuration generated from the site and this machine, and a shim module
per flavor under the name the check looks for. ReFrame runs the checks; this
module only writes what they need to find the stack and reads the verdict."""

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List

import yaml

from onestack import commands, data, files, host, paths, render, stack
from onestack.errors import OnestackError
from onestack.modules import publish
from onestack.stack import site

CHECKS = paths.REPO / "tests" / "community" / "checks.yaml"
REQUIREMENTS = paths.REPO / "setup" / "reframe-requirements.txt"
TEMPLATES = Path(__file__).parent / "templates"
# EESSI's scales that fit one node of n cores (its `features`, by name).
CORE_SCALES = ((1, "1_core"), (2, "2_cores"), (4, "4_cores"))


class CommunityError(OnestackError):
    pass


@dataclass
class Verdict:
    check: str
    module: str
    passed: bool
    output: str
    script: Path

    def line(self) -> str:
        return f"{self.check} on {self.module}: {'PASSED' if self.passed else 'FAILED'} (ReFrame; {self.script})"


def workdir() -> Path:
    """The site's own folder for the checks' config, shims and runs."""
    return site.cache_dir() / "community"


def checks() -> dict:
    return data.load(CHECKS, "community")["checks"]


def venv() -> Path:
    """The bin/ of ReFrame's virtualenv, installed (hash-checked) on first use."""
    where = paths.cache() / "reframe-venv"
    wanted = REQUIREMENTS.read_text()
    failed = files.pip_venv(where, ["--require-hashes", "-r", str(REQUIREMENTS)], ".requirements", wanted)
    if failed:
        raise CommunityError(f"pip could not install {data.location(REQUIREMENTS)}:\n{failed[-2000:]}")
    return where / "bin"


def config(out: Path) -> Path:
    """ReFrame's configuration for the site on this machine: one system named
    after the site, a partition of this machine with Lmod and the local
    scheduler. Its launcher is `mpirun` for every flavor: each flavor's module
    puts its own MPI's mpirun first (Open MPI's included), so one launcher
    serves every MPI family. EESSI's hooks need the processor, the scales
    that fit it (features) and the memory (extras)."""
    cores = os.cpu_count() or 1
    partition = {
        "name": "local",
        "scheduler": "local",
        "launcher": "mpirun",
        "environs": ["default"],
        "max_jobs": 1,
        "processor": {"num_cpus": cores, "num_cpus_per_core": 1},
        "features": ["cpu", *(name for n, name in CORE_SCALES if n <= cores), "1_node"],
        "extras": {"mem_per_node": host.memory_bytes() // 2**20},
    }
    system = {
        "name": stack.load().site.name,
        "hostnames": [".*"],
        "modules_system": "lmod",
        "partitions": [partition],
    }
    document = {"systems": [system], "environments": [{"name": "default"}]}
    return files.write_text(out / "reframe-config.yaml", yaml.safe_dump(document, sort_keys=False))


def _script(out: Path, check_id: str, check: dict, module: str, bin_dir: Path) -> Path:
    # One file per flavor, its version too where the module name has one
    # (lmp/openblas-mpich/20210929.2), in a folder of this run's alone: a
    # check runs every module of its upstream name it finds (EESSI's
    # find_modules), which would include another run's flavors.
    flavor = module.split("/", 1)[1].replace("/", "-")
    shims = out / "shims" / f"{check_id}-{flavor}"
    shutil.rmtree(shims, ignore_errors=True)
    render.write(
        TEMPLATES,
        "shim.lua.j2",
        shims / check["upstream_module"] / f"{flavor}.lua",
        upstream=check["upstream_module"],
        flavor=flavor,
        check=check_id,
        module=module,
    )
    site_packages = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return render.write(
        TEMPLATES,
        "run.sh.j2",
        out / f"run-{check_id}-{flavor}.sh",
        mode=0o755,
        check=check_id,
        module=module,
        init=publish.init_of(publish.current_release()),
        shims=shims,
        reframe=bin_dir / "reframe",
        config=out / "reframe-config.yaml",
        prefix=out / f"{check_id}-{flavor}",
        check_file=Path(site_packages) / check["file"],
        name=check["name"],
        tag=check["tag"],
    )


# A check's whole run, ReFrame's own set-up included: bounded, as every run is.
TIMEOUT_S = 1800


def run(check_id: str, module: str, out: Path) -> Verdict:
    """One check against one published flavor (any flavor of its app, e.g.
    one it is expected to fail on), from a clean shell."""
    check = checks()[check_id]
    if module.split("/")[0] != check["app"]:
        raise CommunityError(f"{check_id} checks {check['app']} flavors, not {module}")
    config(out)
    script = _script(out, check_id, check, module, venv())
    argv = ["bash", "--noprofile", "--norc", str(script)]
    code, printed, errors = commands.run_whole(argv, TIMEOUT_S, env=commands.clean_env())
    output = printed + errors + (f"\nkilled after {TIMEOUT_S} s\n" if code == -signal.SIGKILL else "")
    return Verdict(check_id, module, code == 0 and _ran_and_passed(output), output, script)


# ReFrame's summary line: it says PASSED, and exits 0, for a run of no test
# case, and for one whose cases were all skipped (a CPU or memory a check's
# hook asks for): a pass only where at least one case ran and none was skipped.
RAN = re.compile(r"\[  PASSED  \] Ran (\d+)/(\d+) test case")
SKIPPED = re.compile(r"\b(\d+) skipped\b")


def _ran_and_passed(output: str) -> bool:
    ran = RAN.search(output)
    skipped = SKIPPED.findall(output[ran.start() :]) if ran else []
    return bool(ran) and int(ran.group(1)) >= 1 and not any(int(n) for n in skipped)


def run_all(out: Path) -> List[Verdict]:
    """Every check on every flavor it names that is published here."""
    published = set(publish.release_manifest(publish.current_release())["flavors"])
    verdicts = []
    for check_id, check in checks().items():
        for flavor in check["flavors"]:
            module = f"{check['app']}/{flavor}"
            if module not in published:
                print(f"==> community: {check_id} on {module}: not run, the flavor is not published here")
                continue
            verdicts.append(run(check_id, module, out))
            print(verdicts[-1].line(), flush=True)
    return verdicts
