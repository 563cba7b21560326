"""The kube-proxy lab's cluster state: scenario loading, API-server defaults and allocations for
Services, and EndpointSlices written from the pods like the EndpointSlice controller does."""

import textwrap

import pytest

from labkit.errors import ConfigError
from labkit.kubeproxy.cluster_state import load_scenario, read_documents
from labkit.paths import BUILTIN_LABS

SCENARIO = BUILTIN_LABS / "kube-proxy" / "scenarios" / "cluster.yaml"


@pytest.fixture
def state():
    return load_scenario(SCENARIO)


def svc_doc(name, **spec):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def test_pods_get_addresses_from_their_node_pod_cidr_in_order(state):
    ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in state.pods}
    assert ips["web-1"] == "10.244.1.2" and ips["web-2"] == "10.244.1.3" and ips["api-1"] == "10.244.1.4"
    assert ips["web-3"] == "10.244.2.2" and ips["api-3"] == "10.244.2.5"
    net = state.network_layout()
    assert net.node("node2").pod_gateway == "10.244.2.1"


def test_endpoint_slices_follow_selectors_named_ports_and_nodes(state):
    (web,) = state.slices_of("default", "web")
    assert web["metadata"]["labels"] == {"kubernetes.io/service-name": "web",
                                         "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    assert web["ports"] == [{"name": "http", "protocol": "TCP", "port": 8080}]   # targetPort "http" resolved
    assert [(e["targetRef"]["name"], e["nodeName"]) for e in web["endpoints"]] == [
        ("web-1", "node1"), ("web-2", "node1"), ("web-3", "node2"), ("web-4", "node2")]
    assert all(e["conditions"] == {"ready": True, "serving": True, "terminating": False} for e in web["endpoints"])
    (shop,) = state.slices_of("default", "shop-local")
    assert {e["nodeName"] for e in shop["endpoints"]} == {"node1"}


def test_service_defaults_and_node_port_allocation(state):
    report = state.apply([svc_doc("new", type="NodePort", selector={"app": "api"}, ports=[{"port": 80, "targetPort": 9376}])], "x.yaml")
    assert report == ["service/new created"]
    spec = state.service("new")["spec"]
    assert spec["ports"][0]["protocol"] == "TCP" and 30000 <= spec["ports"][0]["nodePort"] <= 32767
    assert spec["sessionAffinity"] == "None" and spec["externalTrafficPolicy"] == "Cluster"
    assert spec["internalTrafficPolicy"] == "Cluster" and spec["clusterIP"].startswith("10.96.")
    ip, port = spec["clusterIP"], spec["ports"][0]["nodePort"]
    # re-applied without clusterIP and nodePort: both are kept, the object is unchanged
    again = svc_doc("new", type="NodePort", selector={"app": "api"}, ports=[{"port": 80, "targetPort": 9376}])
    assert state.apply([again], "x.yaml") == ["service/new unchanged"]
    assert state.service("new")["spec"]["clusterIP"] == ip and state.service("new")["spec"]["ports"][0]["nodePort"] == port
    (slice_,) = state.slices_of("default", "new")
    assert len(slice_["endpoints"]) == 3


def test_one_node_port_serves_a_port_number_for_each_protocol(state):
    # pkg/registry/core/service/storage/alloc.go initNodePorts: ports with the same port number share
    # their node port; validation refuses a duplicate only for the same protocol
    ports = [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30555},
             {"name": "udp", "port": 80, "protocol": "UDP", "nodePort": 30555}]
    assert state.apply([svc_doc("both", type="NodePort", selector={"app": "web"}, ports=ports)], "x.yaml") == [
        "service/both created"]
    assert [p["nodePort"] for p in state.service("both")["spec"]["ports"]] == [30555, 30555]
    # the second port without a nodePort gets the first one's
    ports = [{"name": "http", "port": 81, "protocol": "TCP"}, {"name": "udp", "port": 81, "protocol": "UDP"}]
    state.apply([svc_doc("shared", type="NodePort", selector={"app": "web"}, ports=ports)], "x.yaml")
    (a, b) = state.service("shared")["spec"]["ports"]
    assert a["nodePort"] == b["nodePort"] != 30555
    # another Service cannot have it
    with pytest.raises(ConfigError, match="provided port is already allocated"):
        state.apply([svc_doc("other", type="NodePort", ports=[{"port": 80, "nodePort": 30555}])], "x.yaml")


def test_client_ip_affinity_gets_the_default_timeout(state):
    svc = state.service("api")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    assert state.apply([svc], "x.yaml") == ["service/api configured"]
    assert state.service("api")["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


@pytest.mark.parametrize("spec, field, problem", [
    ({"ports": [{"port": 99999}]}, "documents[0].spec.ports[0].port", "1-65535"),
    ({"ports": [{"port": 80, "protocol": "ICMP"}]}, "documents[0].spec.ports[0].protocol", "TCP, UDP, SCTP"),
    ({"ports": [{"port": 80}, {"port": 81}]}, "documents[0].spec.ports[0].name", "must name each one"),
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30090}]}, "documents[0].spec.ports[0].nodePort", "already allocated"),
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}, "documents[0].spec.ports[0].nodePort", "30000-32767"),
    # one node port for two port numbers (initNodePorts allocates it twice), or twice for one protocol
    ({"type": "NodePort", "ports": [{"name": "a", "port": 80, "nodePort": 30555},
                                    {"name": "b", "port": 81, "protocol": "UDP", "nodePort": 30555}]},
     "documents[0].spec.ports[1].nodePort", "Invalid value: 30555: provided port is already allocated"),
    ({"type": "NodePort", "ports": [{"name": "a", "port": 80, "nodePort": 30555},
                                    {"name": "b", "port": 81, "nodePort": 30555}]},
     "documents[0].spec.ports[1].nodePort", "Duplicate value: 30555"),
    ({"ports": [{"port": 80, "nodePort": 30555}]}, "documents[0].spec.ports[0].nodePort", "may not be used"),
    ({"clusterIP": "10.0.0.1", "ports": [{"port": 80}]}, "documents[0].spec.clusterIP", "service CIDR"),
    # kube-apiserver's words (pkg/apis/core/validation/validation.go ValidateService)
    ({"sessionAffinity": "Sticky", "ports": [{"port": 80}]}, "documents[0].spec.sessionAffinity",
     'Unsupported value: "Sticky": supported values: "ClientIP", "None"'),
    ({"sessionAffinity": "clientIP", "ports": [{"port": 80}]}, "documents[0].spec.sessionAffinity",
     'Unsupported value: "clientIP": supported values: "ClientIP", "None"'),
    # a config beside None is refused, not dropped (the Service would look sticky and not be)
    ({"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}, "ports": [{"port": 80}]},
     "documents[0].spec.sessionAffinityConfig", "Forbidden: must not be set when session affinity is None"),
    ({"sessionAffinity": "None", "sessionAffinityConfig": {}, "ports": [{"port": 80}]},
     "documents[0].spec.sessionAffinityConfig", "Forbidden: must not be set when session affinity is None"),
    ({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}, "ports": [{"port": 80}]},
     "documents[0].spec.sessionAffinityConfig.clientIP.timeoutSeconds",
     "Invalid value: 0: must be greater than 0 and less than 86400"),
    ({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 86401}},
      "ports": [{"port": 80}]},
     "documents[0].spec.sessionAffinityConfig.clientIP.timeoutSeconds",
     "Invalid value: 86401: must be greater than 0 and less than 86400"),
    ({"externalTrafficPolicy": "Nearest", "type": "NodePort", "ports": [{"port": 80}]},
     "documents[0].spec.externalTrafficPolicy", "Cluster or Local"),
])
def test_invalid_services_are_rejected_naming_file_and_field(state, spec, field, problem):
    with pytest.raises(ConfigError) as info:
        state.apply([svc_doc("bad", **spec)], "bad.yaml")
    assert info.value.path == "bad.yaml" and info.value.field == field and problem in info.value.problem


@pytest.mark.parametrize("spec, message", [
    ({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]},
     'The Service "bad" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid '
     "range. The range of valid ports is 30000-32767"),
    ({"ports": [{"port": 80, "nodePort": 30555}]},
     'The Service "bad" is invalid: spec.ports[0].nodePort: Forbidden: may not be used when `type` is \'ClusterIP\''),
    ({"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 86401}},
      "ports": [{"port": 80}]},
     'The Service "bad" is invalid: spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 86401: must '
     "be greater than 0 and less than 86400"),
])
def test_kube_proxy_apply_words_a_services_validation_errors_as_kube_apiserver(state, spec, message):
    """`labkit kube-proxy apply` prints them as kubectl v1.34 does (`The Service "web" is invalid:
    spec.…`), where it used to print labkit's `documents[0].spec.…`."""
    from labkit.kubeproxy.cluster_state import in_api_words
    documents = [{"kind": "ConfigMap", "metadata": {"name": "first"}}, svc_doc("bad", **spec)]
    with pytest.raises(ConfigError) as info:
        state.apply(documents[1:], "bad.yaml")
    shifted = ConfigError(info.value.path, info.value.field.replace("documents[0]", "documents[1]", 1),
                          info.value.problem)
    worded = in_api_words(shifted, documents)
    assert worded.path == "bad.yaml" and worded.field is None and worded.problem == message
    assert str(worded) == f"bad.yaml: {message}"
    # an error that is not about a Service's fields stays as it was
    assert in_api_words(shifted, [documents[0], documents[0]]) is shifted


@pytest.mark.parametrize("change,shown", [
    ({"clusterIP": "10.96.0.99"}, '["10.96.0.99"]'),                          # kubectl get -o yaml, edited
    ({"clusterIP": "10.96.0.99", "clusterIPs": None}, '["10.96.0.99"]'),      # a file without clusterIPs
    ({"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.99"]}, '["10.96.0.99"]'),
    ({"clusterIP": "None", "clusterIPs": None}, '["None"]'),                  # made headless
])
def test_cluster_ip_may_not_change_once_set_in_kube_apiservers_words(state, change, shown):
    """kube-apiserver v1.34 refuses it in ValidateServiceUpdate (validateUpgradeDowngradeClusterIPs),
    after the registry copied the allocated clusterIPs into the update and set clusterIPs[0] to the
    new clusterIP (patchAllocatedValues, NormalizeClusterIPs); kubectl prints the StatusError."""
    from labkit.kubeproxy.cluster_state import in_api_words
    svc = state.service("web")
    for key, value in change.items():
        if value is None:
            svc["spec"].pop(key, None)
        else:
            svc["spec"][key] = value
    with pytest.raises(ConfigError) as info:
        state.apply([svc], "x.yaml")
    worded = in_api_words(info.value, [svc])
    assert str(worded) == f'x.yaml: The Service "web" is invalid: spec.clusterIPs[0]: Invalid value: {shown}: ' \
                          'may not change once set'
    assert state.service("web")["spec"]["clusterIP"] == "10.96.0.10"


@pytest.mark.parametrize("name, change, message", [
    # a new Service: clusterIPs without clusterIP, or the two differing, is refused before any
    # allocation (alloc.go initIPFamilyFields: ValidateServiceClusterIPsRelatedFields)
    ("new", {"clusterIPs": ["10.96.0.50"]},
     'spec.clusterIPs: Invalid value: ["10.96.0.50"]: must be empty when `clusterIP` is not specified'),
    ("new", {"clusterIP": "10.96.0.50", "clusterIPs": ["10.96.0.51"]},
     'spec.clusterIPs: Invalid value: ["10.96.0.51"]: first value must match `clusterIP`'),
    # the existing one: clusterIP left out is the stored one (patchAllocatedValues), so other
    # clusterIPs do not match it; both changed but differing are not normalized either
    ("web", {"clusterIPs": ["10.96.0.50"]},
     'spec.clusterIPs: Invalid value: ["10.96.0.50"]: first value must match `clusterIP`'),
    ("web", {"clusterIP": "10.96.0.50", "clusterIPs": ["10.96.0.51"]},
     'spec.clusterIPs: Invalid value: ["10.96.0.51"]: first value must match `clusterIP`'),
])
def test_cluster_ips_that_do_not_match_cluster_ip_are_refused(state, name, change, message):
    from labkit.kubeproxy.cluster_state import in_api_words
    doc = svc_doc(name, selector={"app": "web"}, ports=[{"port": 80}], **change)
    with pytest.raises(ConfigError) as info:
        state.apply([doc], "x.yaml")
    assert str(in_api_words(info.value, [doc])) == f'x.yaml: The Service "{name}" is invalid: {message}'
    assert state.service("new") is None and state.service("web")["spec"]["clusterIPs"] == ["10.96.0.10"]


def test_cluster_ips_given_as_stored_without_cluster_ip_are_kept(state):
    doc = svc_doc("web", selector={"app": "web"}, ports=[{"port": 80}], clusterIPs=["10.96.0.10"])
    state.apply([doc], "x.yaml")
    spec = state.service("web")["spec"]
    assert (spec["clusterIP"], spec["clusterIPs"]) == ("10.96.0.10", ["10.96.0.10"])


def test_only_services_and_endpoint_slices_can_be_applied(state):
    with pytest.raises(ConfigError, match=r"documents\[0\].kind: expected Service or EndpointSlice"):
        state.apply([{"kind": "Pod", "metadata": {"name": "p"}}], "x.yaml")


def test_documents_and_lists_are_read_and_bad_yaml_names_the_line(tmp_path):
    path = tmp_path / "objects.yaml"
    path.write_text("kind: List\nitems:\n- {kind: Service, metadata: {name: a}}\n---\nkind: Service\nmetadata: {name: b}\n")
    assert [d["metadata"]["name"] for d in read_documents(path)] == ["a", "b"]
    path.write_text("kind: Service\nmetadata: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        read_documents(path)
    assert info.value.field.startswith("line ") and "not valid YAML" in info.value.problem


def test_scenario_errors_name_the_field(tmp_path):
    path = tmp_path / "scenario.yaml"
    path.write_text(textwrap.dedent("""\
        network: {lan: 192.168.9.0/24, gateway: 192.168.9.1, serviceCIDR: 10.96.0.0/16}
        objects:
          - {kind: Node, metadata: {name: n1}, spec: {podCIDR: 10.1.0.0/24}, status: {addresses: [{type: InternalIP, address: 192.168.9.2}]}}
          - {kind: Pod, metadata: {name: p}, spec: {nodeName: n9, containers: []}}
        """))
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert info.value.field == "objects[1].spec.nodeName" and "'n9'" in info.value.problem


def test_node_ports_are_drawn_above_the_band_kept_for_chosen_ones():
    # KEP-3668: of 30000-32767 (2768 ports) the first 86 are kept for Services that name their
    # nodePort; a drawn port comes from the others while any is free, then from the kept ones
    from labkit.kubeproxy.cluster_state import _Allocator
    alloc = _Allocator({"serviceCIDR": "10.96.0.0/16"}, [])
    drawn = {alloc.node_port() for _ in range(2000)}
    assert min(drawn) >= 30086 and max(drawn) <= 32767
    small = _Allocator({"serviceCIDR": "10.96.0.0/16", "nodePortRange": "30000-30099"}, [])     # 100 ports: 16 kept
    upper = {small.node_port() for _ in range(84)}
    assert upper == set(range(30016, 30100))
    assert 30000 <= small.node_port() <= 30015          # the upper band is full: a kept one
    tiny = _Allocator({"serviceCIDR": "10.96.0.0/16", "nodePortRange": "30000-30009"}, [])      # 16 or fewer: none kept
    assert {tiny.node_port() for _ in range(10)} == set(range(30000, 30010))
