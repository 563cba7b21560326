"""The scheduler lab: labkit's embedded API server with labkit's reconstruction of kube-scheduler
v1.34.1 (labkit.controllers.scheduler, the default profile) deciding for every Pod that names no
node, and thirteen Nodes the lab registers with capacity, labels and taints. Students use kubectl.

The lab runs the embedded server's controllers without the node stand-in (labkit.controllers.node,
which would register another Node, `labkit-node`): the lab's Nodes run no kubelet, so a Pod bound
to one keeps phase Pending with spec.nodeName set (`kubectl get pods -o wide` shows its node), as
on a cluster whose node has no kubelet running. The Nodes' status is written once, as a kubelet
would register it (capacity, allocatable, the condition Ready True). The server's admission
chain includes DefaultTolerationSeconds: every Pod without tolerations of the not-ready and
unreachable taints gets them (300 s), as on a cluster. The taint-eviction controller
(labkit.controllers.tainteviction, after taint_eviction.go) runs too: a NoExecute taint on a
Node deletes the Pods there that do not tolerate it, at once or after their tolerationSeconds.
And each Node's kubelet still admits every Pod bound to it (labkit.controllers.kubeletadmit, after
lifecycle/predicate.go): a Pod given a node by spec.nodeName alone where its requests do not fit
is rejected, phase Failed with reason OutOfcpu (or OutOfmemory, OutOfpods).

Starting state (cluster-scoped Nodes; namespace `sched`):

  node-a  disk=ssd, 4 CPU, taint dedicated=batch:NoSchedule       \
  node-b  disk=hdd, 4 CPU                                           | (why-pending: the Pod `web`
  node-c  disk=ssd, 1 CPU                                           |  requests 2 CPU and selects
  node-d  disk=ssd, 4 CPU, taint maintenance=true:NoSchedule       /   disk=ssd; it is Pending)
  node-e  disk=hdd, 8 CPU; six Pods bound to it by nodeName, each with other tolerations
          (noexecute: predict what a NoExecute taint on node-e does to each, then watch it)
  node-f  disk=hdd, 2 CPU; the Pod legacy bound to it by nodeName
          (taint-effects: taint node-f so that new Pods avoid it, legacy stays)
  job-1..3  Pods for a scheduler of the student's own (schedulerName my-scheduler, disk=hdd),
          which labkit runs as a lab process: `labkit scheduler serve FILE`     (own-scheduler)
  nightly  a Pod created with spec.nodeName node-c (2 CPU on a 1-CPU node): node-c's kubelet
          admission rejected it, OutOfcpu                                          (node-name)
  zone-a-1, zone-a-2 (zone-a), zone-b-1 (zone-b): 4 CPU; zone-c-1 (zone-c): 1.5 CPU; all pool=shop
          with the taint dedicated=shop:NoSchedule; the Deployment shop (6 replicas of 1 CPU, no
          spread constraint) and the Pod cart (tier=frontend, like shop's Pods) on them   (spread)
  pack-1..3: 4 CPU, pool=pack, taint dedicated=pack:NoSchedule; the ConfigMap
          kube-system/kube-scheduler-config: profiles default-scheduler and bin-packer (both as
          the default); the batch's six Pods in batch.yaml, for the student to create   (binpack)
  score-predict, preempt-predict: case files in scenarios/, played by `labkit scheduler
          explain -f` only once a prediction is written (labkit.scheduler.withhold)

A try of a prediction exercise's experiment in the lab's cluster (a copy of score-predict's or
preempt-predict's case, node-e tainted for noexecute) is kept before a reset and before `labkit
cleanup scheduler` (keep_student_work, keep_at_cleanup): the logs that show it go with them.

`labkit reset scheduler EXERCISE` (reset_exercise) builds one exercise's objects afresh (the Pod
web and node-a..d; node-e and its Pods; node-f and legacy; job-1..3, the student's scheduler
stopped; nightly, pinned to node-c and rejected again) and leaves the others as they are; `student_work` lists,
from the audit log, what the student changed that a reset would undo. Answer files are never
touched.
"""

from __future__ import annotations

import copy

from labkit.apiserver import waits
from labkit.apiserver.errors import ApiError
from labkit.apiserver.process import spawn
from labkit.apiserver.target import SERVER_TAG, for_env
from labkit.controllers.manager import DEFAULT_CONTROLLERS
from labkit.crashpoints import crash_point
from labkit.errors import LabkitError
from labkit.exercises import wait_for
from labkit.nodes import ready_node

NAMESPACE = "sched"
# the embedded server's default controllers (the node lifecycle controller among them: it takes the
# not-ready taint that admission puts on each new Node off once the Node reports Ready), without the
# node stand-in (it registers labkit-node and would bind Pods itself), with the scheduler, the
# taint-eviction controller and the kubelets' admission step. The server starts them in this order
# once it listens: first those whose work the build waits for (the Nodes' taints, the namespace's
# ServiceAccount, the scheduler's bindings, the Deployment's Pods, the kubelet's rejection)
FIRST = ("nodelifecycle", "serviceaccount", "scheduler", "deployment", "replicaset", "kubeletadmit", "tainteviction")
CONTROLLERS = FIRST + tuple(c for c in DEFAULT_CONTROLLERS if c not in FIRST and c != "node")
SETTLE_TIMEOUT = 30


def _node(name: str, disk: str, cpu: str, memory: str, taints: list[dict]) -> dict:
    return ready_node(name, {"cpu": cpu, "memory": memory, "pods": "110"}, {"disk": disk}, taints)


PENDING_NODES = {
    "node-a": _node("node-a", "ssd", "4", "8Gi", [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]),
    "node-b": _node("node-b", "hdd", "4", "8Gi", []),
    "node-c": _node("node-c", "ssd", "1", "8Gi", []),
    "node-d": _node("node-d", "ssd", "4", "8Gi", [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]),
}
DRAIN_NODE = _node("node-e", "hdd", "8", "16Gi", [])
RETIRING_NODE = _node("node-f", "hdd", "2", "4Gi", [])
# the taint the noexecute exercise adds to node-e (in the prompt: `{{taint}}`)
DRAIN_TAINT = {"key": "drain", "value": "now", "effect": "NoExecute"}


def _container(cpu: str = "100m", memory: str = "64Mi") -> list[dict]:
    return [{"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]


WEB = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "labels": {"app": "web", "team": "batch"}},
       "spec": {"nodeSelector": {"disk": "ssd"}, "containers": _container("2", "1Gi")}}

# noexecute: the Pods on node-e, each with other tolerations of the drain taint
DRAIN_PODS = {
    "plain": [],
    "patient": [{"key": "drain", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120}],
    "stubborn": [{"key": "drain", "operator": "Exists", "effect": "NoExecute"}],
    "wrong-effect": [{"key": "drain", "operator": "Exists", "effect": "NoSchedule"}],
    "wildcard": [{"operator": "Exists"}],
    "other-value": [{"key": "drain", "operator": "Equal", "value": "later", "effect": "NoExecute",
                     "tolerationSeconds": 300}],
}


LEGACY = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy", "labels": {"app": "legacy"}},
          "spec": {"nodeName": "node-f", "containers": _container("500m", "256Mi")}}


# node-name: a Pod someone gave a node by hand (spec.nodeName at creation): no scheduler sees a Pod
# that names its node (pkg/scheduler/eventhandlers.go addAllEventHandlers: the scheduling queue
# takes only Pods for which assignedPod is false), and node-c's kubelet admission rejects it, as
# 2 CPUs do not fit node-c's 1 (pkg/kubelet/lifecycle/predicate.go Admit, kubelet_pods.go rejectPod;
# labkit.controllers.kubeletadmit): phase Failed, reason OutOfcpu
PINNED_NODE = "node-c"
NIGHTLY = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nightly", "labels": {"app": "nightly"}},
           "spec": {"nodeName": PINNED_NODE, "containers": _container("2", "512Mi")}}


def remake_nightly(env, node: str | None = None, cpu: str | None = None, scheduler: str | None = None,
                   selector: dict | None = None, force: bool = False) -> None:
    """nightly deleted and made again with kubectl, as a student would: as the lab made it but
    placed on `node` by spec.nodeName (or by no one), asking for `cpu`, for the scheduler
    `scheduler`, with the nodeSelector `selector` (each when given); `force` deletes it with
    --force --grace-period=0. For node-name's common mistakes and mutants."""
    import json
    pod = copy.deepcopy(NIGHTLY)
    pod["spec"].pop("nodeName")
    if node:
        pod["spec"]["nodeName"] = node
    if cpu:
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler
    if selector:
        pod["spec"]["nodeSelector"] = selector
    target = for_env(env)
    target.kubectl("delete", "pod", NIGHTLY["metadata"]["name"], "-n", NAMESPACE,
                   *(("--force", "--grace-period=0") if force else ()))
    target.kubectl("create", "-n", NAMESPACE, "-f", "-", input=json.dumps(pod))


# own-scheduler: Pods for the student's scheduler (spec.schedulerName), each on a disk=hdd node
OWN_SCHEDULER = "my-scheduler"
JOBS = {"job-1": "3", "job-2": "3", "job-3": "2"}      # name: CPU request


def job_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "job"}},
            "spec": {"schedulerName": OWN_SCHEDULER, "nodeSelector": {"disk": "hdd"},
                     "containers": _container(JOBS[name], "512Mi")}}


def drain_pod(name: str) -> dict:
    spec = {"nodeName": DRAIN_NODE["metadata"]["name"], "containers": _container()}
    if DRAIN_PODS[name]:
        spec["tolerations"] = copy.deepcopy(DRAIN_PODS[name])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "drain"}}, "spec": spec}


# spread: a pool of four Nodes over three zones (two in zone-a; zone-c's one node has room for a
# single replica), kept for the team shop by a taint its Pods tolerate and a label they select;
# the Deployment shop (six replicas, no spread constraint yet) and the Pod cart, whose labels
# share tier=frontend with shop's. Recreate, and Pods that need no grace period: a new template
# replaces every replica at once (no kubelet runs to end a graceful deletion).
ZONE_KEY = "topology.kubernetes.io/zone"
POOL = ("pool", "shop")
SHOP_TAINT = {"key": "dedicated", "value": "shop", "effect": "NoSchedule"}
SHOP_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}


def _zone_node(name: str, zone: str, cpu: str) -> dict:
    node = _node(name, "hdd", cpu, "8Gi", [dict(SHOP_TAINT)])
    labels = node["metadata"]["labels"]
    del labels["disk"]
    labels.update({ZONE_KEY: zone, POOL[0]: POOL[1]})
    return node


ZONE_NODES = {"zone-a-1": _zone_node("zone-a-1", "zone-a", "4"), "zone-a-2": _zone_node("zone-a-2", "zone-a", "4"),
              "zone-b-1": _zone_node("zone-b-1", "zone-b", "4"), "zone-c-1": _zone_node("zone-c-1", "zone-c", "1500m")}
SHOP_LABELS = {"app": "shop", "tier": "frontend"}
SHOP_REPLICAS = 6
SHOP = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "labels": {"app": "shop"}},
        "spec": {"replicas": SHOP_REPLICAS, "selector": {"matchLabels": {"app": "shop"}},
                 "strategy": {"type": "Recreate"},
                 "template": {"metadata": {"labels": dict(SHOP_LABELS)},
                              "spec": {"nodeSelector": {POOL[0]: POOL[1]}, "tolerations": [dict(SHOP_TOLERATION)],
                                       "terminationGracePeriodSeconds": 0,
                                       "containers": _container("1", "256Mi")}}}}
CART = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cart", "labels": {"app": "cart", "tier": "frontend"}},
        "spec": {"nodeSelector": {POOL[0]: POOL[1], "kubernetes.io/hostname": "zone-a-1"},
                 "tolerations": [dict(SHOP_TOLERATION)], "terminationGracePeriodSeconds": 0,
                 "containers": _container("100m", "128Mi")}}


# binpack: a pool of three Nodes for batch work, the scheduler's configuration with a second
# profile, bin-packer, that scores as the default one does (NodeResourcesFit LeastAllocated), and
# the batch's Pods in batch.yaml (in the lab's directory), which the student creates. Bare Pods,
# owned by no ReplicaSet and selected by no Service: PodTopologySpread's system default
# constraints (podtopologyspread/plugin.go, defaultingType System) apply to neither.
PACK_POOL = ("pool", "pack")
PACK_TAINT = {"key": "dedicated", "value": "pack", "effect": "NoSchedule"}
BIN_PACKER = "bin-packer"
BATCH = 6                   # Pods of 1 CPU and 1Gi, in batch.yaml


def _pack_node(name: str) -> dict:
    node = _node(name, "hdd", "4", "8Gi", [dict(PACK_TAINT)])
    labels = node["metadata"]["labels"]
    del labels["disk"]
    labels[PACK_POOL[0]] = PACK_POOL[1]
    return node


PACK_NODES = {name: _pack_node(name) for name in ("pack-1", "pack-2", "pack-3")}
SCHEDULER_CONFIG = f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: {BIN_PACKER}
"""
CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "kube-scheduler-config", "namespace": "kube-system"},
              "data": {"config.yaml": SCHEDULER_CONFIG}}


def batch_pod(i: int) -> dict:
    """A Pod of the batch, as batch.yaml has it (no schedulerName: the default scheduler's)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"batch-{i}", "labels": {"app": "batch"}},
            "spec": {"nodeSelector": {PACK_POOL[0]: PACK_POOL[1]},
                     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "pack", "effect": "NoSchedule"}],
                     "terminationGracePeriodSeconds": 0, "containers": _container("1", "1Gi")}}


BATCH_PODS = [f"batch-{i}" for i in range(1, BATCH + 1)]


# -- each exercise's part of the starting state ------------------------------------------------------

def _put_nodes(client, nodes) -> None:
    """Create (or bring back to what the lab built) Nodes with their status, as a kubelet registers
    one; then wait until the node lifecycle controller has taken off the not-ready taint that
    admission (TaintNodesByCondition) gives every new Node, so that each Node is as built. The
    controller may start after the Nodes are made (the server starts its controllers once it
    listens): its informer's first list has them."""
    nodes = list(nodes)
    existing = {n["metadata"]["name"]: n for n in client.list("v1", "nodes")[0]}
    for node in nodes:
        name = node["metadata"]["name"]
        current = existing.get(name)
        if current is None:
            current = client.create("v1", "nodes", copy.deepcopy(node))
        else:
            body = copy.deepcopy(node)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            current = client.update("v1", "nodes", body)
        for attempt in range(10):       # the node lifecycle controller may write the Node's taints meanwhile
            status = current.get("status") or {}
            if not any(status.get(k) != node["status"][k] for k in ("allocatable", "capacity")) and \
                    sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or []) == \
                    sorted((c["type"], c["status"]) for c in node["status"]["conditions"]):
                break
            try:
                client.update("v1", "nodes", dict(current, status=copy.deepcopy(node["status"])), None, "status")
                break
            except ApiError as exc:
                if exc.code != 409 or attempt == 9:
                    raise
                current = client.get("v1", "nodes", name)
    names = {node["metadata"]["name"] for node in nodes}

    def not_ready() -> list[str]:
        # (a cordoned Node keeps the unschedulable taint the same controller gives it)
        return sorted(n["metadata"]["name"] for n in client.list("v1", "nodes")[0] if n["metadata"]["name"] in names
                      and any(t.get("key") == "node.kubernetes.io/not-ready" and t.get("effect") == "NoSchedule"
                              for t in (n.get("spec") or {}).get("taints") or []))
    if not wait_for(lambda: not not_ready(), timeout=SETTLE_TIMEOUT, interval=0.05):
        raise LabkitError(f"the node lifecycle controller did not take the not-ready taint off "
                          f"{', '.join(not_ready())} within {SETTLE_TIMEOUT} s")


def _delete_pods(client, names) -> None:
    """The Pods `names` of the lab's namespace deleted at once (no grace), and gone."""
    names = set(names)

    def gone() -> bool:
        left = [p["metadata"]["name"] for p in client.list("v1", "pods", NAMESPACE)[0] if p["metadata"]["name"] in names]
        for name in left:
            try:
                client.delete("v1", "pods", name, NAMESPACE, options={"gracePeriodSeconds": 0})
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return not left
    if not wait_for(gone, timeout=SETTLE_TIMEOUT, interval=0.1):
        raise LabkitError(f"the Pods {', '.join(sorted(names))} did not go away within {SETTLE_TIMEOUT} s")


def _build_pending(client) -> None:
    _delete_pods(client, ["web"])
    client.create("v1", "pods", copy.deepcopy(WEB), NAMESPACE)

    def failed_once():
        pod = client.get_or_none("v1", "pods", "web", NAMESPACE) or {}
        return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in (pod.get("status") or {}).get("conditions") or [])
    if not wait_for(failed_once, timeout=SETTLE_TIMEOUT, interval=0.1):
        raise LabkitError(f"the scheduler did not try the Pod web within {SETTLE_TIMEOUT} s")


def _build_drain(client) -> None:
    _delete_pods(client, list(DRAIN_PODS))
    for name in DRAIN_PODS:
        client.create("v1", "pods", drain_pod(name), NAMESPACE)


def _build_retiring(client) -> None:
    _delete_pods(client, ["legacy"])
    client.create("v1", "pods", copy.deepcopy(LEGACY), NAMESPACE)


def _shop_pods(client) -> list[dict]:
    return client.list("v1", "pods", NAMESPACE, label_selector="app=shop")[0]


def _build_spread(client) -> None:
    """The pool's Nodes as registered, the Deployment shop made afresh (deleted with its
    ReplicaSets and Pods, foreground, then created) and the Pod cart; waits until the scheduler
    has bound all six replicas (without a constraint they all fit)."""
    if client.get_or_none("apps/v1", "deployments", "shop", NAMESPACE) is not None:
        try:
            client.delete("apps/v1", "deployments", "shop", NAMESPACE, options={"propagationPolicy": "Foreground"})
        except ApiError as exc:
            if exc.code != 404:
                raise
    if not wait_for(lambda: client.get_or_none("apps/v1", "deployments", "shop", NAMESPACE) is None,
                    timeout=SETTLE_TIMEOUT, interval=0.1):
        raise LabkitError(f"the Deployment shop did not go away within {SETTLE_TIMEOUT} s")
    _delete_pods(client, [p["metadata"]["name"] for p in _shop_pods(client)] + ["cart"])
    client.create("v1", "pods", copy.deepcopy(CART), NAMESPACE)
    client.create("apps/v1", "deployments", copy.deepcopy(SHOP), NAMESPACE)

    def placed():
        pods = _shop_pods(client)
        return len(pods) == SHOP_REPLICAS and all((p.get("spec") or {}).get("nodeName") for p in pods)
    if not wait_for(placed, timeout=SETTLE_TIMEOUT, interval=0.05):
        raise LabkitError(f"the scheduler did not place the Deployment shop's {SHOP_REPLICAS} Pods within "
                          f"{SETTLE_TIMEOUT} s")


def _build_binpack(client) -> None:
    """The pool's Nodes as registered, the scheduler's configuration as the lab ships it, and no
    Pod of the batch (the student creates them from batch.yaml)."""
    current = client.get_or_none("v1", "configmaps", "kube-scheduler-config", "kube-system")
    if current is None:
        client.create("v1", "configmaps", copy.deepcopy(CONFIG_MAP), "kube-system")
    elif current.get("data") != CONFIG_MAP["data"]:
        client.update("v1", "configmaps", dict(current, data=copy.deepcopy(CONFIG_MAP["data"])), "kube-system")
    _delete_pods(client, BATCH_PODS)


def _build_pinned(client) -> None:
    _delete_pods(client, ["nightly"])
    client.create("v1", "pods", copy.deepcopy(NIGHTLY), NAMESPACE)

    def rejected():
        return ((client.get_or_none("v1", "pods", "nightly", NAMESPACE) or {}).get("status") or {}).get("phase") == "Failed"
    if not wait_for(rejected, timeout=SETTLE_TIMEOUT, interval=0.1):
        raise LabkitError(f"the kubelet admission of {PINNED_NODE} did not reject the Pod nightly within {SETTLE_TIMEOUT} s")


# the Nodes and the Pod a check of own-scheduler makes for the student's scheduler, and deletes again
PROBE_LABEL = ("labkit.example/probe", "own-scheduler")


def remove_probes(client) -> None:
    """Delete the Pods and Nodes a check of own-scheduler made (by their label), at once."""
    selector = f"{PROBE_LABEL[0]}={PROBE_LABEL[1]}"
    for pod in client.list("v1", "pods", NAMESPACE, label_selector=selector)[0]:
        try:
            client.delete("v1", "pods", pod["metadata"]["name"], NAMESPACE, options={"gracePeriodSeconds": 0})
        except ApiError as exc:
            if exc.code != 404:
                raise
    for node in client.list("v1", "nodes", label_selector=selector)[0]:
        try:
            client.delete("v1", "nodes", node["metadata"]["name"])
        except ApiError as exc:
            if exc.code != 404:
                raise


def _build_jobs(client) -> None:
    remove_probes(client)       # left by a check that was interrupted
    _delete_pods(client, list(JOBS))
    for name in JOBS:
        client.create("v1", "pods", job_pod(name), NAMESPACE)


# each exercise's part: its Nodes (put first, as registered), then what build() makes
PARTS = {"why-pending": _build_pending, "noexecute": _build_drain, "taint-effects": _build_retiring,
         "score-predict": None, "preempt-predict": None, "own-scheduler": _build_jobs,
         "node-name": _build_pinned, "spread": _build_spread, "binpack": _build_binpack}
NODES = {"why-pending": PENDING_NODES, "noexecute": {DRAIN_NODE["metadata"]["name"]: DRAIN_NODE},
         "taint-effects": {RETIRING_NODE["metadata"]["name"]: RETIRING_NODE}, "spread": ZONE_NODES,
         "binpack": PACK_NODES}
BUILD_ORDER = ("noexecute", "taint-effects", "spread", "binpack", "why-pending", "own-scheduler", "node-name")


def build_part(client, exercise_id: str) -> None:
    """One exercise's part of the starting state built afresh: its Nodes, then its objects."""
    if exercise_id in NODES:
        _put_nodes(client, NODES[exercise_id].values())
    if PARTS[exercise_id]:
        PARTS[exercise_id](client)


def up(env):
    spawn(env, SERVER_TAG, controllers=CONTROLLERS)     # its state directory is in the ledger
    crash_point("scheduler:server")
    client = for_env(env).client()
    client.create("v1", "namespaces", {"metadata": {"name": NAMESPACE}})
    # every Node first, all thirteen together: the Pod web's first scheduling attempt sees them all
    _put_nodes(client, [node for part in BUILD_ORDER for node in NODES.get(part, {}).values()])
    crash_point("scheduler:nodes")
    # the Pods below are admitted only with the namespace's default ServiceAccount
    waits.default_service_account(client, NAMESPACE, SETTLE_TIMEOUT)
    for part in BUILD_ORDER:
        PARTS[part](client)
        crash_point(f"scheduler:{part}")
    env.log("starting state loaded on labkit's embedded API server, with its scheduler")


def reset_exercise(env, exercise_id: str) -> None:
    """Build one exercise's objects afresh (its Nodes as the lab registered them, its Pods
    re-created, the student's scheduler stopped for own-scheduler); the other exercises' objects
    are not touched. The prediction exercises have
    nothing live: their reset changes nothing."""
    if exercise_id == "own-scheduler":      # the student's scheduler would bind the new Pods at once
        from labkit.scheduler import own
        own.stop(env)
    build_part(for_env(env).client(), exercise_id)
    env.log(f"exercise {exercise_id}: its objects were built afresh")


def is_up(env):
    try:
        for_env(env).client().get("v1", "namespaces", NAMESPACE)
        return True
    except (LabkitError, ApiError, OSError):
        return False


def access(env):
    target = for_env(env)
    from pathlib import Path
    here = Path(__file__).resolve().parent
    return f"""## Your cluster

labkit's embedded API server, with labkit's reconstruction of kube-scheduler v1.34.1 (default profile)
binding every Pod that names no node. The Nodes run no kubelet: a bound Pod stays Pending, with its node.

    export KUBECONFIG={target.kubeconfig}
    kubectl get nodes -L disk
    kubectl get pods -n {NAMESPACE} -o wide

- the case files of score-predict and preempt-predict: `{here}/scenarios/`
- the batch of binpack: `{here}/batch.yaml`; the scheduler's configuration: the ConfigMap
  kube-system/kube-scheduler-config
- audit log (every request): `{target.state_dir}/audit.log`
"""


# -- what a reset would undo -----------------------------------------------------------------------

def part_of(resource: str | None, namespace: str | None, name: str | None) -> str | None:
    """The exercise whose part of the lab an object belongs to (None: no exercise's)."""
    if resource == "nodes":
        return "why-pending" if name in PENDING_NODES else "noexecute" if name == DRAIN_NODE["metadata"]["name"] \
            else "taint-effects" if name == RETIRING_NODE["metadata"]["name"] \
            else "spread" if name in ZONE_NODES else "binpack" if name in PACK_NODES else None
    if resource == "pods" and namespace == NAMESPACE:
        return "why-pending" if name == "web" else "noexecute" if name in DRAIN_PODS \
            else "taint-effects" if name == "legacy" else "own-scheduler" if name in JOBS \
            else "node-name" if name == NIGHTLY["metadata"]["name"] \
            else "spread" if name == "cart" or (name or "").startswith("shop-") \
            else "binpack" if name in BATCH_PODS else None
    if resource == "configmaps" and namespace == "kube-system" and name == CONFIG_MAP["metadata"]["name"]:
        return "binpack"
    if resource in ("deployments", "replicasets") and namespace == NAMESPACE and (name or "").startswith("shop"):
        return "spread"
    return None


def noexecute_trial(env, since: float) -> dict | None:
    """The first sign since `since` that the student tried noexecute's experiment in the lab's
    cluster, by the rule `labkit scheduler play` withholds by (labkit.scheduler.withhold): the
    taint-eviction controller deciding (its decision log: evict at once, later, or never) for one
    of the six Pods of node-e under a NoExecute taint someone put there (not the node lifecycle
    controller's node.kubernetes.io/ ones), or for any Pod that tolerates as one of them under a
    NoExecute taint of the drain key, or of a key its tolerations were renamed to (a copy); or the lab's scheduler deciding a Pod that tolerates
    as one of them while a node had such a taint (its FailedScheduling message, or where it bound
    it, shows whether it tolerates the taint). {at, time, pod, what}; None if none, or on a real
    cluster. What the student looked at labkit cannot know: the try is what kubectl could show."""
    import time

    from labkit.scheduler import withhold
    target = for_env(env)
    if not target.embedded:
        return None

    def found(at: float, pod: str, what: str) -> dict:
        return {"at": at, "time": time.strftime("%H:%M:%S", time.gmtime(at)), "pod": pod, "what": what}
    tries = []
    for d in target.decisions(since=since) or []:
        if d.get("controller") != "tainteviction" or d.get("action") != "process":
            continue
        item = d.get("item") or {}
        taints = [t for t in d.get("taints") or [] if not str(t.get("key", "")).startswith("node.kubernetes.io/")]
        ours = item.get("namespace") == NAMESPACE and item.get("name") in DRAIN_PODS \
            and d.get("node") == DRAIN_NODE["metadata"]["name"] and taints
        if ours or withhold.tolerates_as_drain_pod_under(taints, d.get("tolerations")):
            shown = ", ".join(f"{t.get('key')}={t.get('value') or ''}:NoExecute" for t in taints)
            tries.append(found(d["ts"], f"{item.get('namespace')}/{item.get('name')}",
                               f"the taint-eviction controller decided for the Pod {item.get('namespace')}/"
                               f"{item.get('name')} on {d.get('node')} under the taint {shown}"))
            break
    pods = set()
    for pod, at, situation in decided_since(target, since):
        if pod not in pods and withhold.noexecute_reveals(situation):       # each Pod's first such decision
            pods.add(pod)
            tries.append(found(at, pod, f"the lab's scheduler decided the Pod {pod}, which tolerates as one of "
                                        "node-e's Pods does, next to a node with a NoExecute taint of the drain key or a renamed one"))
    return min(tries, key=lambda t: t["at"]) if tries else None


def decided_since(target, since: float):
    """(namespace/name, at, situation) of each situation the lab's scheduler decided a Pod in at or
    after `since`, from the records it keeps of its decisions (labkit.scheduler.explain RECORDS:
    one file per Pod, its `history`), Pod by Pod in the order of their files, each Pod's in the
    order it kept them."""
    import json

    from labkit.scheduler.explain import RECORDS
    for path in sorted((target.state_dir / RECORDS).glob("*/*.json")):
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for seen in kept.get("history") or []:
            at = seen.get("at")
            if isinstance(at, (int, float)) and at >= since:
                yield f"{path.parent.name}/{path.stem}", at, seen.get("situation")


def live_trial(env, exercise_id: str, since: float) -> dict | None:
    """For noexecute, noexecute_trial. Else the first Pod the lab's scheduler decided since `since`
    whose situation is, or holds part of, the case of prediction exercise `exercise_id`
    (score-predict, preempt-predict), by the rule
    `labkit scheduler explain` withholds by (labkit.scheduler.withhold.reveals): a copy of the case
    built in the lab's cluster, whose binding, preemption and events kubectl shows. From the
    records the scheduler keeps of its decisions (each situation a Pod was decided in, and when:
    `history`); None if none, or on a real cluster."""
    import time

    from labkit.inputs import load_yaml
    from labkit.scheduler import withhold
    if exercise_id == "noexecute":
        return noexecute_trial(env, since)
    target = for_env(env)
    if not target.embedded:
        return None
    case = load_yaml(env.lab.directory / env.lab.exercise(exercise_id).params["case"])
    found, pods = [], set()
    for pod, at, situation in decided_since(target, since):
        if pod not in pods and isinstance(situation, dict) and withhold.reveals(situation, case, exercise_id):
            pods.add(pod)       # each Pod's first decision that shows the case
            found.append({"at": at, "time": time.strftime("%H:%M:%S", time.gmtime(at)), "pod": pod,
                          "what": f"the lab's scheduler decided the Pod {pod}"})
    return min(found, key=lambda t: t["at"]) if found else None


def keep_student_work(env, exercise_id: str | None, doing: str = "reset") -> list[str]:
    """Before `labkit reset scheduler [EXERCISE]`: what showed a prediction exercise's outcome in
    the lab's cluster is kept (labkit.predictions.keep_trial): a live decision on a copy of
    score-predict's or preempt-predict's case (live_trial), a NoExecute taint on node-e or on a
    copy of its Pods (noexecute_trial). A reset of the exercise starts its
    check's reading of the records anew; a reset of the whole lab starts a new API server with
    none: neither may turn a prediction written after watching into one written before."""
    from labkit import predictions
    notes = []
    for exercise in ("score-predict", "preempt-predict", "noexecute"):
        if exercise_id not in (None, exercise):
            continue
        found = live_trial(env, exercise, env.state.ready_time(exercise))
        if found is not None:
            kept = predictions.keep_trial(env.lab.id, exercise, found)
            what = "the experiment of noexecute" if exercise == "noexecute" else f"a copy of {exercise}'s case"
            notes.append(predictions.trial_note(exercise, f"labkit keeps that {kept['what']} (at {kept['time']}), "
                                                f"{what}: a prediction written or changed after that earns no "
                                                f"points, after this {doing} too"))
    return notes


def keep_at_cleanup(env) -> list[str]:
    """`labkit cleanup scheduler` removes the API server's state, the logs that show a try of a
    prediction exercise's experiment with it: such a try is kept first (keep_student_work), as
    before a reset, so that cleanup and `labkit run` cannot turn a prediction written after
    watching into one written before."""
    return keep_student_work(env, None, "cleanup")


def student_work(env, exercise_id: str | None) -> list[str]:
    """What `labkit reset scheduler [EXERCISE]` would undo of what the student did: each successful
    request of theirs (not the cluster's own components) on the exercise's Nodes and Pods since its
    part was built, from the audit log. Answer files are never touched."""
    parts = [exercise_id] if exercise_id else list(PARTS)
    target = for_env(env)
    since = {part: env.state.ready_time(part) for part in parts}
    from labkit.apiserver.audit import received_at
    found = []
    for e in target.audit(since=min(since.values())) or []:
        user = (e.get("user") or {}).get("username", "")
        verb = e.get("verb")
        if user.startswith("system:") or verb not in ("create", "update", "patch", "delete") \
                or (e.get("responseStatus") or {}).get("code", 500) >= 300:
            continue
        ref = e.get("objectRef") or {}
        part = part_of(ref.get("resource"), ref.get("namespace"), ref.get("name"))
        if part not in since or received_at(e) < since[part]:
            continue
        kind = {"nodes": "Node", "deployments": "Deployment", "replicasets": "ReplicaSet",
                "configmaps": "ConfigMap"}.get(ref.get("resource"), "Pod")
        what = f"{kind} {ref['namespace'] + '/' if ref.get('namespace') else ''}{ref.get('name')}"
        phrase = {"create": f"the {what} you created", "delete": f"your deletion of {what}"}.get(
            verb, f"your changes to {what}")
        if ref.get("subresource") == "binding":
            phrase = f"your binding of {what}"
        elif ref.get("subresource"):
            phrase = f"your changes to {what} ({ref['subresource']})"
        if phrase not in found:
            found.append(phrase)
    from labkit.scheduler import own
    if "own-scheduler" in parts and own.running(env):
        found.append("the scheduler you run with `labkit scheduler serve` (it is stopped; your file stays)")
    return found
