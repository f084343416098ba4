"""The cluster's network: a bridge of its own with an address on the host
side, one network namespace per node joined to it by a veth pair. Nothing
else: no default route anywhere, so a node can reach the other nodes and
the host's bridge address, and nothing outside this machine."""

import ipaddress
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

from onestack import render
from onestack.cluster.config import NODE_INTERFACE, TEMPLATES, ClusterError, Config, Node


@dataclass(frozen=True)
class Counters:
    rx_bytes: int
    tx_bytes: int


def ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], text=True, capture_output=True, timeout=30)
    if proc.returncode != 0:
        raise ClusterError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc.stdout


def _ip_json(*args: str) -> list:
    return json.loads(ip("-j", *args) or "[]")


# Absent on a host booted with IPv6 off (ipv6.disable=1): nothing to turn off.
IPV6_SYSCTL = Path("/proc/sys/net/ipv6")


def _no_ipv6(sysctl_root: str, interface: str) -> None:
    """IPv6 off: no link-local addresses and router solicitations, one address
    per node for the MPIs to choose from (Open MPI would offer both)."""
    if not IPV6_SYSCTL.is_dir():
        return
    with open(f"{sysctl_root}/{interface}/disable_ipv6", "w") as knob:
        knob.write("1")


def check_subnet_free(config: Config) -> None:
    """The subnet must not overlap a network the host already routes, nor
    hold an address it reaches through a gateway (its resolver, the gateway
    itself): the host would send some of its own traffic into the cluster,
    or the reverse. Every routing table's routes: a VPN's (Tailscale's
    table 52) are consulted before the main table's."""
    for route in _routes():
        if route["dst"] == "default" or route.get("dev") == config.bridge:
            continue
        network = ipaddress.ip_network(route["dst"], strict=False)
        if network.overlaps(config.subnet):
            raise ClusterError(
                f"{config.file}: subnet: {config.subnet} overlaps {network}, a network this "
                f"machine routes (dev {route.get('dev')}): choose another private subnet"
            )
    for address, what in _reached_addresses():
        if address in config.subnet:
            raise ClusterError(
                f"{config.file}: subnet: {config.subnet} holds {address}, {what}: choose another private subnet"
            )


RESOLV_CONF = Path("/etc/resolv.conf")


def _routes() -> List[dict]:
    """The host's IPv4 routes of every table (main, local, a VPN's)."""
    return _ip_json("-4", "route", "show", "table", "all")


def _reached_addresses() -> List[tuple]:
    """(address, what it is) of the gateways of the host's routes and the
    resolvers of its /etc/resolv.conf."""
    found = [
        (ipaddress.ip_address(route["gateway"]), "a gateway of this machine's routes")
        for route in _routes()
        if "gateway" in route
    ]
    for line in RESOLV_CONF.read_text().splitlines() if RESOLV_CONF.is_file() else []:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                found.append((ipaddress.ip_address(words[1]), "a resolver of /etc/resolv.conf"))
            except ValueError:
                continue  # a scoped IPv6 address (fe80::1%eth0): not in an IPv4 subnet either
    return found


def make_bridge(config: Config) -> None:
    ip("link", "add", config.bridge, "type", "bridge")
    _no_ipv6("/proc/sys/net/ipv6/conf", config.bridge)
    ip("addr", "add", f"{config.controller_address}/{config.subnet.prefixlen}", "dev", config.bridge)
    # No route out through the host: jobs run as root and may add a default
    # route via the bridge address; the host never forwards what comes in on
    # the bridge (on a host that forwards, a Docker or libvirt one, it would).
    # The setting goes with the bridge.
    Path(f"/proc/sys/net/ipv4/conf/{config.bridge}/forwarding").write_text("0\n")
    ip("link", "set", config.bridge, "up")


def firewall_table(prefix: str) -> str:
    return f"onestack_{prefix}"


def ephemeral_ports() -> Tuple[int, int]:
    """The host's range for ports a program asks the kernel for (port 0):
    where slurmctld's (slurm._free_port), srun's and the MPI launchers'
    listening ports come from."""
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def make_firewall(config: Config) -> None:
    """What comes in on the bridge: the host is the head node, so its
    address is on the cluster's network, and every service of the host
    bound to all addresses (ssh, an agent, a resolver) would answer the
    nodes. Let in only replies and the ports of the cluster's head-side
    programs (the ephemeral range) at the controller's address (not at the
    host's other addresses: another cluster's, the LAN's); refuse the rest at
    once (a TCP reset, as a closed port: a connect fails fast). Nothing that
    comes in on the bridge is routed out, whatever the host's forwarding is
    set to later (Docker or libvirt turn it on for every interface), and
    nothing from elsewhere reaches the cluster's addresses: the host takes a
    packet for any of its addresses on any interface, so a machine of its
    LAN could otherwise reach slurmctld by the controller's address."""
    low, high = ephemeral_ports()
    rules = render.text(
        TEMPLATES,
        "firewall.nft.j2",
        table=firewall_table(config.prefix),
        bridge=config.bridge,
        subnet=config.subnet,
        controller=config.controller_address,
        low=low,
        high=high,
    )
    _check(subprocess.run([_nft(), "-f", "-"], input=rules, text=True, capture_output=True, timeout=30))


def _nft() -> str:
    """nft, also from the sbin folders a user's PATH may lack; "" if this
    machine has none (then no table of the cluster's either)."""
    return shutil.which("nft", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or ""


def firewall_tables(prefix: str) -> List[str]:
    """The cluster's tables in the host's ruleset (none where nft is missing
    or, not root, cannot read it)."""
    if not _nft():
        return []
    proc = subprocess.run([_nft(), "-j", "list", "tables"], text=True, capture_output=True, timeout=30)
    if proc.returncode != 0:
        return []
    entries = json.loads(proc.stdout or "{}").get("nftables", [])
    names = {entry["table"]["name"] for entry in entries if "table" in entry and entry["table"]["family"] == "inet"}
    return sorted(names & {firewall_table(prefix)})


def delete_firewall(name: str) -> None:
    _check(subprocess.run([_nft(), "delete", "table", "inet", name], text=True, capture_output=True, timeout=30))


def make_namespace(node: Node) -> None:
    ip("netns", "add", node.name)


def make_link(config: Config, node: Node) -> None:
    """The veth pair: the host side on the bridge, the other side the node's eth0."""
    ip("link", "add", node.name, "type", "veth", "peer", "name", NODE_INTERFACE, "netns", node.name)
    _no_ipv6("/proc/sys/net/ipv6/conf", node.name)
    # The node's IPv6 knobs live in its namespace's /proc/sys.
    if IPV6_SYSCTL.is_dir():
        knobs = [f"net.ipv6.conf.{scope}.disable_ipv6=1" for scope in ("all", "default", NODE_INTERFACE)]
        _check(in_node(node, "sysctl", "-q", "-w", *knobs))
    ip("link", "set", node.name, "master", config.bridge, "up")
    ip("-n", node.name, "addr", "add", f"{node.address}/{config.subnet.prefixlen}", "dev", NODE_INTERFACE)
    ip("-n", node.name, "link", "set", "lo", "up")
    ip("-n", node.name, "link", "set", NODE_INTERFACE, "up")


def in_node(node: Node, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """A command in the node's network namespace (with that namespace's /sys),
    for checks and set-up; jobs run under the node's slurmd instead."""
    return subprocess.run(["ip", "netns", "exec", node.name, *argv], text=True, capture_output=True, timeout=timeout)


def _check(proc: subprocess.CompletedProcess) -> None:
    if proc.returncode != 0:
        raise ClusterError(f"`{' '.join(proc.args)}` failed: {proc.stderr.strip()}")


def set_link(node: Node, up: bool) -> None:
    """Cut (or restore) the node's cable: the host side of its veth pair."""
    ip("link", "set", node.name, "up" if up else "down")


def routes(node: Node) -> List[dict]:
    return _ip_json("-n", node.name, "route", "show", "table", "all")


def counters(node: Node) -> Counters:
    """Bytes through the node's cluster interface since it was made."""
    stats = _ip_json("-n", node.name, "-s", "link", "show", "dev", NODE_INTERFACE)[0]["stats64"]
    return Counters(stats["rx"]["bytes"], stats["tx"]["bytes"])


def namespaces(prefix: str) -> List[str]:
    names = [entry["name"] for entry in _ip_json("netns", "list")]
    return sorted(name for name in names if name.startswith(f"{prefix}-"))


def links(prefix: str) -> List[str]:
    """Interfaces of the host named like the cluster's (the bridge, veth host sides)."""
    return sorted(entry["ifname"] for entry in _ip_json("link", "show") if entry["ifname"].startswith(f"{prefix}-"))


def pids_in(namespace: str) -> List[int]:
    proc = subprocess.run(["ip", "netns", "pids", namespace], text=True, capture_output=True, timeout=30)
    return [int(pid) for pid in proc.stdout.split()]


def delete_namespace(name: str) -> None:
    """Its veth end goes with it, and so the pair. Processes must be gone first:
    they would keep the namespace alive, nameless."""
    ip("netns", "delete", name)


# Where `ip netns` keeps its namespaces: the first `ip netns add` makes it a
# mount point of its own (bound onto itself, shared), which `ip netns delete`
# leaves behind.
NETNS_DIR = Path("/run/netns")


def release_netns_dir() -> bool:
    """Once no namespace is left in it (any program's), NETNS_DIR is
    unmounted and removed, as before the first namespace: the next `ip
    netns add` makes it again. True if it was there to remove."""
    if not NETNS_DIR.is_dir() or any(NETNS_DIR.iterdir()):
        return False
    for _ in range(4):  # a mount stacked on another, at most a few
        if not _mount_point(NETNS_DIR):
            break
        if subprocess.run(["umount", str(NETNS_DIR)], capture_output=True, timeout=30).returncode != 0:
            return False  # busy: another cluster's `ip netns add` meanwhile; it stays
    try:
        NETNS_DIR.rmdir()
    except OSError:  # a namespace added meanwhile
        return False
    return True


def _mount_point(folder: Path) -> bool:
    """In /proc/self/mountinfo (os.path.ismount misses a folder bound onto
    itself: the same device as its parent)."""
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return any(line.split()[4] == str(folder) for line in lines)


def delete_link(name: str) -> bool:
    """True if it was there to delete."""
    if not link_exists(name):
        return False
    try:
        ip("link", "delete", name)
    except ClusterError:
        if link_exists(name):
            raise
        return False  # went with its namespace meanwhile
    return True


def link_exists(name: str) -> bool:
    return subprocess.run(["ip", "link", "show", "dev", name], capture_output=True, timeout=30).returncode == 0


def veths(prefix: str) -> List[str]:
    return sorted(
        entry["ifname"]
        for entry in _ip_json("link", "show", "type", "veth")
        if entry["ifname"].startswith(f"{prefix}-")
    )


def wait_until_gone(names: List[str], timeout: float) -> None:
    """Bounded wait for interfaces the kernel is deleting by itself."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(map(link_exists, names)):
        time.sleep(0.1)


def all_counters(config: Config) -> Dict[str, Counters]:
    return {node.name: counters(node) for node in config.nodes}
