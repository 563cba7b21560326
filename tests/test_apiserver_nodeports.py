"""Node ports of Services as kube-apiserver v1.34 allocates them (pkg/registry/core/service/
storage/alloc.go, portallocator, allocator/bitmap.go randomScanStrategyWithOffset): a drawn port
comes from above the band KEP-3668 keeps for chosen ones, a chosen port in use or out of the
range is refused with the allocator's text, and a port is free again once its Service is deleted
or no longer of a type with node ports."""

from __future__ import annotations

import functools
import json
import random
import shutil

import pytest

import support
from labkit import nodeports
from labkit.apiserver.errors import ApiError
from support import admin_client, embedded_server, in_process_api


# -- the draw (labkit/nodeports.py, shared with the kube-proxy lab) -------------------------------

def test_the_band_kept_for_chosen_ports():
    # calculateRangeOffset: min(max(16, size/32), 128), none for 16 ports or fewer
    assert [nodeports.range_offset(n) for n in (10, 16, 17, 100, 2768, 5000, 100000)] == [0, 0, 16, 16, 86, 128, 128]


def test_a_drawn_port_comes_from_above_the_band_then_from_it():
    rng = random.Random(7)
    used: set[int] = set()
    for _ in range(100 - 16):
        port = nodeports.draw(30000, 30099, used, rng)
        assert 30016 <= port <= 30099 and port not in used
        used.add(port)
    assert used == set(range(30016, 30100))
    port = nodeports.draw(30000, 30099, used, rng)
    assert 30000 <= port <= 30015
    assert nodeports.draw(30000, 30099, set(range(30000, 30100)), rng) is None


def test_the_draw_scans_forward_from_a_random_start():
    # randomScanStrategyWithOffset: the first free port at or after the random start, wrapping
    # within the upper part; a seeded draw is reproducible
    start = random.Random(3).randrange(2768 - 86)
    expected = 30086 + start
    assert nodeports.draw(30000, 32767, set(), random.Random(3)) == expected
    taken = {expected, expected + 1} if expected + 1 <= 32767 else {expected}
    after = nodeports.draw(30000, 32767, taken, random.Random(3))
    assert after == (expected + 2 if expected + 2 <= 32767 else 30086)


def test_checks_of_a_chosen_port_read_as_the_allocator_writes_them():
    assert nodeports.check(30080, 30000, 32767, set()) is None
    assert nodeports.check(30080, 30000, 32767, {30080}) == "provided port is already allocated"
    assert nodeports.check(40000, 30000, 32767, set()) == \
        "provided port is not in the valid range. The range of valid ports is 30000-32767"


# -- the API server ------------------------------------------------------------------------------

@pytest.fixture
def api(tmp_path):
    with in_process_api(tmp_path / "objects.db", namespaces=("ns", "other")) as api:
        yield api


@pytest.fixture
def c(api):
    return admin_client(api)


def svc(name, *ports, type="NodePort"):
    return {"metadata": {"name": name}, "spec": {"type": type, "selector": {"a": "b"}, "ports": [
        {"name": f"p{i}", "port": 80 + i, **({"nodePort": p} if p else {})} for i, p in enumerate(ports)]}}


def node_ports(obj):
    return [p.get("nodePort") for p in obj["spec"]["ports"]]


def test_a_drawn_port_is_not_one_another_service_holds(api, c):
    strategy = api.registry.catalog.lookup("", "v1", "services").strategy
    # a seeded allocator that would draw the same start every time: the second Service gets the
    # next free port, not the first one's (the old digest ignored other Services)
    strategy.node_ports.rng = type("Fixed", (), {"randrange": staticmethod(lambda n: 0)})()
    first = node_ports(c.create("v1", "services", svc("a", None), "ns"))
    second = node_ports(c.create("v1", "services", svc("b", None), "other"))
    assert first == [30086] and second == [30087]


def test_a_chosen_port_in_use_or_out_of_range_is_refused_with_the_allocators_text(c):
    c.create("v1", "services", svc("a", 30080), "ns")
    with pytest.raises(ApiError) as err:
        c.create("v1", "services", svc("b", 30080), "other")
    assert err.value.code == 422
    assert err.value.message == ('Service "b" is invalid: spec.ports[0].nodePort: Invalid value: 30080: '
                                 'provided port is already allocated')
    with pytest.raises(ApiError) as err:
        c.create("v1", "services", svc("c", None, 40000), "ns")
    assert err.value.code == 422
    assert err.value.message == ('Service "c" is invalid: spec.ports[1].nodePort: Invalid value: 40000: provided port '
                                 'is not in the valid range. The range of valid ports is 30000-32767')


def test_a_refused_create_holds_no_port_and_a_dry_run_keeps_none(c):
    with pytest.raises(ApiError):
        c.create("v1", "services", svc("x", 30081, 40000), "ns")
    c.create("v1", "services", svc("y", 30081), "ns")          # 30081 was not kept by the refused create
    c.request("POST", "/api/v1/namespaces/ns/services?dryRun=All", body=svc("z", 30082))
    c.create("v1", "services", svc("z", 30082), "other")


def test_a_port_is_free_again_after_delete_and_after_a_change_of_type(c):
    c.create("v1", "services", svc("a", 30080), "ns")
    c.delete("v1", "services", "a", "ns")
    assert node_ports(c.create("v1", "services", svc("b", 30080), "ns")) == [30080]
    # to ClusterIP: dropTypeDependentFields clears the node ports, the allocator releases them
    changed = c.patch("v1", "services", "b", {"spec": {"type": "ClusterIP"}}, "merge", "ns")
    assert node_ports(changed) == [None]
    assert node_ports(c.create("v1", "services", svc("c", 30080), "other")) == [30080]
    # back to NodePort: a new port is drawn, not the one another Service now holds
    again = c.patch("v1", "services", "b", {"spec": {"type": "NodePort"}}, "merge", "ns")
    assert node_ports(again)[0] not in (None, 30080)


def local_lb(name, health=None):
    obj = svc(name, 0, type="LoadBalancer")
    obj["spec"]["externalTrafficPolicy"] = "Local"
    if health:
        obj["spec"]["healthCheckNodePort"] = health
    return obj


def test_a_local_load_balancer_gets_a_health_check_port_from_the_node_port_allocator(c):
    """allocHealthCheckNodePort / updateHealthCheckNodePort (alloc.go): NeedsHealthCheck (LoadBalancer,
    externalTrafficPolicy Local) draws one from the node-port range, or takes the one asked for;
    it is held as node ports are and free again once the Service no longer needs it or is gone."""
    lb = c.create("v1", "services", local_lb("lb"), "ns")
    health = lb["spec"]["healthCheckNodePort"]
    assert 30000 <= health <= 32767 and health not in node_ports(lb)
    # held: no other Service gets it, as a node port or as a health-check port
    with pytest.raises(ApiError) as info:
        c.create("v1", "services", svc("taker", health), "ns")
    assert info.value.message.endswith("provided port is already allocated")
    with pytest.raises(ApiError) as info:
        c.create("v1", "services", local_lb("twin", health), "ns")
    assert (info.value.code, info.value.message) == (
        500, f"Internal error occurred: failed to allocate requested HealthCheck NodePort {health}: "
             "provided port is already allocated")
    # an update that leaves it out keeps it (patchAllocatedValues)
    replaced = c.get("v1", "services", "lb", "ns")
    del replaced["spec"]["healthCheckNodePort"]
    assert c.update("v1", "services", replaced, "ns")["spec"]["healthCheckNodePort"] == health
    # a NodePort Service with Local gets none (NeedsHealthCheck is for LoadBalancers)
    nodeport = svc("np", 0)
    nodeport["spec"]["externalTrafficPolicy"] = "Local"
    assert "healthCheckNodePort" not in c.create("v1", "services", nodeport, "ns")["spec"]
    # Cluster policy: not needed any more, dropped and free
    changed = c.patch("v1", "services", "lb", {"spec": {"externalTrafficPolicy": "Cluster"}}, "merge", "ns")
    assert "healthCheckNodePort" not in changed["spec"]
    assert node_ports(c.create("v1", "services", svc("reuse", health), "other")) == [health]
    # back to Local: a new one is drawn; deleting the Service frees it
    again = c.patch("v1", "services", "lb", {"spec": {"externalTrafficPolicy": "Local"}}, "merge", "ns")
    second = again["spec"]["healthCheckNodePort"]
    assert second not in (None, health)
    c.delete("v1", "services", "lb", "ns")
    assert c.create("v1", "services", local_lb("after", second), "ns")["spec"]["healthCheckNodePort"] == second


def test_an_update_keeps_its_ports_and_a_new_chosen_one_is_checked(c):
    a = c.create("v1", "services", svc("a", None), "ns")
    c.create("v1", "services", svc("b", 30090), "ns")
    replaced = c.request("PUT", "/api/v1/namespaces/ns/services/a", body=svc("a", None))[1]
    assert node_ports(replaced) == node_ports(a)                # patchAllocatedValues
    with pytest.raises(ApiError) as err:
        c.patch("v1", "services", "a", {"spec": {"ports": [{"port": 80, "name": "p0", "nodePort": 30090}]}},
                "merge", "ns")
    assert err.value.code == 422 and "provided port is already allocated" in err.value.message


def test_ports_of_the_same_number_share_one_node_port(c):
    body = {"metadata": {"name": "dns"}, "spec": {"type": "NodePort", "ports": [
        {"name": "tcp", "port": 53, "protocol": "TCP"}, {"name": "udp", "port": 53, "protocol": "UDP"}]}}
    ports = node_ports(c.create("v1", "services", body, "ns"))
    assert ports[0] == ports[1] and ports[0] >= 30086         # initNodePorts: svcPortToNodePort


# -- with real kubectl ---------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_create_service_nodeport_collision_range_and_reuse(tmp_path):
    with embedded_server(tmp_path / "state", tmp_path / "home", controllers=[]) as server:
        kubectl = functools.partial(support.kubectl, server)
        assert kubectl("create", "service", "nodeport", "web", "--tcp=80:8080").returncode == 0
        web = json.loads(kubectl("get", "service", "web", "-o", "json").stdout)
        assert 30086 <= web["spec"]["ports"][0]["nodePort"] <= 32767
        assert kubectl("create", "service", "nodeport", "fixed", "--tcp=80:8080", "--node-port=30080").returncode == 0
        r = kubectl("create", "service", "nodeport", "clash", "--tcp=80:8080", "--node-port=30080")
        assert r.returncode == 1
        assert r.stderr.strip() == ('error: failed to create NodePort service: '
                                    'Service "clash" is invalid: spec.ports[0].nodePort: Invalid value: 30080: '
                                    'provided port is already allocated')
        r = kubectl("create", "service", "nodeport", "far", "--tcp=80:8080", "--node-port=40000")
        assert r.returncode == 1
        assert r.stderr.strip() == ('error: failed to create NodePort service: '
                                    'Service "far" is invalid: spec.ports[0].nodePort: Invalid value: 40000: '
                                    'provided port is not in the valid range. The range of valid ports is 30000-32767')
        assert kubectl("delete", "service", "fixed").returncode == 0
        assert kubectl("create", "service", "nodeport", "clash", "--tcp=80:8080", "--node-port=30080").returncode == 0
