"""Near-misses of the Pod that best-effort admits and single-numa-node rejects: every field dropped,
every value (CPUs, memory, names, apiVersion, kind) changed to nearby ones, every key misspelt.

Whether a near-miss still does what the exercise asks is decided by labkit's reconstruction of
kubelet (the same admission the check runs: labkit.numa.admission on lab-two-node with the lab's
kubelet-config.yaml under both policies); those that do are proven equivalent, the others must be
failed by the check with the reason their outcome has."""

import copy

import yaml

from labkit.mutants import Mutant, tree_edits

CPU_VALUES = ["8", "9", "15", "16", "10.5", "9500m", "1", "2"]
MEMORY_VALUES = ["1Gi", "1G", "1", "512Mi", "100Gi"]


def _outcome(ctx, manifest) -> tuple[str, tuple]:
    """What the reconstruction makes of `manifest`: ("pass", ()) or ("fail", words of the reason)."""
    from labkit.errors import LabkitError
    from labkit.numa.pods import pod_from_dict
    from labkit.strict import StrictDecodingError, load_strict

    checks = ctx.lab._load("checks.py")
    if isinstance(manifest, dict) and set(manifest) - set(ctx.exercise.answer_keys):
        return "fail", ("does not read",)     # a top-level key the exercise does not read (CheckContext.answer)
    try:
        load_strict(yaml.safe_dump(manifest), "answer")
    except StrictDecodingError:
        return "fail", ("as written",)
    if not isinstance(manifest, dict) or manifest.get("kind") != "Pod" or manifest.get("apiVersion") != "v1":
        return "fail", ("not a Pod",)
    try:
        pod = pod_from_dict(manifest, "answer")
    except LabkitError:
        return "fail", ("not a Pod",)
    if checks._missing_images(manifest):
        return "fail", ("image", "Required value")
    if checks._node_lacks(ctx.params["machine"], pod):
        return "fail", ("best-effort rejects",)
    best, single = checks._two_policies(ctx.params["machine"], pod)
    if not best.admitted:
        return "fail", ("best-effort rejects",)
    if single.admitted:
        return "fail", ("single-numa-node admits",)
    if single.result.reason != "TopologyAffinityError":
        return "fail", ("not for topology",)
    return "pass", ()


def _renamed(value, path=()):
    """Each mapping key misspelt (its last letter dropped), one at a time: (path, changed copy)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key), None
            yield from _renamed(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _renamed(item, (*path, i))


def mutants(ctx):
    pod = ctx.answer()
    alternatives = {"spec.containers[].resources.limits.cpu": CPU_VALUES,
                    "spec.containers[].resources.limits.memory": MEMORY_VALUES,
                    "apiVersion": ["v1beta1", "apps/v1", ""], "kind": ["Deployment", "pod", ""]}
    made = []
    for edit in tree_edits(pod, alternatives=alternatives):
        made.append((f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"answer: {edit.describe()}", edit.value))
    for path, _ in _renamed(pod):
        changed = copy.deepcopy(pod)
        parent = changed
        for step in path[:-1]:
            parent = parent[step]
        key = path[-1]
        parent[key[:-1]] = parent.pop(key)
        made.append((f"misspelt:{'.'.join(map(str, path))}", f"answer: the key {key} written as {key[:-1]}", changed))
    for resource in ("example.com/gpu", "nvidia.com/gpu"):      # a device the node has, one it has not
        device = copy.deepcopy(pod)
        device["spec"]["containers"][0]["resources"]["limits"][resource] = 1
        made.append((f"device:{resource}", f"answer: the container asks for one {resource} too", device))
    requests = copy.deepcopy(pod)
    container = requests["spec"]["containers"][0]
    container["resources"]["requests"] = dict(container["resources"]["limits"])
    made.append(("requests-equal-limits", "answer: requests written out equal to the limits", requests))
    for name, change, value in made:
        verdict, names = _outcome(ctx, value)
        if verdict == "pass":
            yield Mutant(name, change, answer=value,
                         equivalent="labkit's reconstruction of kubelet admits it with best-effort and rejects it "
                                    "with TopologyAffinityError under single-numa-node, as the exercise asks")
        else:
            yield Mutant(name, change, names=names, answer=value)
