# Runs inside `spack python` (see onestack/spack/__init__.py:install). Argument: a
# JSON list of abstract specs, components.yaml `build_first`. Installs the
# environment as `spack install --fail-fast` does, with Spack's own installer
# and the command's own defaults, but starts the builds in a set order.
#
# Why not `spack install` itself: when a dependency that many builds wait on
# is installed (the compiler's runtime), Spack's installer queues them in the
# order of a Python set, which changes from run to run, and nothing in Spack
# sets that order. On 2 cores an order can cost minutes: a build that keeps
# one core busy (MVAPICH2's autogen and configure, QE's Fortran modules one
# after another) started last leaves the other core idle (docs/results.md,
# Build and test times: the slowest runs had started MVAPICH2 last). So the
# builds go in waves: each wave, every build whose dependencies are all
# installed, each alone (`--only package`, which queues them in the order
# given: the first that `build_first` names first). `--only package`
# cannot take a build and its dependency in one call (Spack fails to upgrade
# the dependency's lock): hence waves, not one call.
import argparse
import json
import sys

import spack.cmd.install
import spack.environment
import spack.llnl.util.tty
import spack.spec
import spack.traverse


def install_kwargs(*argv):
    """What `spack install ARGV` would pass Spack's installer."""
    parser = argparse.ArgumentParser()
    spack.cmd.install.setup_parser(parser)
    parser.set_defaults(verbose=spack.llnl.util.tty.is_verbose())  # spack's own -v, not install's
    return spack.cmd.install.install_kwargs_from_args(parser.parse_args(list(argv)))


def rank(spec, first):
    return next((i for i, wanted in enumerate(first) if spec.satisfies(wanted)), len(first))


env = spack.environment.active_environment()
first = [spack.spec.Spec(s) for s in json.loads(sys.argv[1])]
nodes = spack.traverse.traverse_nodes(env.concrete_roots(), key=spack.traverse.by_dag_hash)
waiting = {s.dag_hash(): s for s in nodes if not s.external and not s.installed}
while waiting:
    wave = [s for s in waiting.values() if not any(d.dag_hash() in waiting for d in s.dependencies())]
    env.install_specs(sorted(wave, key=lambda s: rank(s, first)), **install_kwargs("--fail-fast", "--only", "package"))
    for spec in wave:
        del waiting[spec.dag_hash()]
