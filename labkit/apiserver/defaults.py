"""Defaulting: what kube-apiserver's decoder applies to every object it decodes — the body of a
create, an update, each patch type once the patch is applied, and a status update — so that an
object reads the same however it was written.

Reconstructed from Kubernetes v1.34: the `SetDefaults_*` functions of pkg/apis/core/v1,
apps/v1, batch/v1, autoscaling/v1 and v2, rbac/v1 and discovery/v1 (defaults.go), the
declarative `+default=` markers of k8s.io/api (ContainerPort.protocol, the replicas of a
ReplicationController, the volume plugins' fields), and the traversal of the generated
defaulters (zz_generated.defaults.go): every object is walked top-down along its schema
(models.py) and each nested value gets the defaulter of its type, the enclosing object's first,
as SetObjectDefaults_<Kind> does.

Besides defaults, a few values Go always writes although nobody set them are added where the
labs and kubectl see them: a container's `resources: {}` (a struct field, never omitted).

Not reconstructed: the pod-level resources defaulting (PodLevelResources, only for pods that set
spec.resources) and the image volumes' pull policy (ImageVolume, off by default in v1.34).
"""

from __future__ import annotations

from typing import Callable

from labkit import quantity
from labkit.apiserver import models
from labkit.apiserver.podresize import default_resize_policy

DEFAULT_TERMINATION_GRACE_PERIOD = 30          # v1.DefaultTerminationGracePeriodSeconds
DEFAULT_MODE = 0o644                           # Secret/ConfigMap/DownwardAPI/Projected volumes
DEFAULT_CLIENT_IP_TIMEOUT = 10800              # v1.DefaultClientIPServiceAffinitySeconds
HPA_DEFAULT_CPU_UTILIZATION = 80               # autoscaling.DefaultCPUUtilization

DEFAULTERS: dict[str, Callable[[dict], None]] = {}


def defaulter(*names: str):
    def register(fn):
        for name in names:
            DEFAULTERS[name] = fn
        return fn
    return register


def apply(model_name: str, obj: dict) -> dict:
    """Default `obj` (a decoded object of the model) in place and return it."""
    _walk(models.model(model_name), obj)
    return obj


def _walk(m: models.Model | None, node: dict) -> None:
    if m is None:
        return
    fn = DEFAULTERS.get(m.name)
    if fn is not None:
        fn(node)
    children = m.children
    for key, value in node.items():
        child = children.get(key)
        if child is None:
            continue
        container, inner = child
        if container == "list":
            for item in value:
                if item.__class__ is dict:
                    _walk(inner, item)
        elif container == "dict":
            for item in value.values():
                if item.__class__ is dict:
                    _walk(inner, item)
        elif value.__class__ is dict:
            _walk(inner, value)


def _resource_list(values) -> None:
    """SetDefaults_ResourceList: every quantity rounded up to milli-units."""
    if isinstance(values, dict):
        for key, value in values.items():
            try:
                values[key] = quantity.canonical(value, round_milli=True)
            except quantity.QuantityError:
                pass        # refused by the decoder already


# -- core/v1 ---------------------------------------------------------------------------------

def image_tag(image: str) -> str:
    """The tag parsers.ParseImageName finds: "latest" when there is neither tag nor digest."""
    name, digest = (image.split("@", 1) + [""])[:2]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    return "" if digest else "latest"


@defaulter("V1Container", "V1EphemeralContainer")
def container(c: dict) -> None:
    if not c.get("imagePullPolicy"):
        c["imagePullPolicy"] = "Always" if image_tag(str(c.get("image") or "")) == "latest" else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})       # a struct field: Go writes it even when empty


@defaulter("V1ContainerPort")
def container_port(port: dict) -> None:
    port.setdefault("protocol", "TCP")          # +default="TCP"


@defaulter("V1ResourceRequirements", "V1VolumeResourceRequirements")
def resource_requirements(r: dict) -> None:
    _resource_list(r.get("limits"))
    _resource_list(r.get("requests"))


@defaulter("V1Pod")
def pod(obj: dict) -> None:
    spec = obj.get("spec") or {}
    # requests default to limits (for pods only, not for pod templates)
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = c.get("resources") or {}
        if resources.get("limits"):
            requests = resources.setdefault("requests", {})
            for key, value in resources["limits"].items():
                requests.setdefault(key, value)
            c["resources"] = resources
    # resizePolicy NotRequired for requested cpu and memory (InPlacePodVerticalScaling, on in v1.34)
    default_resize_policy(spec)
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True       # v1.DefaultEnableServiceLinks
    if spec.get("hostNetwork"):
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            for port in c.get("ports") or []:
                if not port.get("hostPort"):
                    port["hostPort"] = port.get("containerPort")
    obj["spec"] = spec


@defaulter("V1PodSpec")
def pod_spec(spec: dict) -> None:
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_PERIOD)
    spec.setdefault("schedulerName", "default-scheduler")
    _resource_list(spec.get("overhead"))


@defaulter("V1Volume")
def volume(v: dict) -> None:
    if not any(k != "name" for k in v):
        v["emptyDir"] = {}


@defaulter("V1HostPathVolumeSource")
def host_path(v: dict) -> None:
    v.setdefault("type", "")                   # HostPathUnset


@defaulter("V1SecretVolumeSource", "V1ConfigMapVolumeSource", "V1DownwardAPIVolumeSource",
           "V1ProjectedVolumeSource")
def default_mode(v: dict) -> None:
    v.setdefault("defaultMode", DEFAULT_MODE)


@defaulter("V1ServiceAccountTokenProjection")
def token_projection(v: dict) -> None:
    v.setdefault("expirationSeconds", 3600)


@defaulter("V1ObjectFieldSelector")
def field_selector(v: dict) -> None:
    v.setdefault("apiVersion", "v1")


@defaulter("V1Probe")
def probe(p: dict) -> None:
    for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                       ("failureThreshold", 3)):
        if not p.get(key):
            p[key] = value


@defaulter("V1HTTPGetAction")
def http_get(a: dict) -> None:
    if not a.get("path"):
        a["path"] = "/"
    if not a.get("scheme"):
        a["scheme"] = "HTTP"


@defaulter("V1GRPCAction")
def grpc(a: dict) -> None:
    a.setdefault("service", "")                # +default=""


@defaulter("V1ISCSIVolumeSource", "V1ISCSIPersistentVolumeSource")
def iscsi(v: dict) -> None:
    if not v.get("iscsiInterface"):
        v["iscsiInterface"] = "default"


@defaulter("V1RBDVolumeSource", "V1RBDPersistentVolumeSource")
def rbd(v: dict) -> None:
    for key, value in (("pool", "rbd"), ("user", "admin"), ("keyring", "/etc/ceph/keyring")):
        if not v.get(key):
            v[key] = value


@defaulter("V1AzureDiskVolumeSource")
def azure_disk(v: dict) -> None:
    v.setdefault("cachingMode", "ReadWrite")
    v.setdefault("fsType", "ext4")
    v.setdefault("readOnly", False)
    v.setdefault("kind", "Shared")


@defaulter("V1ScaleIOVolumeSource", "V1ScaleIOPersistentVolumeSource")
def scale_io(v: dict) -> None:
    if not v.get("storageMode"):
        v["storageMode"] = "ThinProvisioned"
    if not v.get("fsType"):
        v["fsType"] = "xfs"


@defaulter("V1Service")
def service(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    affinity = spec.setdefault("sessionAffinity", "None")
    if affinity == "None":
        spec.pop("sessionAffinityConfig", None)
    elif affinity == "ClientIP":
        timeout = ((spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds")
        if timeout is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": DEFAULT_CLIENT_IP_TIMEOUT}}
    type_ = spec.setdefault("type", "ClusterIP")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port", 0)
    # service.ExternallyAccessible
    externally = type_ in ("LoadBalancer", "NodePort") or (type_ == "ClusterIP" and spec.get("externalIPs"))
    if externally and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and type_ in ("NodePort", "LoadBalancer", "ClusterIP"):
        spec["internalTrafficPolicy"] = "Cluster"
    if type_ == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
        for ingress in ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
            if ingress.get("ip") and ingress.get("ipMode") is None:
                ingress["ipMode"] = "VIP"


@defaulter("V1ReplicationController")
def replication_controller(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if labels is not None:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = obj.setdefault("metadata", {})
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
    spec.setdefault("replicas", 1)              # +default=1


@defaulter("V1Secret")
def secret(obj: dict) -> None:
    if not obj.get("type"):
        obj["type"] = "Opaque"


@defaulter("V1Namespace")
def namespace(obj: dict) -> None:
    meta = obj.setdefault("metadata", {})
    if meta.get("name"):
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    status = obj.setdefault("status", {})       # SetDefaults_NamespaceStatus
    if not status.get("phase"):
        status["phase"] = "Active"


@defaulter("V1PersistentVolume")
def persistent_volume(obj: dict) -> None:
    status = obj.setdefault("status", {})
    if not status.get("phase"):
        status["phase"] = "Pending"
    spec = obj.setdefault("spec", {})
    if not spec.get("persistentVolumeReclaimPolicy"):
        spec["persistentVolumeReclaimPolicy"] = "Retain"
    spec.setdefault("volumeMode", "Filesystem")
    _resource_list(spec.get("capacity"))


@defaulter("V1PersistentVolumeClaim")
def persistent_volume_claim(obj: dict) -> None:
    status = obj.setdefault("status", {})
    if not status.get("phase"):
        status["phase"] = "Pending"
    _resource_list(status.get("capacity"))
    _resource_list(status.get("allocatedResources"))


@defaulter("V1PersistentVolumeClaimSpec")
def persistent_volume_claim_spec(spec: dict) -> None:
    spec.setdefault("volumeMode", "Filesystem")


@defaulter("V1Endpoints")
def endpoints(obj: dict) -> None:
    for subset in obj.get("subsets") or []:
        for port in subset.get("ports") or []:
            if not port.get("protocol"):
                port["protocol"] = "TCP"


@defaulter("V1NodeStatus")
def node_status(status: dict) -> None:
    _resource_list(status.get("capacity"))
    if status.get("allocatable") is None and status.get("capacity") is not None:
        status["allocatable"] = dict(status["capacity"])
    _resource_list(status.get("allocatable"))


@defaulter("V1FileKeySelector")
def file_key_selector(v: dict) -> None:
    v.setdefault("optional", False)            # +default=false


# -- apps/v1 ---------------------------------------------------------------------------------

@defaulter("V1Deployment")
def deployment(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


@defaulter("V1DaemonSet")
def daemon_set(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


@defaulter("V1StatefulSet")
def stateful_set(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.setdefault("updateStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == "RollingUpdate" and strategy.get("rollingUpdate") is not None:
        strategy["rollingUpdate"].setdefault("partition", 0)
    # StatefulSetAutoDeletePVC (GA in v1.32)
    policy = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    if not policy.get("whenDeleted"):
        policy["whenDeleted"] = "Retain"
    if not policy.get("whenScaled"):
        policy["whenScaled"] = "Retain"
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)


@defaulter("V1ReplicaSet")
def replica_set(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)


# -- batch/v1 --------------------------------------------------------------------------------

@defaulter("V1Job")
def job(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = (1 << 31) - 1 if spec.get("backoffLimitPerIndex") is not None else 6
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    meta = obj.setdefault("metadata", {})
    if labels is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    failure_policy = spec.get("podFailurePolicy")
    if failure_policy is not None:
        for rule in failure_policy.get("rules") or []:
            for pattern in rule.get("onPodConditions") or []:
                if not pattern.get("status"):
                    pattern["status"] = "True"
    # JobPodReplacementPolicy (GA in v1.34)
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if failure_policy is not None else "TerminatingOrFailed"


@defaulter("V1CronJob")
def cron_job(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)


# -- autoscaling -----------------------------------------------------------------------------

@defaulter("V1HorizontalPodAutoscaler")
def hpa_v1(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("minReplicas", 1)


@defaulter("V2HorizontalPodAutoscaler")
def hpa_v2(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": HPA_DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if behavior is not None:    # SetDefaults_HorizontalPodAutoscalerBehavior: fill what is nil
        up = behavior.setdefault("scaleUp", {})
        up.setdefault("stabilizationWindowSeconds", 0)
        up.setdefault("selectPolicy", "Max")
        up.setdefault("policies", [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                   {"type": "Percent", "value": 100, "periodSeconds": 15}])
        down = behavior.setdefault("scaleDown", {})
        down.setdefault("selectPolicy", "Max")
        down.setdefault("policies", [{"type": "Percent", "value": 100, "periodSeconds": 15}])


# -- rbac/v1, discovery/v1 -----------------------------------------------------------------------

@defaulter("V1RoleBinding", "V1ClusterRoleBinding")
def role_binding(obj: dict) -> None:
    ref = obj.setdefault("roleRef", {})
    if not ref.get("apiGroup"):
        ref["apiGroup"] = "rbac.authorization.k8s.io"


@defaulter("RbacV1Subject")
def subject(s: dict) -> None:
    if not s.get("apiGroup") and s.get("kind") in ("User", "Group"):
        s["apiGroup"] = "rbac.authorization.k8s.io"


@defaulter("DiscoveryV1EndpointPort")
def endpoint_slice_port(port: dict) -> None:
    port.setdefault("name", "")
    port.setdefault("protocol", "TCP")
