"""A cluster description (cluster/cluster.yaml) with a mistake is refused
with the file and the key, before anything is made: the schema's checks,
then what a schema cannot say (a private subnet that holds the nodes)."""

import pytest

from onestack import cluster


@pytest.fixture(autouse=True)
def short_cluster_folder(monkeypatch):
    """A cluster's folder is under ONESTACK_CACHE unless set, which a CI
    runner's long HOME can make too long for Slurm's sockets: the tests not
    about that length name a short one."""
    monkeypatch.setenv("ONESTACK_CLUSTER_DIR", "/tmp/oc")


@pytest.mark.parametrize(
    "text,error",
    [
        (
            "prefix: Bad-Name\nsubnet: 10.213.9.0/24\nnodes: 2\n",
            r"1 problem\(s\):\n  prefix: 'Bad-Name' does not match",
        ),
        ("prefix: ok\nsubnet: 8.8.8.0/24\nnodes: 2\n", r"subnet: 8.8.8.0/24 is not within a private network"),
        # Private to Python, not to RFC 1918: loopback, and link-local (a cloud's metadata service).
        ("prefix: ok\nsubnet: 127.8.0.0/24\nnodes: 2\n", r"subnet: 127.8.0.0/24 is not within a private network"),
        ("prefix: ok\nsubnet: 169.254.169.0/24\nnodes: 2\n", r"subnet: 169.254.169.0/24 is not within a"),
        (
            "prefix: ok\nsubnet: 10.213.9.1/24\nnodes: 2\n",
            r"subnet: '10.213.9.1/24' is not an IPv4 network \(.*host bits set",
        ),
        ("prefix: ok\nsubnet: 10.213.9.0/29\nnodes: 9\n", r"nodes: 9 must be a whole number from 1 to 5"),
        ("prefix: ok\nsubnet: 10.213.9.0/31\nnodes: 2\n", r"subnet: 10.213.9.0/31 holds no node beside the controller"),
    ],
)
def test_a_bad_description_is_refused_with_the_key(text, error, tmp_path):
    file = tmp_path / "cluster.yaml"
    file.write_text(text)
    with pytest.raises(cluster.ClusterError, match=rf"^{file}: .*{error}"):
        cluster.config.load(file)


def test_a_cluster_folder_too_long_for_slurms_sockets_is_refused(tmp_path, monkeypatch):
    """slurmstepd's socket path lives under the folder: one too long would
    let `up` succeed and every job fail."""
    file = tmp_path / "cluster.yaml"
    file.write_text("prefix: ok\nsubnet: 10.213.9.0/24\nnodes: 2\n")
    monkeypatch.setenv("ONESTACK_CLUSTER_DIR", "/" + "c" * cluster.config.MAX_WORKDIR_LENGTH)
    with pytest.raises(cluster.ClusterError, match="must be a path of at most .* set ONESTACK_CLUSTER_DIR"):
        cluster.config.load(file)
    monkeypatch.setenv("ONESTACK_CLUSTER_DIR", "/" + "c" * (cluster.config.MAX_WORKDIR_LENGTH - len("/ok") - 1))
    assert len(str(cluster.config.load(file).workdir)) == cluster.config.MAX_WORKDIR_LENGTH


@pytest.mark.parametrize(
    "subnet, held",
    [("10.255.255.0/24", "10.255.255.53, a resolver of /etc/resolv.conf"), ("10.9.0.0/16", "10.9.0.1, a gateway")],
)
def test_a_subnet_that_holds_the_hosts_resolver_or_gateway_is_refused(tmp_path, monkeypatch, subnet, held):
    """Reached through the default route, not on a network the host routes
    itself: with the cluster's bridge up, the host's own lookups and
    traffic would go to the nodes."""
    file = tmp_path / "cluster.yaml"
    file.write_text(f"prefix: ok\nsubnet: {subnet}\nnodes: 2\n")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.255.255.53\nnameserver fe80::1%eth0\n")
    monkeypatch.setattr(cluster.network, "RESOLV_CONF", resolv)
    routes = [{"dst": "default", "gateway": "10.9.0.1", "dev": "eth0"}, {"dst": "10.8.0.0/24", "dev": "eth0"}]
    monkeypatch.setattr(cluster.network, "_ip_json", lambda *args: routes if args[-2:] == ("table", "all") else [])
    with pytest.raises(cluster.ClusterError, match=rf"^{file}: subnet: {subnet} holds {held}"):
        cluster.network.check_subnet_free(cluster.config.load(file))


def test_a_subnet_another_routing_table_routes_is_refused(tmp_path, monkeypatch):
    """A VPN's routes (Tailscale's table 52, consulted before the main
    table): the host's own traffic to the nodes would have left by it."""
    file = tmp_path / "cluster.yaml"
    file.write_text("prefix: ok\nsubnet: 10.213.9.0/24\nnodes: 2\n")
    monkeypatch.setattr(cluster.network, "RESOLV_CONF", tmp_path / "none")
    vpn = [{"dst": "10.213.0.0/16", "dev": "tailscale0", "table": "52"}]
    monkeypatch.setattr(cluster.network, "_ip_json", lambda *args: vpn if args[-2:] == ("table", "all") else [])
    with pytest.raises(cluster.ClusterError, match=r"overlaps 10.213.0.0/16, a network this machine routes"):
        cluster.network.check_subnet_free(cluster.config.load(file))


def test_a_removal_deletes_no_interface_of_another_name_the_record_holds(monkeypatch):
    """The record is a file its user can write; the removal runs as root:
    `["interface", "eth0"]` in it had `make cluster-down` delete eth0."""
    conf = cluster.config.load(cluster.config.DEFAULT_FILE)
    deleted = []
    monkeypatch.setattr(cluster, "_end_processes", lambda config: [])
    monkeypatch.setattr(cluster.state, "made", lambda workdir: [["interface", "eth0"], ["interface", conf.bridge]])
    monkeypatch.setattr(cluster.state, "forget", lambda workdir: None)
    monkeypatch.setattr(cluster, "leftovers", lambda config: [])
    monkeypatch.setattr(cluster.network, "namespaces", lambda prefix: [])
    monkeypatch.setattr(cluster.network, "release_netns_dir", lambda: False)
    monkeypatch.setattr(cluster.network, "veths", lambda prefix: [])
    monkeypatch.setattr(cluster.network, "links", lambda prefix: [])
    monkeypatch.setattr(cluster.network, "delete_link", lambda name: deleted.append(name) or True)
    monkeypatch.setattr(cluster.network, "firewall_tables", lambda prefix: [])
    monkeypatch.setattr(cluster, "_require_root", lambda: None)
    assert cluster.down(conf) == [f"interface {conf.bridge}"] and deleted == [conf.bridge]


def test_a_cluster_in_use_is_not_removed_as_a_leftover(monkeypatch):
    """A second test session on the same machine saw the first's live
    cluster as left over, and removed it in the middle of its jobs."""
    conf = cluster.config.load(cluster.config.DEFAULT_FILE)
    monkeypatch.setattr(cluster, "_require_root", lambda: None)
    monkeypatch.setattr(cluster, "_remove", lambda config: pytest.fail("removed a cluster in use"))
    with cluster._exclusive(conf):
        with pytest.raises(cluster.ClusterError, match=rf"another making, use or removal of cluster {conf.prefix} is"):
            cluster.down(conf)
