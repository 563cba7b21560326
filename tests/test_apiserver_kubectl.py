"""Real kubectl (1.32, as installed here) against the embedded server with its controllers."""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
import time

import pytest

import support
from support import embedded_server, wait_until

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: kc
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: nginx
        image: nginx:1.27
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home")) as srv:
        yield srv


kubectl = functools.partial(support.kubectl, check=True)


@pytest.fixture(scope="module")
def namespace(server):
    kubectl(server, "create", "namespace", "kc")
    return "kc"


def test_version_and_api_resources(server):
    version = kubectl(server, "version")
    assert "Server Version: v1.34.1" in version.stdout
    # kubectl 1.32 against a 1.34 server: beyond the supported skew, said once, and still working
    assert "exceeds the supported minor version skew of +/-1" in version.stderr
    out = kubectl(server, "api-resources").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["pods"][1:] == ["po", "v1", "true", "Pod"]
    assert rows["deployments"][1:] == ["deploy", "apps/v1", "true", "Deployment"]
    assert rows["namespaces"][1:] == ["ns", "v1", "false", "Namespace"]
    assert rows["customresourcedefinitions"][1:] == ["crd,crds", "apiextensions.k8s.io/v1", "false",
                                                     "CustomResourceDefinition"]


def test_openapi_v2_for_older_kubectl(server):
    """kubectl up to 1.26 (Debian 12's is 1.20) reads /openapi/v2 as protobuf before create/apply
    (client-side validation, patch strategies) and for explain."""
    from labkit.apiserver.client import HttpClient
    from labkit.apiserver.openapi import OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_ANSWER
    from labkit.apiserver.protobuf import Reader

    def message(data: bytes) -> dict[int, list[bytes]]:
        found: dict[int, list[bytes]] = {}
        for number, _, value in Reader(data).fields():
            found.setdefault(number, []).append(value)
        return found

    def named(entries: list[bytes]) -> dict[str, bytes]:
        return {message(e)[1][0].decode(): message(e)[2][0] for e in entries}

    client = server.client()
    code, doc = client.request("GET", "/openapi/v2")
    assert code == 200 and doc["swagger"] == "2.0"
    code, raw = client.request("GET", "/openapi/v2", accept=OPENAPI_V2_PROTOBUF)
    assert code == 200 and isinstance(raw, bytes)
    document = message(raw)
    assert document[1] == [b"2.0"]
    info = message(document[2][0])
    assert info == {1: [b"Kubernetes"], 2: [doc["info"]["version"].encode()]}
    definitions = named(message(document[9][0])[1])
    assert set(definitions) == set(doc["definitions"])
    deployment = message(definitions["io.k8s.api.apps.v1.Deployment"])
    # vendor extensions: NamedAny, the value as YAML (here JSON, which is YAML)
    extensions = {k: json.loads(message(v)[2][0]) for k, v in named(deployment[31]).items()}
    assert extensions["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}]
    spec = named(message(message(definitions["io.k8s.api.apps.v1.DeploymentSpec"])[25][0])[1])  # properties
    strategy = {k: json.loads(message(v)[2][0]) for k, v in named(message(spec["strategy"])[31]).items()}
    assert strategy == {"x-kubernetes-patch-strategy": "retainKeys"}
    assert message(spec["selector"])[1] == [b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"]
    paths = named(message(document[8][0])[2])
    patch = message(message(paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"])[8][0])
    assert b"application/strategic-merge-patch+json" in patch[7]
    # Go's mime parser (kubectl 1.20) refuses the '@' of the Accept form in a Content-Type
    http = HttpClient.from_kubeconfig(server.kubeconfig)
    conn = http._connect()
    try:
        conn.request("GET", http.prefix + "/openapi/v2", headers=http._headers(None, OPENAPI_V2_PROTOBUF))
        response = conn.getresponse()
        response.read()
        assert response.status == 200 and response.getheader("Content-Type") == OPENAPI_V2_PROTOBUF_ANSWER
    finally:
        conn.close()


def test_errors_read_like_a_real_cluster(server, namespace):
    r = kubectl(server, "get", "configmap", "missing", "-n", namespace, check=False)
    assert r.returncode == 1 and r.stderr.strip() == 'Error from server (NotFound): configmaps "missing" not found'
    kubectl(server, "create", "configmap", "dup", "-n", namespace)
    r = kubectl(server, "create", "configmap", "dup", "-n", namespace, check=False)
    assert r.stderr.strip() == 'error: failed to create configmap: configmaps "dup" already exists'
    r = kubectl(server, "create", "-f", "-", check=False,
                input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name, namespace: kc}\n")
    assert r.stderr.startswith('The ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
                               'a lowercase RFC 1123 subdomain')
    r = kubectl(server, "get", "nosuchthings", check=False)
    assert r.returncode == 1 and 'the server doesn\'t have a resource type "nosuchthings"' in r.stderr


def test_create_and_apply_validate_against_the_server(server, namespace):
    r = kubectl(server, "create", "-f", "-", input=DEPLOYMENT.format(replicas=2))
    assert r.stdout.strip() == "deployment.apps/web created" and r.stderr == ""
    assert wait_until(lambda: kubectl(server, "get", "pods", "-n", namespace, "--no-headers").stdout.count("Running") == 2)
    r = kubectl(server, "apply", "-f", "-", input=DEPLOYMENT.format(replicas=3))
    assert r.stdout.strip() == "deployment.apps/web configured"
    assert "error" not in r.stderr.lower()
    assert wait_until(lambda: kubectl(server, "get", "pods", "-n", namespace, "--no-headers").stdout.count("Running") == 3)
    header = kubectl(server, "get", "pods", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    pod = json.loads(kubectl(server, "get", "pods", "-n", namespace, "-o", "json").stdout)["items"][0]
    owner = pod["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ReplicaSet" and owner["controller"] is True and owner["blockOwnerDeletion"] is True
    rs = json.loads(kubectl(server, "get", "rs", owner["name"], "-n", namespace, "-o", "json").stdout)
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"


def test_patch_finalizers(server, namespace):
    kubectl(server, "create", "configmap", "fin", "-n", namespace)
    assert kubectl(server, "patch", "cm", "fin", "-n", namespace, "-p",
                   '{"metadata":{"finalizers":["example.com/a"]}}').stdout.strip() == "configmap/fin patched"
    kubectl(server, "patch", "cm", "fin", "-n", namespace, "-p", '{"metadata":{"finalizers":["example.com/b"]}}')
    got = kubectl(server, "get", "cm", "fin", "-n", namespace, "-o", "jsonpath={.metadata.finalizers}").stdout
    assert json.loads(got) == ["example.com/a", "example.com/b"]
    assert kubectl(server, "patch", "cm", "fin", "-n", namespace, "-p", '{"metadata":{"finalizers":["example.com/b"]}}'
                   ).stdout.strip() == "configmap/fin patched (no change)"
    kubectl(server, "patch", "cm", "fin", "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    r = kubectl(server, "patch", "cm", "fin", "-n", namespace, "--type=json",
                "-p", '[{"op":"remove","path":"/metadata/finalizers"}]', check=False)
    assert r.stderr.strip() == "The request is invalid: the server rejected our request due to an error in our request"


def test_delete_cascades(server, namespace):
    # orphan: the ReplicaSet goes, its pods stay and lose their owner reference
    kubectl(server, "apply", "-f", "-", input=DEPLOYMENT.format(replicas=2).replace("web", "orph"))
    assert wait_until(lambda: kubectl(server, "get", "pods", "-n", namespace, "-l", "app=orph",
                                      "--no-headers").stdout.count("Running") == 2)
    kubectl(server, "delete", "deployment", "orph", "-n", namespace, "--cascade=orphan")
    rs_name = kubectl(server, "get", "rs", "-n", namespace, "-l", "app=orph", "-o", "name").stdout.strip()
    rs = json.loads(kubectl(server, "get", rs_name, "-n", namespace, "-o", "json").stdout)
    assert "ownerReferences" not in rs["metadata"]
    r = kubectl(server, "delete", rs_name, "-n", namespace, "--cascade=orphan")
    assert r.stdout.strip() == f'replicaset.apps "{rs_name.split("/")[1]}" deleted'
    pods = json.loads(kubectl(server, "get", "pods", "-n", namespace, "-l", "app=orph", "-o", "json").stdout)["items"]
    assert len(pods) == 2 and all("ownerReferences" not in p["metadata"] for p in pods)
    # background (kubectl's default): everything goes, kubectl waits for the deployment only
    kubectl(server, "delete", "deployment", "web", "-n", namespace)
    assert wait_until(lambda: kubectl(server, "get", "rs,pods", "-n", namespace, "-l", "app=web",
                                      "--no-headers").stdout.strip() == "")
    # foreground: kubectl waits until the owner is gone, which is after its dependents
    kubectl(server, "apply", "-f", "-", input=DEPLOYMENT.format(replicas=2).replace("web", "fg"))
    assert wait_until(lambda: kubectl(server, "get", "pods", "-n", namespace, "-l", "app=fg",
                                      "--no-headers").stdout.count("Running") == 2)
    kubectl(server, "delete", "deployment", "fg", "-n", namespace, "--cascade=foreground")
    assert kubectl(server, "get", "rs,pods", "-n", namespace, "-l", "app=fg", "--no-headers").stdout.strip() == ""


def test_wait_and_watch_follow_a_graceful_pod_deletion(server, namespace):
    kubectl(server, "run", "slow", "-n", namespace, "--image=busybox", "--overrides",
            '{"spec":{"terminationGracePeriodSeconds":2}}')
    assert wait_until(lambda: "Running" in kubectl(server, "get", "pod", "slow", "-n", namespace).stdout)
    watcher = subprocess.Popen(["kubectl", "get", "pod", "slow", "-n", namespace, "-w", "--no-headers"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server.test_env)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        kubectl(server, "delete", "pod", "slow", "-n", namespace)       # --wait: until the node finished it
        assert time.monotonic() - started >= 1.5
    finally:
        time.sleep(0.3)
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
    statuses = [line.split()[2] for line in out.splitlines() if line.strip()]
    assert statuses[0] == "Running" and "Terminating" in statuses


def test_namespaces_show_their_phase(server):
    kubectl(server, "create", "namespace", "phase-demo")
    assert kubectl(server, "get", "ns", "phase-demo", "--no-headers").stdout.split()[:2] == ["phase-demo", "Active"]
    kubectl(server, "create", "configmap", "hold", "-n", "phase-demo")
    kubectl(server, "delete", "namespace", "phase-demo", "--wait=false")
    assert kubectl(server, "get", "ns", "phase-demo", "--no-headers").stdout.split()[:2] == ["phase-demo", "Terminating"]


def test_replace_raw_finalize_subresource(server):
    kubectl(server, "create", "namespace", "fin-demo")
    ns = json.loads(kubectl(server, "get", "ns", "fin-demo", "-o", "json").stdout)
    ns["spec"] = {"finalizers": ["example.com/mine"]}
    out = json.loads(kubectl(server, "replace", "--raw", "/api/v1/namespaces/fin-demo/finalize", "-f", "-",
                             input=json.dumps(ns)).stdout)
    assert out["spec"]["finalizers"] == ["example.com/mine"]


def test_typed_create_subcommands_send_protobuf(server, namespace):
    # kubectl create <kind> uses client-go's typed clients, whose request bodies are protobuf
    kubectl(server, "create", "deployment", "pb", "-n", namespace, "--image=nginx:1.27", "--replicas=2", "--port=8080")
    spec = json.loads(kubectl(server, "get", "deploy", "pb", "-n", namespace, "-o", "json").stdout)["spec"]
    assert spec["replicas"] == 2 and spec["selector"] == {"matchLabels": {"app": "pb"}}
    container = spec["template"]["spec"]["containers"][0]
    assert (container["image"], container["ports"]) == ("nginx:1.27", [{"containerPort": 8080, "protocol": "TCP"}])
    kubectl(server, "create", "secret", "generic", "pw", "-n", namespace, "--from-literal=password=s3cret")
    data = json.loads(kubectl(server, "get", "secret", "pw", "-n", namespace, "-o", "json").stdout)["data"]
    assert base64.b64decode(data["password"]) == b"s3cret"
    kubectl(server, "create", "service", "clusterip", "pb", "-n", namespace, "--tcp=80:8080")
    port = json.loads(kubectl(server, "get", "svc", "pb", "-n", namespace, "-o", "json").stdout)["spec"]["ports"][0]
    assert (port["port"], port["targetPort"]) == (80, 8080)


def test_explain_reads_the_served_schemas(server):
    out = kubectl(server, "explain", "deployment.spec").stdout
    assert out.startswith("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n\nFIELD: spec <DeploymentSpec>")
    assert "DeploymentSpec is the specification of the desired behavior of the\n    Deployment." in out
    assert "  selector\t<LabelSelector> -required-\n    Label selector for pods." in out
    out = kubectl(server, "explain", "pod.spec.containers.imagePullPolicy").stdout
    assert "FIELD: imagePullPolicy <string>\nENUM:\n    Always\n    IfNotPresent\n    Never\n" in out
    out = kubectl(server, "explain", "svc.spec.ports.targetPort").stdout
    assert "FIELD: targetPort <IntOrString>" in out and "Number or name of the port to access" in out
    missing = kubectl(server, "explain", "deployment.spec.nonsense", check=False)
    assert missing.returncode != 0 and 'field "nonsense" does not exist' in missing.stderr


def test_a_binding_posted_to_the_bindings_collection_assigns_its_pod(server, namespace):
    """`bindings` (LegacyBindingREST, pkg/registry/core/pod/storage/storage.go) as v1.34.1 serves
    it: kubectl create of a Binding assigns the Pod its name names, once; api-resources lists it."""
    rows = {line.split()[0]: line.split() for line in kubectl(server, "api-resources").stdout.splitlines()[1:]}
    assert rows["bindings"][1:] == ["v1", "true", "Binding"]
    kubectl(server, "-n", namespace, "run", "bound", "--image=nginx",        # a scheduler no one runs
            '--overrides={"spec": {"schedulerName": "by-hand"}}')
    binding = json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bound"},
                          "target": {"apiVersion": "v1", "kind": "Node", "name": "node-x"}})
    kubectl(server, "-n", namespace, "create", "-f", "-", input=binding)
    pod = json.loads(kubectl(server, "-n", namespace, "get", "pod", "bound", "-o", "json").stdout)
    assert pod["spec"]["nodeName"] == "node-x"
    again = kubectl(server, "-n", namespace, "create", "-f", "-", input=binding, check=False)
    assert again.returncode == 1 and 'pod bound is already assigned to node "node-x"' in again.stderr, again.stderr
    missing = kubectl(server, "-n", namespace, "create", "-f", "-", input=binding.replace('"bound"', '"ghost"'),
                      check=False)
    assert missing.returncode == 1 and 'pods "ghost" not found' in missing.stderr, missing.stderr
