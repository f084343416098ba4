"""The virtual cluster itself: its nodes are up and distinct, a job spans
them, and no node can reach anything outside the cluster."""

import functools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from onestack import cluster
from onestack.paths import REPO

# Addresses no namespace may reach: two documentation networks (TEST-NET-2
# and -3), which nothing on the Internet answers. Checked without sending
# anything first.
OUTSIDE = ["198.51.100.7", "203.0.113.9"]

# Tried from inside a node: a TCP connect must fail at once, with ENETUNREACH
# (no route), not after a timeout (which would mean packets left).
CONNECT = """
import errno, json, socket, sys, time
results = {}
for address in sys.argv[1:]:
    s = socket.socket()
    s.settimeout(2)
    start = time.monotonic()
    try:
        s.connect((address, 80))
        code = 0
    except OSError as err:
        code = err.errno
    results[address] = [errno.errorcode.get(code, str(code)), time.monotonic() - start]
print(json.dumps(results))
"""


def test_sinfo_shows_the_nodes_idle(virtual_cluster):
    proc = virtual_cluster.command("sinfo", "--noheader", "--Node", "--format=%N %T")
    print(proc.stdout)
    names = [node.name for node in virtual_cluster.config.nodes]
    assert len(names) == 2
    assert dict(line.split() for line in proc.stdout.splitlines()) == {name: "idle" for name in names}


def test_a_job_runs_on_two_distinct_hosts(virtual_cluster):
    proc = virtual_cluster.command("srun", "--nodes=2", "--ntasks=2", "hostname", timeout=60)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == [node.name for node in virtual_cluster.config.nodes]


def test_each_node_has_its_own_identity_and_cores(virtual_cluster):
    """Hostname, boot id (what UCX tells machines apart by) and, with one
    rank per node, a core of its own."""
    script = "echo $(hostname) $(cat /proc/sys/kernel/random/boot_id) $(grep Cpus_allowed_list /proc/self/status)"
    proc = virtual_cluster.command("srun", "--nodes=2", "--ntasks=2", "sh", "-c", script, timeout=60)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    hosts, boot_ids, cores = zip(*((row[0], row[1], row[-1]) for row in rows))
    assert len(set(hosts)) == len(set(boot_ids)) == 2
    host_boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert host_boot_id not in boot_ids
    if len(_host_cores()) < 2:
        pytest.skip(
            f"this host has one core ({os.cpu_count()} threads of it): no node has a core of its own "
            f"(both ranks on {cores}); hostnames and boot ids checked"
        )
    assert len(set(cores)) == 2, f"one rank per node, both on core(s) {cores}"


def _host_cores() -> set:
    """The host's cores, (package, core), over its online CPUs: a VM's 2
    CPUs may be 2 threads of one core, which Slurm gives a task whole."""
    topology = Path("/sys/devices/system/cpu")
    return {
        tuple((cpu / "topology" / f).read_text().strip() for f in ("physical_package_id", "core_id"))
        for cpu in topology.glob("cpu[0-9]*")
        if (cpu / "topology").is_dir()
    }


def test_four_ranks_fit_on_two_nodes(virtual_cluster):
    proc = virtual_cluster.command("srun", "--nodes=2", "--ntasks=4", "hostname", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == sorted(2 * [node.name for node in virtual_cluster.config.nodes])


def test_nodes_reach_nothing_outside(virtual_cluster):
    config = virtual_cluster.config
    for node in config.nodes:
        routes = json.loads(virtual_cluster.on_node(node.name, "ip", "-j", "route", "show").stdout)
        print(node.name, routes)
        assert [route["dst"] for route in routes] == [str(config.subnet)], "only the bridge's subnet"
        ipv6 = virtual_cluster.on_node(node.name, "ip", "-6", "route", "show").stdout
        assert ipv6.strip() == "", f"IPv6 routes on {node.name}: {ipv6}"
        for address in OUTSIDE:
            lookup = virtual_cluster.on_node(node.name, "ip", "route", "get", address)
            assert lookup.returncode != 0 and "unreachable" in lookup.stderr, lookup.stdout
        # Only now, with no route out, a real connect attempt.
        attempt = virtual_cluster.on_node(node.name, sys.executable, "-c", CONNECT, *OUTSIDE)
        results = json.loads(attempt.stdout)
        print(node.name, results)
        for address, (error, seconds) in results.items():
            assert error == "ENETUNREACH" and seconds < 1, f"{node.name} -> {address}: {error} after {seconds} s"
        # ... while the other node and the head node answer (refused: nothing listens on port 80).
        peers = [config.controller_address] + [other.address for other in config.nodes if other != node]
        results = json.loads(virtual_cluster.on_node(node.name, sys.executable, "-c", CONNECT, *peers).stdout)
        assert {error for error, _ in results.values()} == {"ECONNREFUSED"}, results
    # A job runs as root and could add a route via the bridge: the host never
    # forwards what comes in on it, whatever the host forwards otherwise.
    forwarding = Path(f"/proc/sys/net/ipv4/conf/{config.bridge}/forwarding").read_text().strip()
    assert forwarding == "0", f"{config.bridge} forwards: {forwarding}"


# From inside a node: connect to the address and port given, print the errno's name ("" if it connected).
CONNECT_TO = """
import errno, socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()
    print("")
except OSError as err:
    print(errno.errorcode.get(err.errno, str(err)))
"""


def test_a_node_reaches_no_service_of_the_host(virtual_cluster):
    """The host is the head node, its address on the cluster's bridge: a
    service of the host bound to every address (ssh, an agent) answers no
    node; the ports of the cluster's head-side programs (slurmctld, srun,
    the MPI launchers: the host's ephemeral range) do."""
    config = virtual_cluster.config
    low, high = cluster.network.ephemeral_ports()
    node = config.nodes[0]
    with socket.socket() as service, socket.socket() as launcher:
        service.bind(("0.0.0.0", next(p for p in range(low - 1, 1024, -1) if _free(p))))
        launcher.bind(("0.0.0.0", 0))
        for listener in (service, launcher):
            listener.listen()
        assert low <= launcher.getsockname()[1] <= high
        said = {
            name: virtual_cluster.on_node(
                node.name, sys.executable, "-c", CONNECT_TO, config.controller_address, str(s.getsockname()[1])
            ).stdout.strip()
            for name, s in (("service", service), ("launcher", launcher))
        }
    print(said)
    assert said == {"service": "ECONNREFUSED", "launcher": ""}, said


# The LAN of test_nothing_from_elsewhere_reaches_the_clusters_addresses: a
# link-local /30 (the host side first), routed nowhere else.
LAN = ("169.254.213.1/30", "169.254.213.2/30")


def test_nothing_from_elsewhere_reaches_the_clusters_addresses(virtual_cluster):
    """The host takes a packet for any of its addresses on any interface: a
    machine of its LAN that routed the cluster's subnet to it reached
    slurmctld and the launchers by the controller's address. The LAN here is
    a namespace of the test's own, on a veth pair outside the bridge, named
    like the cluster's parts so that its removal takes them too."""
    config = virtual_cluster.config
    lan, host_side = f"{config.prefix}-lan", f"{config.prefix}-lan"
    ip = functools.partial(subprocess.run, text=True, capture_output=True, timeout=30, check=True)
    ip(["ip", "netns", "add", lan])
    try:
        ip(["ip", "link", "add", host_side, "type", "veth", "peer", "name", "eth0", "netns", lan])
        ip(["ip", "addr", "add", LAN[0], "dev", host_side])
        ip(["ip", "link", "set", host_side, "up"])
        for command in (["addr", "add", LAN[1], "dev", "eth0"], ["link", "set", "eth0", "up"]):
            ip(["ip", "-n", lan, *command])
        ip(["ip", "-n", lan, "route", "add", str(config.subnet), "via", LAN[0].split("/")[0]])
        with socket.socket() as launcher:
            launcher.bind(("0.0.0.0", 0))
            launcher.listen()
            port = str(launcher.getsockname()[1])
            from_lan = ip(
                ["ip", "netns", "exec", lan, sys.executable, "-c", CONNECT_TO, config.controller_address, port]
            )
            from_node = virtual_cluster.on_node(
                config.nodes[0].name, sys.executable, "-c", CONNECT_TO, config.controller_address, port
            )
        print("from the LAN:", from_lan.stdout, "from a node:", from_node.stdout)
        assert from_lan.stdout.strip() == "timed out", "a machine outside reached the controller's address"
        assert from_node.stdout.strip() == "", "a node did not reach the launchers' ports"
    finally:
        subprocess.run(["ip", "netns", "delete", lan], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "delete", host_side], capture_output=True, timeout=30)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def test_the_controller_listens_on_the_bridge_alone(virtual_cluster):
    """slurmctld runs in the host's network namespace: bound to every
    address, it would take connections from outside the machine."""
    config = virtual_cluster.config
    pid = (config.workdir / "slurmctld.pid").read_text().strip()
    listening = subprocess.run(["ss", "-Hltnp"], text=True, capture_output=True, timeout=30, check=True).stdout
    addresses = [line.split()[3] for line in listening.splitlines() if f"pid={pid}," in line]
    print("slurmctld listens on", addresses)
    assert addresses and all(a.rsplit(":", 1)[0] == config.controller_address for a in addresses), addresses


def test_the_env_file_points_slurm_at_the_cluster(virtual_cluster):
    """What `make -s cluster-env` prints, sourced by a user's shell."""
    env = {**os.environ, "ONESTACK_CLUSTER_DIR": str(virtual_cluster.config.workdir.parent)}
    env.pop("SLURM_CONF", None)
    printed = subprocess.run(
        ["make", "-s", "cluster-env", f"CLUSTER_CONFIG={virtual_cluster.config.file}"],
        cwd=REPO,
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    env_file = printed.stdout.strip()
    shell = subprocess.run(
        ["bash", "-c", 'source "$1" && sinfo --noheader --format=%D', "bash", env_file],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.strip() == str(len(virtual_cluster.config.nodes))
