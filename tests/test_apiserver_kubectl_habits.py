"""A student's everyday kubectl habits against the embedded server and its controllers, with what
kubectl prints on a real cluster: replace, patch (merge and JSON), scale, autoscale, rollout
status / history / undo / pause / resume / restart, server-side apply by two managers, edit,
describe, events, get -w, auth can-i / whoami, create job, get nodes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest

import support
from support import embedded_server, wait_until

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

NS = "habits"
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: habits
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: nginx
        image: nginx:1.27
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home")) as srv:
        srv.test_dir = tmp_path_factory.mktemp("files")
        kubectl(srv, "create", "namespace", NS)
        yield srv


def kubectl(server, *args, input: str | None = None, check: bool = True, env: dict | None = None):
    return support.kubectl(server, "-n", NS, *args, input=input, check=check, timeout=90,
                           env={**server.test_env, **(env or {})})


def jsonpath(server, what: str, path: str) -> str:
    return kubectl(server, "get", what, "-o", f"jsonpath={path}").stdout


def replicasets(server) -> list[dict]:
    return json.loads(kubectl(server, "get", "rs", "-l", "app=web", "-o", "json").stdout)["items"]


def pod_names(server) -> set[str]:
    return set(jsonpath(server, "pods", "{.items[*].metadata.name}").split())


def rolled_out(server) -> None:
    out = kubectl(server, "rollout", "status", "deployment/web", "--timeout=60s").stdout
    assert out.rstrip().endswith('deployment "web" successfully rolled out')


@pytest.fixture(scope="module")
def web(server):
    assert kubectl(server, "apply", "-f", "-", input=DEPLOYMENT).stdout == "deployment.apps/web created\n"
    rolled_out(server)
    return "web"


def test_replace_of_an_unchanged_deployment_creates_no_replicaset_and_no_pods(server, web):
    pods = pod_names(server)
    assert len(pods) == 2 and len(replicasets(server)) == 1
    saved = server.test_dir / "web.yaml"
    saved.write_text(kubectl(server, "get", "deployment", "web", "-o", "yaml").stdout)
    assert kubectl(server, "replace", "-f", str(saved)).stdout == "deployment.apps/web replaced\n"
    # the manifest as written, without any of the defaults the server filled in
    assert kubectl(server, "replace", "-f", "-", input=DEPLOYMENT).stdout == "deployment.apps/web replaced\n"
    rolled_out(server)
    # (the second replace drops the revision annotation: generation moves, the template does not)
    assert len(replicasets(server)) == 1 and pod_names(server) == pods


def test_scale_and_patches(server, web):
    assert kubectl(server, "scale", "deployment/web", "--replicas=3").stdout == "deployment.apps/web scaled\n"
    wait_until(lambda: len(pod_names(server)) == 3, 30)
    out = kubectl(server, "patch", "deployment", "web", "--type=merge", "-p", '{"spec":{"replicas":2}}').stdout
    assert out == "deployment.apps/web patched\n"
    out = kubectl(server, "patch", "deployment", "web", "--type=merge", "-p", '{"spec":{"replicas":2}}').stdout
    assert out == "deployment.apps/web patched (no change)\n"
    out = kubectl(server, "patch", "deployment", "web", "--type=json",
                  "-p", '[{"op":"replace","path":"/spec/replicas","value":2}]').stdout
    assert out == "deployment.apps/web patched (no change)\n"
    failed = kubectl(server, "patch", "deployment", "web", "--type=json", "-p",
                     '[{"op":"test","path":"/spec/replicas","value":5}]', check=False)
    assert failed.returncode == 1 and failed.stderr.startswith("The request is invalid")
    assert jsonpath(server, "deployment/web", "{.spec.replicas}") == "2"
    wait_until(lambda: len(pod_names(server)) == 2, 30)
    assert len(replicasets(server)) == 1


def test_rollout_history_undo_pause_resume_restart(server, web):
    assert kubectl(server, "set", "image", "deployment/web", "nginx=nginx:1.28").stdout == \
        "deployment.apps/web image updated\n"
    rolled_out(server)
    history = kubectl(server, "rollout", "history", "deployment/web").stdout
    assert history.splitlines()[:4] == ["deployment.apps/web ", "REVISION  CHANGE-CAUSE", "1         <none>",
                                        "2         <none>"]
    assert kubectl(server, "rollout", "undo", "deployment/web").stdout == "deployment.apps/web rolled back\n"
    rolled_out(server)
    assert jsonpath(server, "deployment/web", "{.spec.template.spec.containers[0].image}") == "nginx:1.27"
    revisions = sorted(int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"])
                       for rs in replicasets(server))
    assert revisions == [2, 3]          # undo reuses revision 1's ReplicaSet as revision 3
    assert kubectl(server, "rollout", "pause", "deployment/web").stdout == "deployment.apps/web paused\n"
    kubectl(server, "set", "image", "deployment/web", "nginx=nginx:1.29")
    time.sleep(1)                        # a paused Deployment starts no rollout
    assert len(replicasets(server)) == 2
    assert kubectl(server, "rollout", "resume", "deployment/web").stdout == "deployment.apps/web resumed\n"
    rolled_out(server)
    assert len(replicasets(server)) == 3
    assert kubectl(server, "rollout", "restart", "deployment/web").stdout == "deployment.apps/web restarted\n"
    rolled_out(server)
    assert jsonpath(server, "deployment/web",
                    "{.spec.template.metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}")
    describe = kubectl(server, "describe", "deployment", "web").stdout
    assert "Events:" in describe and "ScalingReplicaSet" in describe
    assert "deployment-controller  Scaled up replica set web-" in describe
    events = kubectl(server, "get", "events", "--field-selector", "involvedObject.kind=Deployment").stdout
    assert events.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "Normal   ScalingReplicaSet   deployment/web   Scaled up replica set web-" in events


def test_autoscale_creates_a_horizontal_pod_autoscaler(server, web):
    out = kubectl(server, "autoscale", "deployment", "web", "--min=1", "--max=3", "--cpu-percent=80").stdout
    assert out == "horizontalpodautoscaler.autoscaling/web autoscaled\n"
    rows = kubectl(server, "get", "hpa", "web").stdout.splitlines()
    assert rows[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert rows[1].split()[:5] == ["web", "Deployment/web", "cpu:", "<unknown>/80%", "1"]
    assert jsonpath(server, "hpa.v2.autoscaling/web", "{.spec.metrics[0].resource.target.averageUtilization}") == "80"


def test_server_side_apply_by_two_managers(server):
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: habits\ndata:\n  color: {}\n"
    out = kubectl(server, "apply", "--server-side", "--field-manager=alice", "-f", "-", input=manifest.format("red"))
    assert out.stdout == "configmap/shared serverside-applied\n"
    conflict = kubectl(server, "apply", "--server-side", "--field-manager=bob", "-f", "-",
                       input=manifest.format("blue"), check=False)
    assert conflict.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "alice": .data.color' in conflict.stderr
    assert "Please review the fields above--they currently have other managers." in conflict.stderr
    forced = kubectl(server, "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-",
                     input=manifest.format("blue"))
    assert forced.stdout == "configmap/shared serverside-applied\n"
    managers = json.loads(kubectl(server, "get", "cm", "shared", "--show-managed-fields", "-o", "json").stdout)
    owners = {e["manager"]: e for e in managers["metadata"]["managedFields"]}
    assert owners["bob"]["operation"] == "Apply" and "f:color" in json.dumps(owners["bob"]["fieldsV1"])
    assert "alice" not in owners        # alice owned nothing else, and lost .data.color


def test_edit_through_an_editor(server, web):
    editor = server.test_dir / "editor.py"
    editor.write_text("import sys, re\np = sys.argv[1]\ntext = open(p).read()\n"
                      "open(p, 'w').write(re.sub(r'replicas: \\d+', 'replicas: 1', text, count=1))\n")
    env = {"KUBE_EDITOR": f"{sys.executable} {editor}"}
    assert kubectl(server, "edit", "deployment/web", env=env).stdout == "deployment.apps/web edited\n"
    assert jsonpath(server, "deployment/web", "{.spec.replicas}") == "1"
    unchanged = kubectl(server, "edit", "deployment/web", env=env)
    assert unchanged.stderr == "Edit cancelled, no changes made.\n"


def test_get_watch_prints_changes_as_they_happen(server):
    watcher = subprocess.Popen(["kubectl", "-n", NS, "get", "configmaps", "--watch", "--output-watch-events"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server.test_env)
    try:
        header = watcher.stdout.readline()
        assert header.split() == ["EVENT", "NAME", "DATA", "AGE"]
        kubectl(server, "create", "configmap", "watched", "--from-literal=a=b")
        while True:
            line = watcher.stdout.readline().split()
            if line[1] == "watched":
                break
        assert line[:3] == ["ADDED", "watched", "1"]
        kubectl(server, "delete", "configmap", "watched")
        while True:
            line = watcher.stdout.readline().split()
            if line[1] == "watched" and line[0] != "ADDED":
                break
        assert line[:3] == ["DELETED", "watched", "1"]
    finally:
        watcher.kill()
        watcher.wait()


def test_auth_can_i_and_whoami(server):
    assert kubectl(server, "auth", "can-i", "create", "deployments").stdout == "yes\n"
    denied = kubectl(server, "auth", "can-i", "get", "/labkit/v1/controllers", "--as", "bob", check=False)
    assert denied.returncode == 1 and denied.stdout.startswith("no")
    who = kubectl(server, "auth", "whoami", "--as", "bob", "--as-group", "devs").stdout.splitlines()
    assert who[0].split() == ["ATTRIBUTE", "VALUE"]
    assert who[1].split() == ["Username", "bob"]
    assert who[2].split() == ["Groups", "[devs", "system:authenticated]"]
    listing = kubectl(server, "auth", "can-i", "--list").stdout.splitlines()
    assert listing[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert listing[1].split() == ["*.*", "[]", "[]", "[*]"]


def test_create_job_and_get_nodes(server):
    out = kubectl(server, "create", "job", "hello", "--image=busybox:1.36", "--", "echo", "hi").stdout
    assert out == "job.batch/hello created\n"
    rows = kubectl(server, "get", "job", "hello").stdout.splitlines()
    assert rows[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jsonpath(server, "job/hello", "{.spec.template.spec.restartPolicy}") == "Never"
    # the node stand-in registered its Node, as a kubelet does
    nodes = kubectl(server, "get", "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["labkit-node", "Ready", "<none>"] and nodes[1].split()[-1] == "v1.34.1"
