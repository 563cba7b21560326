"""What a kube-proxy lab node has besides kube-proxy's rules, without a running lab: br_netfilter
loading and unloading (on a fake /proc and /sys: this machine has the module built in), kube-proxy's
conntrack settings, the API server's handling of status and healthCheckNodePort, the health
server's replies, and `labkit doctor`'s findings."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit.errors import ConfigError
from labkit.kubeproxy import healthserver, node
from labkit.kubeproxy.cluster_state import in_api_words, load_scenario
from labkit.ledger import Ledger
from labkit.netlab import brnetfilter
from labkit.paths import BUILTIN_LABS
from support import labkit

SCENARIO = BUILTIN_LABS / "kube-proxy" / "scenarios" / "cluster.yaml"


# -- br_netfilter -------------------------------------------------------------------------------------


class FakeKernel:
    """modprobe and rmmod on a fake root: loading makes the three sysctls appear at 1 (as the module
    does in every namespace), unloading removes them."""

    def __init__(self, root: Path):
        self.host = brnetfilter.Host(root)
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        if argv == ["modprobe", "br_netfilter"]:
            self.host.sysctl_dir.mkdir(parents=True)
            for name in brnetfilter.SYSCTLS:
                (self.host.sysctl_dir / name).write_text("1\n")
            (self.host.module_dir).mkdir(parents=True)
            (self.host.module_dir / "refcnt").write_text("0\n")
        elif argv == ["rmmod", "br_netfilter"]:
            for name in brnetfilter.SYSCTLS:
                (self.host.sysctl_dir / name).unlink()
        return subprocess.CompletedProcess(argv, 0, "", "")


def lab_env(tmp_path: Path, token: str):
    return SimpleNamespace(token=token, ledger=Ledger(tmp_path / f"{token}.ledger"))


def test_br_netfilter_is_loaded_recorded_and_unloaded_by_the_last_lab(tmp_path):
    kernel = FakeKernel(tmp_path / "root")
    first, second = lab_env(tmp_path, "a/kube-proxy"), lab_env(tmp_path, "b/kube-proxy")
    assert brnetfilter.ensure(first, kernel.host, run=kernel) is True
    assert kernel.calls == [["modprobe", "br_netfilter"]]
    # the ledger names it before the module was loaded, so cleanup finds it after a crash
    [entry] = first.ledger.entries()
    assert entry["kind"] == "kmodule" and entry["name"] == "br_netfilter"
    # loading turned bridged traffic into iptables in the host's namespace too: set back
    assert all((kernel.host.sysctl_dir / n).read_text() == "0\n" for n in brnetfilter.SYSCTLS)
    # a second lab relies on the same load: it claims it, nothing is loaded again
    assert brnetfilter.ensure(second, kernel.host, run=kernel) is True and len(kernel.calls) == 1
    assert brnetfilter.remove_recorded(entry, run=kernel) is True
    assert brnetfilter.present(kernel.host) and len(kernel.calls) == 1        # the other lab still needs it
    [other] = second.ledger.entries()
    assert brnetfilter.remove_recorded(other, run=kernel) is True
    # only this module: `modprobe -r` would take bridge, stp and llc along, which the host may have
    # had before (labkit.kmodules gives back those a lab made the kernel load)
    assert kernel.calls[-1] == ["rmmod", "br_netfilter"] and not brnetfilter.present(kernel.host)
    assert not (tmp_path / "root" / "run" / "labkit").exists()
    assert brnetfilter.remove_recorded(other, run=kernel) is False            # idempotent


def test_br_netfilter_there_before_labkit_is_left_alone(tmp_path):
    kernel = FakeKernel(tmp_path / "root")
    kernel(["modprobe", "br_netfilter"])                    # loaded by the machine's owner
    env = lab_env(tmp_path, "a/kube-proxy")
    assert brnetfilter.ensure(env, kernel.host, run=kernel) is False
    assert env.ledger.entries() == [] and len(kernel.calls) == 1
    assert all((kernel.host.sysctl_dir / n).read_text() == "1\n" for n in brnetfilter.SYSCTLS)


def test_br_netfilter_held_by_something_else_stays_loaded(tmp_path):
    kernel = FakeKernel(tmp_path / "root")
    env = lab_env(tmp_path, "a/kube-proxy")
    brnetfilter.ensure(env, kernel.host, run=kernel)
    (kernel.host.module_dir / "refcnt").write_text("1\n")
    brnetfilter.remove_recorded(env.ledger.entries()[0], run=kernel)
    assert ["modprobe", "-r", "br_netfilter"] not in kernel.calls and brnetfilter.present(kernel.host)


def test_this_machine_has_per_namespace_bridge_sysctls():
    """Built in here: present, and a fresh namespace has its own copy (Linux >= 5.3)."""
    assert brnetfilter.present() and brnetfilter.per_namespace() is True
    assert brnetfilter.describe()[0] == "ok"


def test_doctor_explains_br_netfilter_and_nfacct():
    findings = {f["name"]: f for f in json.loads(labkit("doctor", "-o", "json").stdout)}
    assert findings["br_netfilter"]["status"] == "ok" and "per network namespace" in findings["br_netfilter"]["detail"]
    assert findings["nfacct"]["status"] == "ok"


# -- kube-proxy's conntrack settings --------------------------------------------------------------------


def test_conntrack_settings_follow_kube_proxy_defaults_and_configuration():
    default = node.conntrack_settings({}, cpus=2)
    assert default.max == 131072                        # max(32768 * 2, 131072)
    assert default.per_namespace() == ["net.netfilter.nf_conntrack_tcp_timeout_established=86400",
                                       "net.netfilter.nf_conntrack_tcp_timeout_close_wait=3600"]
    assert node.conntrack_settings({}, cpus=8).max == 262144
    custom = node.conntrack_settings({"conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "2h30m",
                                                    "tcpCloseWaitTimeout": "0s", "tcpBeLiberal": True}})
    assert custom.max == 0 and custom.per_namespace() == ["net.netfilter.nf_conntrack_tcp_timeout_established=9000",
                                                          "net.netfilter.nf_conntrack_tcp_be_liberal=1"]
    with pytest.raises(ValueError, match="duration"):
        node.conntrack_settings({"conntrack": {"tcpEstablishedTimeout": "a day"}})


# -- the API server's status and healthCheckNodePort ------------------------------------------------------


def lb(name, **spec):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "selector": {"app": "shop"}, "ports": [{"name": "http", "port": 80}], **spec}}


def test_status_in_an_applied_service_is_ignored_and_kept_on_update():
    state = load_scenario(SCENARIO)
    doc = lb("shop-lb")
    doc["status"] = {"loadBalancer": {"ingress": [{"ip": "192.168.50.200"}]}}
    state.apply([doc], "test")
    assert state.service("shop-lb")["status"] == {"loadBalancer": {}}            # created: empty status
    state.apply_status([{"kind": "Service", "metadata": {"name": "shop-lb"},
                         "status": {"loadBalancer": {"ingress": [{"ip": "192.168.50.200"}]}}}], "test")
    doc["status"] = {"loadBalancer": {"ingress": [{"ip": "192.168.50.201"}]}}
    doc["spec"]["sessionAffinity"] = "ClientIP"
    assert state.apply([doc], "test") == ["service/shop-lb configured"]
    assert state.service("shop-lb")["status"]["loadBalancer"]["ingress"] == [{"ip": "192.168.50.200"}]
    with pytest.raises(ConfigError, match="no Service default/nope"):
        state.apply_status([{"kind": "Service", "metadata": {"name": "nope"}, "status": {}}], "test")


def test_health_check_node_port_is_allocated_kept_and_released():
    state = load_scenario(SCENARIO)
    state.apply([lb("shop-lb", externalTrafficPolicy="Local")], "test")
    spec = state.service("shop-lb")["spec"]
    port = spec["healthCheckNodePort"]
    assert 30000 <= port <= 32767 and port != spec["ports"][0]["nodePort"]
    state.apply([lb("shop-lb", externalTrafficPolicy="Local")], "test")         # replace without it: kept
    assert state.service("shop-lb")["spec"]["healthCheckNodePort"] == port
    changed = [lb("shop-lb", externalTrafficPolicy="Local", healthCheckNodePort=port + 1)]
    with pytest.raises(ConfigError) as info:
        state.apply(changed, "test")
    # kube-apiserver's words (validation.go validateServiceExternalTrafficFieldsUpdate)
    assert in_api_words(info.value, changed).problem == \
        'The Service "shop-lb" is invalid: spec.healthCheckNodePort: Forbidden: field is immutable'
    state.apply([lb("shop-lb", externalTrafficPolicy="Cluster", healthCheckNodePort=port)], "test")
    assert "healthCheckNodePort" not in state.service("shop-lb")["spec"]        # no longer needed: released
    other = [lb("other", type="NodePort", healthCheckNodePort=31999)]
    with pytest.raises(ConfigError) as info:
        state.apply(other, "test")
    assert in_api_words(info.value, other).problem == (
        'The Service "other" is invalid: spec.healthCheckNodePort: Invalid value: 31999: may only be set when '
        "`type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'")
    state.apply([lb("shop-lb2", externalTrafficPolicy="Local", healthCheckNodePort=31999)], "test")
    with pytest.raises(ConfigError, match="already allocated"):
        state.apply([lb("shop-lb3", externalTrafficPolicy="Local", healthCheckNodePort=31999)], "test")
    # leaving Local with another port than its own: not wiped (dropTypeDependentFields), refused
    moved = [lb("shop-lb2", externalTrafficPolicy="Cluster", healthCheckNodePort=31998)]
    with pytest.raises(ConfigError) as info:
        state.apply(moved, "test")
    assert "spec.healthCheckNodePort: Invalid value: 31998: may only be set" in in_api_words(info.value, moved).problem


# -- the health server ---------------------------------------------------------------------------------


def _get(port: int) -> tuple[int, dict, dict]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_health_server_answers_like_kube_proxy(tmp_path):
    """Runs in an unshared network namespace (no port of the host is used)."""
    config = tmp_path / "hc.json"
    config.write_text(json.dumps({"services": [
        {"namespace": "default", "name": "a", "port": 31001, "localEndpoints": 2},
        {"namespace": "default", "name": "b", "port": 31002, "localEndpoints": 0}]}))
    script = f"""
import json, subprocess, sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
server = subprocess.Popen([sys.executable, {healthserver.__file__!r}, "--config", {str(config)!r}])
try:
    from test_kube_proxy_node import _get
    for _ in range(100):
        try:
            print(json.dumps([_get(31001), _get(31002)])); break
        except OSError:
            time.sleep(0.05)
    # a Service gains local endpoints: the server reads its file again
    open({str(config)!r}, "w").write(json.dumps({{"services": [
        {{"namespace": "default", "name": "b", "port": 31002, "localEndpoints": 1}}]}}))
    time.sleep(0.6)
    print(json.dumps(_get(31002)))
    try:
        _get(31001); print("still open")
    except OSError:
        print("closed")
finally:
    server.kill()
"""
    out = subprocess.run(["unshare", "--net", sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stderr
    (ok, ok_headers, ok_body), (down, _, down_body) = json.loads(lines[0])
    assert ok == 200 and ok_body == {"service": {"namespace": "default", "name": "a"}, "localEndpoints": 2,
                                     "serviceProxyHealthy": True}
    assert ok_headers["X-Load-Balancing-Endpoint-Weight"] == "2" and ok_headers["Content-Type"] == "application/json"
    assert down == 503 and down_body["localEndpoints"] == 0
    assert json.loads(lines[1])[0] == 200 and lines[2] == "closed"


def test_kube_proxys_conntrack_sysctls_come_after_kubelets_rules(monkeypatch):
    """The conntrack sysctls exist only once nf_conntrack is loaded; on a fresh machine kubelet's
    KUBE-FIREWALL rule (-m conntrack) is what loads it, so they are written after it, as kube-proxy
    starts after kubelet on a real node."""
    calls = []
    monkeypatch.setattr(node, "run_in", lambda netns, argv, **kw: calls.append(("sysctl", argv[2:])))
    monkeypatch.setattr(node.load, "restore", lambda netns, text, **kw: calls.append(("restore", text)))
    node.prepare("ns", {"clusterCIDR": "10.244.0.0/16"})
    kinds = [kind for kind, _ in calls]
    firewall = next(i for i, (kind, text) in enumerate(calls) if kind == "restore" and "-m conntrack" in text)
    conntrack = next(i for i, (kind, argv) in enumerate(calls)
                     if kind == "sysctl" and any("nf_conntrack" in a for a in argv))
    bridge = next(i for i, (kind, argv) in enumerate(calls)
                  if kind == "sysctl" and any("bridge-nf-call" in a for a in argv))
    assert bridge < firewall < conntrack, kinds
