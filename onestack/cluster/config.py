"""The virtual cluster's description (cluster/cluster.yaml), validated before
anything is made: node names, addresses, where its files live."""

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

from onestack import data as onestack_data
from onestack import paths
from onestack.errors import OnestackError
from onestack.render import SAFE_PATH

# The cluster's files: its description, and the templates of what `up` writes.
TEMPLATES = paths.REPO / "cluster"
DEFAULT_FILE = TEMPLATES / "cluster.yaml"
# The nodes' side of each veth pair: every node calls its cluster interface so,
# like the first NIC of a real node (MPI settings can name it).
NODE_INTERFACE = "eth0"
# Linux interface names have at most 15 characters: "<prefix>-n<i>" and
# "<prefix>-br" must fit.
PREFIX_PATTERN = re.compile(r"[a-z][a-z0-9]{1,7}")
MAX_NODES = 64
# AF_UNIX socket paths have at most 107 bytes, and the longest in the folder
# is each job step's slurmstepd socket, nodes/<node>/spool/<node>_<job>.<step>
# (a node name of MAX_NODES, a job id of Slurm's MaxJobId, a step id of 10
# digits: 58 more bytes). Past it slurmstepd dies, and every job with it.
MAX_WORKDIR_LENGTH = 48


class ClusterError(OnestackError):
    """The virtual cluster cannot be made or used; the message says why and the fix."""


@dataclass(frozen=True)
class Node:
    name: str  # NodeName = hostname = network namespace = host side of its veth pair
    index: int  # 0-based; its first core is machine core `index` (mod the core count)
    address: str


@dataclass(frozen=True)
class Config:
    file: Path
    prefix: str
    subnet: ipaddress.IPv4Network
    nodes: Tuple[Node, ...]
    workdir: Path

    @property
    def controller(self) -> str:
        """The hostname slurmctld runs under (on the host side of the bridge)."""
        return f"{self.prefix}-head"

    @property
    def controller_address(self) -> str:
        return str(next(self.subnet.hosts()))

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    @property
    def slurm_conf(self) -> Path:
        return self.workdir / "slurm.conf"

    @property
    def env_file(self) -> Path:
        return self.workdir / "env.sh"

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise ClusterError(f"no node '{name}' in cluster {self.prefix}; nodes: {', '.join(n.name for n in self.nodes)}")


def clusters_dir() -> Path:
    """Where every cluster's folder lives: ONESTACK_CLUSTER_DIR, else the
    onestack cache (the nodes see it: the host's filesystem is their shared one)."""
    given = os.environ.get("ONESTACK_CLUSTER_DIR")
    return Path(given) if given else paths.cache() / "cluster"


def load(file: Path = DEFAULT_FILE, **overrides) -> Config:
    """The cluster described by `file` (schemas/cluster.schema.yaml), then
    what a schema cannot say (a private subnet that holds the nodes);
    `overrides` replace its keys (tests start a second cluster beside a
    user's with another prefix and subnet)."""
    try:
        data = dict(onestack_data.load(file, "cluster"))
    except onestack_data.InputError as err:  # one error type for the cluster's callers (make cluster)
        raise ClusterError(str(err)) from None
    data.update(overrides)
    prefix = _prefix(file, data["prefix"])
    subnet = _subnet(file, data["subnet"])
    count = _node_count(file, data["nodes"], subnet)
    hosts = list(subnet.hosts())
    nodes = tuple(Node(f"{prefix}-n{i + 1}", i, str(hosts[i + 1])) for i in range(count))
    return Config(file, prefix, subnet, nodes, _workdir(prefix))


def _prefix(file: Path, value) -> str:
    if not isinstance(value, str) or not PREFIX_PATTERN.fullmatch(value):
        raise ClusterError(
            f"{file}: prefix: {value!r} must be 2-8 lowercase letters or digits, starting with a "
            f"letter (it starts every interface name, at most 15 characters), e.g. oscl"
        )
    return value


# RFC 1918's private networks: Python's is_private also takes loopback,
# link-local (a cloud's metadata service), reserved and documentation ones.
PRIVATE = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]


def _subnet(file: Path, value) -> ipaddress.IPv4Network:
    try:
        subnet = ipaddress.IPv4Network(str(value))
    except ValueError as err:
        raise ClusterError(f"{file}: subnet: {value!r} is not an IPv4 network ({err}), e.g. 10.213.0.0/24") from None
    if not any(subnet.subnet_of(private) for private in PRIVATE):
        raise ClusterError(
            f"{file}: subnet: {subnet} is not within a private network of RFC 1918 (10.0.0.0/8, "
            f"172.16.0.0/12, 192.168.0.0/16), e.g. 10.213.0.0/24: "
            f"the cluster must never take an address of the outside world"
        )
    if subnet.prefixlen > 30:
        raise ClusterError(
            f"{file}: subnet: {subnet} holds no node beside the controller (its network and broadcast "
            "addresses, the controller's, a node's: /30 at least), e.g. 10.213.0.0/24"
        )
    return subnet


def _node_count(file: Path, value, subnet: ipaddress.IPv4Network) -> int:
    fits = min(MAX_NODES, subnet.num_addresses - 3)  # network, broadcast, controller
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= fits:
        raise ClusterError(
            f"{file}: nodes: {value!r} must be a whole number from 1 to {fits} "
            f"(what subnet {subnet} holds beside the controller, at most {MAX_NODES})"
        )
    return value


def _workdir(prefix: str) -> Path:
    workdir = clusters_dir().absolute() / prefix
    # It lands unquoted in slurm.conf.
    if not SAFE_PATH.fullmatch(str(workdir)) or len(str(workdir)) > MAX_WORKDIR_LENGTH:
        raise ClusterError(
            f"the cluster folder {workdir} must be a path of at most {MAX_WORKDIR_LENGTH} "
            f"characters of letters, digits and ._/+- (it lands unquoted in slurm.conf, "
            f"and each job step's socket lives under it, at most 107 bytes): set ONESTACK_CLUSTER_DIR to such a folder"
        )
    return workdir
