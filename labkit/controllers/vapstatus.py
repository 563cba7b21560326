"""The ValidatingAdmissionPolicy status controller of kube-controller-manager v1.34.1
(pkg/controller/validatingadmissionpolicystatus/controller.go, Controller.reconcile): for each
policy whose metadata.generation is newer than its status.observedGeneration it type-checks the
expressions (labkit.apiserver.admission.typechecking, TypeChecker.Check) and writes the status:
observedGeneration and typeChecking.expressionWarnings (empty: `typeChecking: {}`). Upstream
applies it with server-side apply as field manager validatingadmissionpolicy-status-controller;
here it is an update of the status subresource (a conflict is retried with the policy as it is
now). The warnings never change what the policy admits."""

from __future__ import annotations

from labkit.apiserver.admission import typechecking
from labkit.apiserver.errors import ApiError
from labkit.controllers.base import KeyedController

GROUP_VERSION = "admissionregistration.k8s.io/v1"


class ValidatingAdmissionPolicyStatusController(KeyedController):
    name = "validatingadmissionpolicy-status"

    def make_informers(self):
        return {"policies": self.informer(GROUP_VERSION, "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
                                          namespaced=False, on_add=self._enqueue,
                                          on_update=lambda old, new: self._enqueue(new))}

    def _enqueue(self, policy: dict) -> None:
        if self.queue is not None:
            self.queue.add(policy["metadata"]["name"])

    def sync(self, key: str) -> None:
        policy = self.client.get_or_none(GROUP_VERSION, "validatingadmissionpolicies", key)
        if policy is None:
            return
        generation = policy["metadata"].get("generation") or 0
        if generation <= ((policy.get("status") or {}).get("observedGeneration") or 0):
            return
        warnings = typechecking.check(policy, self.client.api.registry.catalog)
        type_checking = {"expressionWarnings": warnings} if warnings else {}
        body = dict(policy, status={"observedGeneration": generation, "typeChecking": type_checking})
        try:
            self.client.update(GROUP_VERSION, "validatingadmissionpolicies", body, subresource="status")
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        self.log.record(self.name, "type-checked", {"name": key},
                        f"validatingadmissionpolicy {key}: generation {generation}, {len(warnings)} warning(s)")
