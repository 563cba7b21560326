"""The API server's pod-level resource checks that labkit.pods does not make yet (Kubernetes v1.34,
PodLevelResources beta and on).

pkg/apis/core/validation/validation.go `validatePodResourceConsistency` (called from
`validatePodResources` when `spec.resources` is set):

* for every resource of the containers' aggregate requests (resourcehelper.AggregateContainerRequests:
  app containers and sidecars add up, a regular init container counts with the sidecars declared
  before it, the larger wins), the pod-level request (0 when the Pod names none) must be at least
  the aggregate: `spec.resources.requests[<name>]: Invalid value: "<pod request>": must be greater
  than or equal to aggregate container requests of <aggregate>`;
* every app container's limit of a resource the Pod limits must be at most the pod-level limit:
  `spec.resources.containers[<i>][<name>].limits: Invalid value: "<limit>": must be less than or
  equal to pod limits of <pod limit>` (the path is built from the pod-level resources path, as
  upstream builds it).

Upstream iterates Go maps; the errors are given here in resource-name order.
"""

from __future__ import annotations

from labkit.quantity import Quantity
from labkit.pods import Pod, PodInvalid, aggregate_container_requests


def consistency_errors(pod: Pod) -> list[str]:
    if pod.pod_requests is None and pod.pod_limits is None:
        return []                     # validatePodResources: spec.resources is nil
    errors = []
    pod_requests = pod.pod_requests or {}
    for name, aggregate in sorted(aggregate_container_requests(pod).items()):
        asked = pod_requests.get(name, Quantity.of(0))
        if aggregate.value > asked.value:
            errors.append(f'spec.resources.requests[{name}]: Invalid value: "{asked}": '
                          f"must be greater than or equal to aggregate container requests of {aggregate}")
    pod_limits = pod.pod_limits or {}
    for i, container in enumerate(pod.containers):
        for name, limit in sorted(container.limits.items()):
            if name in pod_limits and limit.value > pod_limits[name].value:
                errors.append(f'spec.resources.containers[{i}][{name}].limits: Invalid value: "{limit}": '
                              f"must be less than or equal to pod limits of {pod_limits[name]}")
    return errors


def check_consistency(pod: Pod, source=None, where: str = "") -> Pod:
    """Raise PodInvalid with kubectl's wording (one error as it is, several in brackets)."""
    errors = consistency_errors(pod)
    if errors:
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise PodInvalid(f'The Pod "{pod.name}" is invalid: {detail}', source, where)
    return pod
