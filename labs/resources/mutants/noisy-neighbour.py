"""Near-misses of the noisy-neighbour reference: each of the node's three Pods with one field
dropped or changed at a time (the cache's limit and request halved, doubled, one MiB off, in MB,
dropped; every command argument; the neighbours' limits, requests, commands; the names). Whether
a change of the cache's memory request or limit still solves it is decided by the
reconstruction: kubelet's admission (the requests fit the allocatable), the cache filling 3/4 of
its limit (its command) under that limit, its memory request not below the scenario's, the node's working set (every workload's allocation
plus what its interpreter was measured to hold) leaving memory.available at or above the
eviction threshold, the limit below the node's memory, and the cache at least a third of the largest
one the node can hold above that threshold (checks.cache_shrunk_too_far)."""

import copy

from labkit.mutants import Mutant
from labkit.pods import pod_request
from labkit.resources.nearmiss import fixed_part_changed, pod_edits, replace_with, with_pod
from labkit.resources.workload import memory_target


def _free_verdict(checks, ctx, observation, node, mutated):
    config = node.config
    cache = ctx.params["pod"]
    pods = {name: checks._pod_of(live["manifest"], node.name) for name, live in observation["pods"].items()}
    pods[cache] = mutated
    if sum(pod_request(p, "memory").value_int() for p in pods.values()) > config.allocatable_memory:
        return ("OutOfmemory",), None
    c = mutated.containers[0]
    if checks._memory_request(mutated.manifest["spec"], c.name) < \
            checks._memory_request(checks._pristine("node-2.yaml", node.name)[cache].manifest["spec"], c.name):
        return ("memory request is below",), None
    limit = c.limits.get("memory")
    if limit is None or not limit.value:
        return ("has no memory limit",), None
    if limit.value_int() >= config.memory_capacity:
        return ("not below",), None
    working_set = cache_bytes = cache_overhead = 0
    for name, pod in pods.items():
        for container in pod.running_containers():
            state = observation["pods"][name]["containers"][container.name]
            own = container.limits.get("memory")
            target = memory_target(container.command, own.value_int() if own is not None and own.value else None) or 0
            overhead = checks._overhead(state, memory_target(container.command, state.get("limit")))
            if own is not None and own.value and target + overhead > own.value_int():
                return ("OOMKilled",), None
            working_set += target + overhead
            if name == cache:
                cache_bytes, cache_overhead = target, overhead
    available = config.memory_capacity - working_set
    if available < config.eviction_hard_bytes():
        return ("eviction threshold",), None
    if checks.cache_shrunk_too_far(cache_bytes, checks.cache_room(config, working_set - cache_bytes - cache_overhead,
                                                                  cache_overhead)):
        return ("less than a third",), None
    return (), (f"limit {limit}: the cache fills {memory_target(c.command, limit.value_int()) // 2 ** 20}Mi, the node keeps "
                f"{available // 2 ** 20}Mi available (threshold {config.eviction_hard_bytes() // 2 ** 20}Mi); the requests "
                "fit the allocatable")


def mutants(ctx):
    import labkit.resources.node as nodes
    p = ctx.params
    checks = ctx.lab._load("checks.py")
    observation = checks.observe_noisy_neighbour(ctx)
    node = nodes.lab_nodes(ctx.env)[p["node"]]
    pristine = checks._pristine("node-2.yaml", p["node"])
    live = {"cache:set:spec.containers[0].resources.limits.memory=256Mi",
            "storefront:set:spec.containers[0].resources.limits.memory=64Mi"}
    for name in sorted(pristine):
        gone = copy.deepcopy(observation)
        del gone["pods"][name]
        yield Mutant(f"{name}:deleted", f"Pod {name} deleted", names=(name, "not on"), observation=gone)
        reference = observation["pods"][name]["manifest"]
        for pe in pod_edits(reference, p["node"], node.config.priority_classes):
            changed = with_pod(observation, name, pe.manifest)
            equivalent = None
            if pe.pod.name != name:
                names = (name, "not on")
            elif name != p["pod"]:
                names = (name, "was changed")
            else:
                only = pristine[name].containers[0].name
                names = fixed_part_changed(pe, pristine[name].manifest["spec"], only,
                                           [("limits", "memory"), ("requests", "memory")])
                if names is None:
                    names, equivalent = _free_verdict(checks, ctx, observation, node, pe.pod)
            yield Mutant(pe.name, f"Pod {pe.edit.describe()}", names=names, observation=changed, equivalent=equivalent,
                         apply=replace_with(p["node"], pe.manifest) if pe.name in live else None)
