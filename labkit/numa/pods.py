"""Pods as the NUMA lab's resource managers see them: labkit.pods (the API server's defaulting,
validation and QoS class, Kubernetes v1.34) without pod-level resources.

Pod-level resources (`spec.resources`, beta and on by default in v1.34) are not part of this
reconstruction of the CPU, memory and topology managers: such a Pod is refused with a message
saying so. UIDs derived from a Pod's namespace and name are the lab's own (its checkpoints show
them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labkit import pods as shared
from labkit.errors import ConfigError
from labkit.pods import BEST_EFFORT, BURSTABLE, GUARANTEED, Container, Pod, PodInvalid, qos_class  # noqa: F401

UID_SCOPE = "labkit-numa"


def pod_from_dict(data: Any, source=None, where: str = "", validate: bool = True) -> Pod:
    """A Pod as the API server would store it; `validate=False` skips the server's validation, as
    kubelet's own unit tests do when they build Pod objects directly."""
    pod = shared.pod_from_dict(data, source, where, validation=validate, uid_scope=UID_SCOPE)
    _refuse_pod_level(pod, source, where)
    return pod


def load_pods(path: str | Path, allow_empty: bool = False) -> list[Pod]:
    """Pods from a YAML file (see labkit.pods.load_pods), refused first as kube-apiserver v1.34
    refuses them under kubectl's default fieldValidation=Strict: an unknown or duplicate field is
    an error in kubectl's words (labkit.strict), not silently dropped."""
    check_strict(path)
    pods = shared.load_pods(path, allow_empty=allow_empty, uid_scope=UID_SCOPE)
    for pod in pods:
        _refuse_pod_level(pod, path, "")
    return pods


def check_strict(path: str | Path) -> None:
    """Raise labkit.strict.StrictDecodingError for a file with an unknown or duplicate field."""
    import yaml

    from labkit.strict import load_strict

    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return              # shared.load_pods reports the file it cannot read
    try:
        load_strict(text, str(path))
    except yaml.YAMLError:
        return              # and the syntax error, with its line


def _refuse_pod_level(pod: Pod, source, where: str) -> None:
    if pod.pod_requests is not None or pod.pod_limits is not None:
        field = f"{where}: spec.resources" if where else "spec.resources"
        raise ConfigError(source or "<pod>", field, "pod-level resources are not part of labkit's "
                          f"reconstruction of the resource managers; set resources per container (Pod {pod.name!r})")
