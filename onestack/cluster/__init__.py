"""A virtual Slurm cluster made from this one machine, for tests across nodes.

The host is the head node: slurmctld and munged run there, slurmctld on the
address the host has on the cluster's own bridge. Each compute node is a
network namespace joined to that bridge by a veth pair, with its own address,
hostname (UTS namespace), hosts file, boot id, node-local folder and slurmd
(spool, log). The host's filesystem is the cluster's shared one: the nodes
see the same paths. No namespace has a default route.

    from onestack import cluster
    config = cluster.config.load()           # cluster/cluster.yaml
    with cluster.running(config) as c:       # up, and down whatever happens
        job = c.run_job(script, "--nodes=2", "--ntasks=2", timeout=120)
        print(job.state, job.output)

`python -m onestack.cluster up|env|down|status|bench` is the command line.
"""

import contextlib
import functools
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from onestack import commands, files
from onestack.cluster import network, processes, slurm, state
from onestack.cluster.config import ClusterError, Config
from onestack.cluster.network import Counters
from onestack.cluster.slurm import Job

# Tools the cluster runs, and the Debian package of each (setup/apt-packages.txt).
TOOLS = {
    "ip": "iproute2",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "umount": "mount",
    "nft": "nftables",
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sinfo": "slurm-client",
    "lstopo-no-graphics": "hwloc-nox",
}
MARKER = ".onestack-cluster"  # a folder with it was made by `up`: `up` may empty it
UP_TIMEOUT = 60  # seconds for the nodes to register once their slurmd runs
# Beyond a job's time limit, until it has surely ended: slurmctld finds
# the limit passed at its next check, signals the job, waits KillWait
# (cluster/slurm.conf.j2), kills it, and drains a node whose processes outlive
# UnkillableStepTimeout (Slurm's default); the rest for a loaded host.
JOB_END_S = 200


@dataclass
class Cluster:
    """A running virtual cluster: what tests and the stack's tools use."""

    config: Config

    def command(self, *argv: str, timeout: float = 60, env: Optional[dict] = None):
        """A Slurm command on the head node (sinfo, srun ...), as a user would type it."""
        return slurm.command(self.config, *argv, timeout=timeout, env=env)

    def submit(self, script: Path, *sbatch_args: str, env: Optional[dict] = None) -> int:
        return slurm.submit(self.config, script, *sbatch_args, env=env)

    def wait(self, job_id: int, timeout: float) -> Job:
        return slurm.wait_job(self.config, job_id, timeout)

    def run_job(self, script: Path, *sbatch_args: str, timeout: float, env: Optional[dict] = None) -> Job:
        """Submit a batch script and wait for its end; its output (stdout and
        stderr) lands beside it as <script>.out and comes back in Job.output."""
        output = script.with_suffix(".out")
        output.unlink(missing_ok=True)
        job_id = self.submit(script, f"--output={output}", f"--chdir={script.parent}", *sbatch_args, env=env)
        job = self.wait(job_id, timeout)
        return replace(job, returned=self.return_to_service())

    def return_to_service(self) -> Tuple[str, ...]:
        """Each node Slurm drained because a job's processes outlived SIGKILL
        back in service, and what was done: what the job left there ended, the
        node resumed, as a site's administrator would. Without it one such job
        (seen once, after Debian MPICH's hang in MPI_Finalize with mpirun
        across the nodes) fails every later job that needs the node."""
        done = []
        for name in slurm.drained_by_unkillable(self.config):
            left = {pid: command for pid, command in self.processes_on(name).items() if command != "slurmd"}
            stuck = processes.end(left)
            if stuck:
                survivors = ", ".join(left[pid] for pid in stuck)
                raise ClusterError(f"{name}: drained ({slurm.UNKILLABLE}); {survivors} survive SIGKILL there")
            slurm.resume(self.config, name)
            self.wait_for_nodes("idle", [name])
            ended = ", ".join(sorted(left.values())) or "nothing"
            done.append(f"{name} drained ({slurm.UNKILLABLE}): ended {ended} left there, resumed")
        return tuple(done)

    def submitter(self, nodes: int, ranks: int, minutes: int = 10, cpus_per_task: int = 1):
        """A submit function for onestack.problems.execute: the run script as
        a batch job of `ranks` tasks (of `cpus_per_task` cores each: a hybrid
        flavor's threads) on `nodes` nodes, its exit code (0 only
        when Slurm says COMPLETED) and its output. The time limit also ends a
        job that Debian's MPICH leaves hanging in MPI_Finalize across nodes
        (cluster/README.md)."""

        def submit(script: Path):
            job = self.run_job(
                script,
                f"--nodes={nodes}",
                f"--ntasks={ranks}",
                f"--cpus-per-task={cpus_per_task}",
                f"--time={minutes}",
                timeout=minutes * 60 + JOB_END_S,
            )
            code = 0 if job.state == "COMPLETED" else int(job.exit_code.split(":")[0]) or 1
            notes = ([] if code == 0 else [f"job {job.id}: {job.state} {job.reason}"]) + list(job.returned)
            return code, job.output + "".join(f"\n({note})" for note in notes)

        return submit

    def node_states(self) -> Dict[str, str]:
        return slurm.node_states(self.config)

    def wait_for_nodes(self, state_name: str, nodes: Optional[List[str]] = None, timeout: float = 60) -> float:
        """Seconds until the nodes (default: all) are in that sinfo state."""
        names = nodes or [node.name for node in self.config.nodes]
        return slurm.wait_for_nodes(self.config, state_name, names, timeout)

    def counters(self) -> Dict[str, Counters]:
        """Bytes received and sent by each node's cluster interface (eth0 in its namespace)."""
        return network.all_counters(self.config)

    def processes_on(self, node: str) -> Dict[int, str]:
        """pid -> command of every process on the node (its network namespace)."""
        pids = network.pids_in(node)
        return {pid: processes.command_name(pid) for pid in pids if processes.alive(pid)}

    def kill_node(self, node: str) -> None:
        """The node dies: SIGKILL to every process in it (slurmd, job steps, ranks)."""
        processes.end(network.pids_in(node), grace=0)  # no SIGTERM: nothing gets to say goodbye

    def start_node(self, node: str) -> None:
        """slurmd again, after kill_node (the namespace and its link stay)."""
        slurm.start_slurmd(self.config, self.config.node(node))

    def set_link(self, node: str, up: bool) -> None:
        network.set_link(self.config.node(node), up)

    def on_node(self, node: str, *argv: str, timeout: float = 30):
        """A command in the node's network namespace (not under its slurmd: the
        host's hostname and hosts file), e.g. `ip route`."""
        return network.in_node(self.config.node(node), *argv, timeout=timeout)

    def local_dir(self, node: Optional[str] = None) -> Path:
        """The node-local folder: the path every node sees (no node given), or
        where the host writes what that node alone sees there."""
        if node is None:
            return slurm.local_dir(self.config)
        return slurm.node_local_dir(self.config, self.config.node(node))


def _require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError("the virtual cluster needs root (network namespaces, bridge, bind mounts): run it as root")


def _require_tools() -> None:
    """The daemons are in the sbin folders, which a user's PATH may lack
    (root by `su` without `-`): added to this process's PATH, which the
    commands it starts inherit."""
    path = os.environ.get("PATH", "").split(":")
    os.environ["PATH"] = ":".join([*path, *(f for f in ("/usr/sbin", "/sbin") if f not in path)])
    missing = [f"{tool} ({package})" for tool, package in TOOLS.items() if not shutil.which(tool)]
    if missing:
        raise ClusterError(f"missing: {', '.join(missing)}: run `make setup` (setup/apt-packages.txt)")


def leftovers(config: Config) -> List[str]:
    """What exists of the cluster: namespaces, interfaces, processes, its record."""
    found = [f"namespace {name}" for name in network.namespaces(config.prefix)]
    found += [f"interface {name}" for name in network.links(config.prefix)]
    found += [f"firewall table inet {name}" for name in network.firewall_tables(config.prefix)]
    found += [
        f"process {pid} ({processes.command_name(pid)})" for pid in processes.of_cluster(config.prefix, config.workdir)
    ]
    if state.exists(config.workdir):
        found.append(f"record {config.workdir / state.STATE_FILE}")
    return found


def _fresh_workdir(config: Config) -> None:
    """An empty cluster folder; an existing one is emptied only if `up` made it."""
    workdir = config.workdir
    if workdir.exists():
        if not (workdir / MARKER).exists():
            raise ClusterError(
                f"{workdir} exists and was not made by onestack's cluster: move it away, "
                f"or set ONESTACK_CLUSTER_DIR to another folder"
            )
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    (workdir / MARKER).touch()


def _exclusive(config: Config):
    """One process making or removing the cluster at a time, and none while a
    test session runs on it (running): two would remove each other's parts as
    leftovers. Beside its folder, which `up` makes anew."""
    lock = config.workdir.parent / f".{config.prefix}.lock"
    return files.exclusive(lock, f"making, use or removal of cluster {config.prefix}", ClusterError)


def up(config: Config) -> Cluster:
    """Make the network, write the files, start the daemons, wait until every
    node is idle. On any failure (or interrupt) everything made is removed."""
    with _exclusive(config):
        return _up(config)


def _up(config: Config) -> Cluster:
    _require_root()
    _require_tools()
    found = leftovers(config)
    if found:
        raise ClusterError(
            f"cluster {config.prefix} is running or left over ({'; '.join(found)}): "
            f"run `make cluster-down` (python -m onestack.cluster down) first"
        )
    network.check_subnet_free(config)
    _fresh_workdir(config)
    state.start(config.workdir, config.prefix)
    with commands.stopped_as_exit():
        try:
            _make(config)
        except BaseException:
            _down(config)
            raise
    return Cluster(config)


def _make(config: Config) -> None:
    record = functools.partial(state.record, config.workdir)
    record("interface", config.bridge)
    network.make_bridge(config)
    record("firewall", network.firewall_table(config.prefix))
    network.make_firewall(config)
    for node in config.nodes:
        record("namespace", node.name)
        network.make_namespace(node)
        record("interface", node.name)
        network.make_link(config, node)
    slurm.write_files(config)
    record("daemon", "munged")
    slurm.start_munged(config)
    record("daemon", "slurmctld")
    slurm.start_slurmctld(config)
    for node in config.nodes:
        record("daemon", f"slurmd {node.name}")
        slurm.start_slurmd(config, node)
    slurm.wait_for_nodes(config, "idle", [node.name for node in config.nodes], UP_TIMEOUT)


def down(config: Config) -> List[str]:
    """End every process of the cluster, delete its namespaces and interfaces
    (those recorded and any other named like them), forget the record. Works
    after a killed `up` or test. Returns what it removed. A stop signal or
    Ctrl-C meanwhile is raised once it is done: cut short, it would leave
    the namespaces, the bridge and the firewall's table."""
    _require_root()
    with _exclusive(config):
        return _down(config)


def _down(config: Config) -> List[str]:
    with commands.finished_whole():
        return _remove(config)


def _remove(config: Config) -> List[str]:
    removed = _end_processes(config)
    recorded = state.made(config.workdir)
    for name in sorted(set(network.namespaces(config.prefix)) | {n for k, n in recorded if k == "namespace"}):
        if name in network.namespaces(config.prefix):
            network.delete_namespace(name)
            removed.append(f"namespace {name}")
    if network.release_netns_dir():
        removed.append(f"the mount {network.NETNS_DIR} (ip netns's, no namespace left in it)")
    # A node's veth pair goes with its namespace, a moment later; whatever is
    # still there then (the bridge, a pair whose namespace never came) goes now.
    network.wait_until_gone(network.veths(config.prefix), timeout=5)
    # Only names of its own: the record is a file its user can write (paths.give_back_cache), and this runs as root.
    own = {n for k, n in recorded if k == "interface" and n.startswith(f"{config.prefix}-")}
    for name in sorted(set(network.links(config.prefix)) | own):
        if network.delete_link(name):
            removed.append(f"interface {name}")
    for name in network.firewall_tables(config.prefix):
        network.delete_firewall(name)
        removed.append(f"firewall table inet {name}")
    state.forget(config.workdir)
    left = leftovers(config)
    if left:
        raise ClusterError(f"cluster {config.prefix} not fully removed: {'; '.join(left)}")
    return removed


# Rounds of ending the cluster's processes: a process started during the
# first round's grace (a job that traps SIGTERM and forks) is found by the next.
END_ROUNDS = 3


def _end_processes(config: Config) -> List[str]:
    """End every process of the cluster, SIGTERM first, then what is found
    again with SIGKILL at once, for a bounded number of rounds. One still
    running then keeps the namespaces: deleted, they would hide it from
    `leftovers` and from the next `down`."""
    ended, seen = [], set()
    for grace in (5,) + (0,) * (END_ROUNDS - 1):
        pids = processes.of_cluster(config.prefix, config.workdir)
        if not pids:
            return ended
        ended += [f"process {pid} ({processes.command_name(pid)})" for pid in pids if pid not in seen]
        seen.update(pids)
        processes.end(pids, grace=grace)
    left = processes.of_cluster(config.prefix, config.workdir)
    if left:
        raise ClusterError(
            f"cluster {config.prefix}: processes still running after {END_ROUNDS} rounds of SIGKILL, "
            f"namespaces kept: {', '.join(f'{pid} ({processes.command_name(pid)})' for pid in left)}; "
            "`make cluster-down` again once they have ended"
        )
    return ended


def attach(config: Config) -> Cluster:
    """The cluster `up` started earlier (another process, e.g. `make cluster`)."""
    if not state.exists(config.workdir):
        raise ClusterError(
            f"cluster {config.prefix} is not up (no {config.workdir / state.STATE_FILE}): run `make cluster`"
        )
    return Cluster(config)


@contextlib.contextmanager
def running(config: Config) -> Iterator[Cluster]:
    """The cluster for the duration of a `with` block (a test module): down
    afterwards, whatever happened inside, a SIGTERM too."""
    with commands.stopped_as_exit(), _exclusive(config):
        started = _up(config)
        try:
            yield started
        finally:
            _down(config)
