"""The clusterrole-aggregation controller (pkg/controller/clusterroleaggregation/
clusterroleaggregation_controller.go): a ClusterRole with an `aggregationRule` gets, as its
`rules`, the rules of every ClusterRole its selectors pick.

- any ClusterRole added, changed or deleted requeues every ClusterRole that has an
  aggregationRule (enqueue);
- syncClusterRole: for each selector in order, the matching ClusterRoles sorted by name, the
  role itself skipped; each rule is appended unless an equal one is already there (ruleExists);
  when the result equals the current rules nothing is written, else the rules are applied
  (server-side apply, field manager `clusterrole-aggregation-controller`, force) — so rules
  written by hand into an aggregated role are replaced.

This is how `view` ⊂ `edit` ⊂ `admin` hold: edit carries the label aggregate-to-admin, view
aggregate-to-edit, and a ClusterRole labelled rbac.authorization.k8s.io/aggregate-to-view:
"true" widens view, edit and admin.
"""

from __future__ import annotations

from labkit.apiserver.selectors import LabelSelector
from labkit.controllers.base import KeyedController

API_VERSION = "rbac.authorization.k8s.io/v1"
FIELD_MANAGER = "clusterrole-aggregation-controller"


def _normal(rule: dict) -> dict:
    """A rule as equality.Semantic compares it: empty and missing lists are equal."""
    return {k: v for k, v in rule.items() if v}


def aggregate(role: dict, roles: list[dict]) -> list[dict]:
    """The rules syncClusterRole computes for `role` from all ClusterRoles `roles`."""
    rules: list[dict] = []
    for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        labels = LabelSelector.from_label_selector(selector)
        for other in sorted(roles, key=lambda r: r["metadata"]["name"]):
            if other["metadata"]["name"] == role["metadata"]["name"]:
                continue
            if not labels.matches(other["metadata"].get("labels")):
                continue
            for rule in other.get("rules") or []:
                if _normal(rule) not in rules:
                    rules.append(_normal(rule))
    return rules


class ClusterRoleAggregationController(KeyedController):
    name = "clusterrole-aggregation"
    user = "system:serviceaccount:kube-system:clusterrole-aggregation-controller"

    def make_informers(self):
        return {"clusterroles": self.informer(API_VERSION, "clusterroles", "ClusterRole", namespaced=False,
                                              on_add=self._changed, on_update=lambda old, new: self._changed(new),
                                              on_delete=self._changed)}

    def _changed(self, _obj: dict) -> None:
        # enqueue: every aggregated ClusterRole, whatever changed
        if self.queue is None or "clusterroles" not in self.informers:
            return
        for role in self.informers["clusterroles"].list():
            if role.get("aggregationRule") is not None:
                self.queue.add(role["metadata"]["name"])

    def start(self) -> None:
        super().start()
        self._changed({})       # the informer's initial adds may have come before it was known

    def sync(self, name: str) -> None:
        role = self.informers["clusterroles"].get(name)
        if role is None or role.get("aggregationRule") is None:
            return
        rules = aggregate(role, self.informers["clusterroles"].list())
        if rules == [_normal(r) for r in role.get("rules") or []]:
            return
        self.client.patch(API_VERSION, "clusterroles", name,
                          {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": {"name": name},
                           "rules": rules},
                          patch_type="apply", query={"fieldManager": FIELD_MANAGER, "force": "true"})
        self.log.record(self.name, "aggregate", None,
                        f"clusterrole {name}: its selectors pick {len(rules)} rules → apply them", level="debug")
