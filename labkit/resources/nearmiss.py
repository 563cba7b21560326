"""Near-misses of the resources lab's reference Pods, for the lab's mutant run (labkit.mutants).

`pod_edits` takes a Pod as the reference solution leaves it on its node and yields each one-step
change of it as the student would write it (labkit.mutants.tree_edits over the manifest; each
resource quantity also halved, doubled, one unit less and more), run through the API server's
defaulting and validation (labkit.pods, labkit.resources.validation): a change the API server refuses is no Pod a student can
run and is left out; the rest come with the stored manifest they would give.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from labkit.errors import ConfigError, LabkitError
from labkit.mutants import Edit, tree_edits
from labkit.quantity import Quantity
from labkit.pods import Pod, pod_from_dict
from labkit.resources.validation import check_consistency

MIB = 2 ** 20
SKIPPED = ("apiVersion", "kind", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.priority", "status")


@dataclass
class PodEdit:
    edit: Edit
    manifest: dict           # the stored (defaulted) manifest the changed Pod gets
    pod: Pod

    @property
    def name(self) -> str:
        return f"{self.pod.name}:{self.edit.op}:{self.edit.path}" + (f"={self.edit.after}" if self.edit.op == "set" else "")


def written(manifest: dict) -> dict:
    """A stored manifest as the student writes it: without what the API server fills in."""
    out = copy.deepcopy(manifest)
    out.get("metadata", {}).pop("uid", None)
    out.get("metadata", {}).pop("namespace", None)
    out.pop("status", None)
    out.get("spec", {}).pop("priority", None)
    return out


def quantity_alternatives(text) -> list[str]:
    """A quantity halved, doubled, one unit (1m of CPU, 1Mi of memory) less and more."""
    try:
        q = Quantity.parse(str(text))
    except Exception:
        return []
    text = str(text)
    if text.endswith("m") or text.replace(".", "").isdigit():
        milli = q.milli_value()
        return [f"{m}m" for m in (milli // 2, milli * 2, milli - 1, milli + 1) if m > 0]
    value = q.value_int()
    return [f"{v // MIB}Mi" if v % MIB == 0 else str(v) for v in (value // 2, value * 2, value - MIB, value + MIB) if v > 0]


def _resource_paths(value, path=""):
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if path.endswith(".requests") or path.endswith(".limits"):
                yield child, item
            else:
                yield from _resource_paths(item, child)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _resource_paths(item, f"{path}[{i}]")


def pod_edits(manifest: dict, node: str, priority_classes: dict) -> list[PodEdit]:
    """Every one-step near-miss of a stored Pod manifest that the API server accepts."""
    base = written(manifest)
    alternatives = {}
    for path, item in _resource_paths(base):
        defaults = [v for v in ({str(item)[:-1], ""} if str(item) else set()) if v != str(item)]
        alternatives[path] = quantity_alternatives(item) + defaults
    out = []
    for edit in tree_edits(base, alternatives=alternatives, skip=lambda p: p in SKIPPED):
        try:
            pod = check_consistency(pod_from_dict(copy.deepcopy(edit.value), f"{node}/mutant", default_node=node,
                                                  priority_classes=priority_classes))
        except (ConfigError, LabkitError, ValueError, TypeError, KeyError, AttributeError):
            continue        # the API server refuses it
        out.append(PodEdit(edit, pod.manifest, pod))
    return out


def same_pod(a: dict, b: dict) -> bool:
    """Two stored manifests that are one Pod to kubelet: same name, same spec."""
    return a["metadata"]["name"] == b["metadata"]["name"] and a.get("spec") == b.get("spec")


def replace_with(node_name: str, manifest: dict, settle_pod: bool = True):
    """apply(env): the changed Pod run live in place of the reference's, as a student would."""
    def apply(env):
        lab = env.lab.environment_module()
        lab.replace_pod(env, node_name, written(manifest))
        if settle_pod:
            lab.wait_settled(env, node_name, manifest["metadata"]["name"])
    return apply


def pods_of(observation) -> dict:
    return observation["pods"] if "pods" in observation else observation


def with_pod(observation, original_name: str, manifest: dict):
    """The observation with one Pod's stored manifest replaced (renamed: under its new name)."""
    out = copy.deepcopy(observation)
    pods = pods_of(out)
    entry = pods.pop(original_name)
    entry["manifest"] = manifest
    pods[manifest["metadata"]["name"]] = entry
    return out


def container_of(edit: Edit, manifest: dict) -> str | None:
    """The name of the container an edit touches (spec.containers[i]...), in the reference manifest."""
    import re
    found = re.match(r"spec\.(initContainers|containers)\[(\d+)\]", edit.path)
    if not found:
        return None
    items = manifest["spec"].get(found.group(1)) or []
    index = int(found.group(2))
    return items[index].get("name") if index < len(items) else None


def without_resources(spec: dict, container: str, free) -> dict:
    """A copy of a Pod spec with the given (requests|limits, resource) of one container removed:
    what an exercise leaves the student free to change, taken out before comparing."""
    spec = copy.deepcopy(spec)
    for c in spec.get("containers") or []:
        if c.get("name") == container:
            resources = c.get("resources") or {}
            for kind, resource in free:
                (resources.get(kind) or {}).pop(resource, None)
                if kind in resources and not resources[kind]:
                    del resources[kind]
            if "resources" in c and not c["resources"]:
                del c["resources"]
    return spec


def fixed_part_changed(pe: PodEdit, original_spec: dict, container: str, free) -> tuple[str, ...] | None:
    """The words a failure must name when the edit changes what the exercise keeps as the
    scenario gives it (None: it only touches the free fields)."""
    if without_resources(pe.manifest["spec"], container, free) == without_resources(original_spec, container, free):
        return None
    return ("command",) if "command" in pe.edit.path else ("changed",)


def neighbour_mutants(observation, node_name: str, names, priority_classes: dict, live=frozenset()):
    """Mutants of the Pods an exercise must leave as given: each one-step edit of each, and each
    one deleted (its failure must name the Pod)."""
    from labkit.mutants import Mutant
    for name in names:
        entry = pods_of(observation).get(name)
        if entry is None:
            continue
        gone = copy.deepcopy(observation)
        del pods_of(gone)[name]
        yield Mutant(f"{name}:deleted", f"Pod {name} deleted", names=(name, "gone"), observation=gone)
        for pe in pod_edits(entry["manifest"], node_name, priority_classes):
            words = (name, "gone") if pe.pod.name != name else (name, "was changed")
            same = same_pod(pe.manifest, entry["manifest"])
            yield Mutant(f"{name}:{pe.name}", f"Pod {name}: {pe.edit.describe()}", names=() if same else words,
                         equivalent="the API server's defaulting gives the same Pod (limits copied into missing "
                                    "requests)" if same else None,
                         observation=with_pod(observation, name, pe.manifest),
                         apply=replace_with(node_name, pe.manifest, settle_pod=False) if pe.name in live else None)
