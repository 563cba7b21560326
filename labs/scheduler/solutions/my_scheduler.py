"""my-scheduler, the reference solution of exercise own-scheduler: a scheduler of its own for the
Pods of namespace sched whose spec.schedulerName is my-scheduler. It watches them; for each one
without a node it keeps the nodes that pass the filters kube-scheduler's default profile would
apply here (no untolerated NoSchedule or NoExecute taint, not cordoned, the nodeSelector's labels,
enough free CPU and memory next to the Pods already bound there), picks the one with the most free
CPU, and binds the Pod there with POST pods/NAME/binding, as kube-scheduler's DefaultBinder does.
Run it with `labkit scheduler serve my_scheduler.py` (KUBECONFIG names the lab's API server)."""

from kubernetes import client, config, watch
from kubernetes.utils import parse_quantity

NAMESPACE, NAME = "sched", "my-scheduler"
config.load_kube_config()
api = client.CoreV1Api()


def requests(pod) -> dict:
    total = {"cpu": 0, "memory": 0}
    for c in pod.spec.containers:
        asked = (c.resources.requests if c.resources else None) or {}
        for resource in total:
            total[resource] += parse_quantity(asked.get(resource, "0"))
    return total


def tolerated(taint, tolerations) -> bool:
    for t in tolerations or []:
        if t.effect and t.effect != taint.effect:
            continue
        if t.operator == "Exists" and (not t.key or t.key == taint.key):
            return True
        if t.key == taint.key and (t.value or "") == (taint.value or ""):
            return True
    return False


def free(node, bound) -> dict:
    left = {r: parse_quantity(node.status.allocatable.get(r, "0")) for r in ("cpu", "memory")}
    for pod in bound:
        if pod.spec.node_name == node.metadata.name and pod.status.phase not in ("Succeeded", "Failed"):
            for r, amount in requests(pod).items():
                left[r] -= amount
    return left


def fits(node, pod, room) -> bool:
    if node.spec.unschedulable:
        return False
    if any(t.effect in ("NoSchedule", "NoExecute") and not tolerated(t, pod.spec.tolerations)
           for t in node.spec.taints or []):
        return False
    labels = node.metadata.labels or {}
    if any(labels.get(k) != v for k, v in (pod.spec.node_selector or {}).items()):
        return False
    return all(room[r] >= amount for r, amount in requests(pod).items())


def schedule(pod) -> None:
    nodes = api.list_node().items
    bound = api.list_pod_for_all_namespaces().items
    rooms = {n.metadata.name: free(n, bound) for n in nodes}
    feasible = [n for n in nodes if fits(n, pod, rooms[n.metadata.name])]
    if not feasible:
        print(f"{pod.metadata.name}: no node fits", flush=True)
        return
    best = max(feasible, key=lambda n: (rooms[n.metadata.name]["cpu"], n.metadata.name))
    binding = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name),
                               target=client.V1ObjectReference(api_version="v1", kind="Node", name=best.metadata.name))
    api.create_namespaced_pod_binding(pod.metadata.name, NAMESPACE, binding, _preload_content=False)
    print(f"{pod.metadata.name} -> {best.metadata.name}", flush=True)


def main() -> None:
    while True:
        for event in watch.Watch().stream(api.list_namespaced_pod, NAMESPACE, timeout_seconds=60):
            pod = event["object"]
            if event["type"] in ("ADDED", "MODIFIED") and pod.spec.scheduler_name == NAME \
                    and not pod.spec.node_name and not pod.metadata.deletion_timestamp:
                schedule(pod)


if __name__ == "__main__":
    main()
