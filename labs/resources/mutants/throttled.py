"""Near-misses of the throttled reference: the explanation's numbers (answer file), and the fixed
Pod with one field dropped or changed at a time (its CPU request halved, doubled, one millicore
off, a typo that turns 200m into 200 CPUs; the command, the memory settings, the names). Whether a
change of the CPU request or limit still solves it is decided by kubelet's reconstruction: the
request must cover 15 ms per 100 ms (150m) and stay within one CPU, and the CFS quota kubelet
derives from the limit (MilliCPUToQuota) must not be below twice that (a quota about as large as the use throttles)."""

from labkit.mutants import Mutant, answer_mutants
from labkit.resources import kubelet
from labkit.resources.nearmiss import fixed_part_changed, neighbour_mutants, pod_edits, replace_with, with_pod


def _free_verdict(ctx, pod):
    p = ctx.params
    need = p["work_ms"] * 1000 // p["every_ms"]
    server = next(c for c in pod.containers if c.name == p["container"])
    settings = kubelet.container_cgroup(pod, server)
    request = server.requests.get("cpu")
    quota = settings.cpu_quota or 0
    if quota > 0 and quota * 1000 // settings.cpu_period < 2 * need:
        return ("still throttled",), None
    if request is None or request.milli_value() < need:
        return ("does not cover",), None
    if request.milli_value() > 1000:
        return ("more than a CPU",), None
    return (), (f"cpu request {request.milli_value()}m covers {need}m and is within one CPU; CFS quota "
                f"{quota if quota > 0 else 'none'} (kubelet.container_cgroup) holds no less than {2 * need}m")


def mutants(ctx):
    import labkit.resources.node as nodes
    yield from answer_mutants(ctx.answer())
    p = ctx.params
    checks = ctx.lab._load("checks.py")
    observation = checks.observe_throttled(ctx)
    node = nodes.lab_nodes(ctx.env)[p["node"]]
    original = checks._pristine("node-1.yaml", p["node"])[p["pod"]]
    reference = observation[p["pod"]]["manifest"]
    live = {"set:spec.containers[0].command[3]=1", "set:spec.containers[0].resources.requests.cpu=100m"}
    for pe in pod_edits(reference, p["node"], node.config.priority_classes):
        changed = with_pod(observation, p["pod"], pe.manifest)
        key = pe.name.split(":", 1)[1]
        if pe.pod.name != p["pod"]:
            yield Mutant(pe.name, f"Pod {pe.edit.describe()}", names=(p["pod"], "not on"), observation=changed)
            continue
        names = fixed_part_changed(pe, original.manifest["spec"], p["container"], [("requests", "cpu"), ("limits", "cpu")])
        equivalent = None
        if names is None:
            names, equivalent = _free_verdict(ctx, pe.pod)
        yield Mutant(pe.name, f"Pod {pe.edit.describe()}", names=names, observation=changed, equivalent=equivalent,
                     apply=replace_with(p["node"], pe.manifest, settle_pod=False) if key in live else None)
    others = [n for n in checks._pristine("node-1.yaml", p["node"])
              if n != p["pod"] and n not in checks.CHANGED_BY_EXERCISES[p["node"]]]
    yield from neighbour_mutants(observation, p["node"], others, node.config.priority_classes)
