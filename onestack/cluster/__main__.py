"""python -m onestack.cluster up|env|down|status|bench (the Makefile's
cluster, cluster-env, cluster-down, cluster-bench targets): the virtual
Slurm cluster."""

import argparse
import os
import sys
import time
from pathlib import Path

from onestack import cluster, commands, paths
from onestack.cluster import config, imb
from onestack.cluster.config import ClusterError
from onestack.errors import OnestackError
from onestack.stack import site


def cmd_up(conf: config.Config) -> None:
    start = time.monotonic()
    running = cluster.up(conf)
    print(
        f"==> cluster {conf.prefix} up in {time.monotonic() - start:.1f} s: "
        f"{', '.join(f'{n}={s}' for n, s in running.node_states().items())}"
    )
    print(f"To use it:\n  source {conf.env_file}   # `make -s cluster-env` prints this path\n  sinfo")


def cmd_env(conf: config.Config) -> None:
    cluster.attach(conf)
    print(conf.env_file)


def cmd_down(conf: config.Config) -> None:
    start = time.monotonic()
    removed = cluster.down(conf)
    print(
        f"==> cluster {conf.prefix} down in {time.monotonic() - start:.1f} s "
        f"({len(removed)} removed{': ' + '; '.join(removed) if removed else ''})"
    )


def cmd_status(conf: config.Config) -> None:
    found = cluster.leftovers(conf)
    if not found:
        print(f"cluster {conf.prefix}: not up")
        return
    print(f"cluster {conf.prefix} ({conf.workdir}):\n  " + "\n  ".join(found))
    print(cluster.Cluster(conf).command("sinfo", "--Node", "--long").stdout)


def cmd_bench(conf: config.Config) -> None:
    measured = imb.benchmark(cluster.attach(conf))
    print(imb.table(measured.results, measured.failed))
    if measured.failed:
        raise ClusterError(
            f"{len(measured.failed)} of the pairings failed:\n"
            + "\n".join(f"{name}: {error}" for name, error in measured.failed.items())
        )


COMMANDS = {"up": cmd_up, "env": cmd_env, "down": cmd_down, "status": cmd_status, "bench": cmd_bench}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onestack.cluster", description=__doc__)
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument(
        "--config",
        type=Path,
        default=config.DEFAULT_FILE,
        help="the cluster's description (default: cluster/cluster.yaml)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "bench":
            # The stack's MPIs live under the site's prefix, as for bin/onestack;
            # the other commands read no site file (a broken one must not keep a cluster up).
            os.environ["ONESTACK_PREFIX"] = str(site.prefix())
        with commands.stopped_as_exit():  # a stop raised: what a command started is ended with it
            COMMANDS[args.command](config.load(args.config))
    except OnestackError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except commands.Stopped as stopped:
        print(f"error: {stopped}: what it made or started is removed", file=sys.stderr)
        return 128 + stopped.signum
    finally:
        paths.give_back_cache()  # `sudo make cluster`: the cache stays its user's
    return 0


if __name__ == "__main__":
    sys.exit(main())
