"""The Priority admission plugin (plugin/pkg/admission/priority/admission.go, v1.34).

Mutating phase, Pods only, no subresources (Plugin.Admit, admitPod):
- CREATE: without spec.priorityClassName the global default class is used (the one with
  globalDefault and, should there be several, the lowest value: getDefaultPriorityClass), whose
  name is written into priorityClassName; without one the priority is 0 and the preemption
  policy PreemptLowerPriority (getDefaultPriority). A named class that does not exist is refused
  (403 `no PriorityClass with name X was found`). A spec.priority or spec.preemptionPolicy the
  client set that differs from what the class gives is refused with upstream's texts; then
  spec.priority and spec.preemptionPolicy are set from the class.
- UPDATE: a priority or preemptionPolicy the new object lacks is taken from the old one (the
  plugin set them on create; validation keeps them immutable).

Validating phase, PriorityClasses (validatePriorityClass): a second class with globalDefault is
refused (403 `PriorityClass X is already marked as default. Only one default can exist`).
"""

from __future__ import annotations

from labkit.apiserver.admission import Attributes, forbidden_by
from labkit.apiserver.policykinds import DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS

PRIORITY_CLASSES = "scheduling.k8s.io/priorityclasses"


class Priority:
    def __init__(self, store):
        self.store = store

    def _classes(self) -> list[dict]:
        return self.store.list(PRIORITY_CLASSES)[0]

    def default_class(self) -> dict | None:
        """getDefaultPriorityClass: of the classes marked globalDefault, the lowest value."""
        chosen = None
        for pc in self._classes():
            if pc.get("globalDefault") and (chosen is None or pc.get("value", 0) < chosen.get("value", 0)):
                chosen = pc
        return chosen

    def admit(self, attrs: Attributes) -> None:
        rt = attrs.rt
        if attrs.subresource or (rt.group, rt.resource) != ("", "pods") or attrs.operation not in ("CREATE", "UPDATE"):
            return
        spec = attrs.obj.setdefault("spec", {})
        if attrs.operation == "UPDATE":
            old_spec = (attrs.old or {}).get("spec") or {}
            for key in ("priority", "preemptionPolicy"):
                if spec.get(key) is None and old_spec.get(key) is not None:
                    spec[key] = old_spec[key]
            return
        if attrs.operation != "CREATE":
            return
        name = spec.get("priorityClassName") or ""
        if not name:
            pc = self.default_class()
            if pc is None:
                priority, policy = DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS, "PreemptLowerPriority"
            else:
                priority, policy = pc.get("value", 0), pc.get("preemptionPolicy")
                spec["priorityClassName"] = pc["metadata"]["name"]
        else:
            pc = self.store.get(PRIORITY_CLASSES, "", name)
            if pc is None:
                raise forbidden_by(attrs, f"no PriorityClass with name {name} was found")
            priority, policy = pc.get("value", 0), pc.get("preemptionPolicy")
        given = spec.get("priority")
        if given is not None and given != priority:
            raise forbidden_by(attrs, f"the integer value of priority ({given}) must not be provided in pod spec; "
                                      f"priority admission controller computed {priority} from the given "
                                      "PriorityClass name")
        spec["priority"] = priority
        if policy is not None:
            given = spec.get("preemptionPolicy")
            if given is not None and given != policy:
                raise forbidden_by(attrs, f"the string value of PreemptionPolicy ({given}) must not be provided in "
                                          f"pod spec; priority admission controller computed {policy} from the given "
                                          "PriorityClass name")
            spec["preemptionPolicy"] = policy

    def validate(self, attrs: Attributes) -> None:
        rt = attrs.rt
        if attrs.subresource or (rt.group, rt.resource) != ("scheduling.k8s.io", "priorityclasses"):
            return
        if attrs.operation not in ("CREATE", "UPDATE") or not attrs.obj.get("globalDefault"):
            return
        current = self.default_class()
        if current is None:
            return
        if attrs.operation == "CREATE" or current["metadata"]["name"] != attrs.obj["metadata"].get("name"):
            raise forbidden_by(attrs, f"PriorityClass {current['metadata']['name']} is already marked as default. "
                                      "Only one default can exist")
