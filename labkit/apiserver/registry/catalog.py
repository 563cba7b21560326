"""The catalogue of the kinds the server serves: every built-in ResourceType with its
strategy (`builtin_types`), and the ResourceTypes of a CRD's custom resources
(`custom_resource_types`) — what upstream's storage providers install per API group
(pkg/controlplane/apis/<group>/storage_<group>.go).
"""

from __future__ import annotations

from labkit.apiserver.admission.configkinds import admissionregistration_types
from labkit.apiserver.admission.limitranger import limit_range_type
from labkit.apiserver.admission.resourcequota import resource_quota_type
from labkit.apiserver.certificates import CertificateSigningRequestStrategy
from labkit.apiserver.policykinds import policy_types
from labkit.apiserver.storagekinds import storage_types
from labkit.apiserver.resources import NO_COLLECTION_DELETE, ResourceType
from labkit.apiserver.registry.apiextensions import CustomResourceDefinitionStrategy, CustomResourceStrategy
from labkit.apiserver.registry.apiregistration import APIServiceStrategy
from labkit.apiserver.registry.apps import (DaemonSetStrategy, DeploymentStrategy, ReplicaSetStrategy,
                                            StatefulSetStrategy)
from labkit.apiserver.registry.authentication import SelfSubjectReviewStrategy, TokenReviewStrategy
from labkit.apiserver.registry.authorization import (LocalSubjectAccessReviewStrategy, SelfSubjectAccessReviewStrategy,
                                                     SelfSubjectRulesReviewStrategy, SubjectAccessReviewStrategy)
from labkit.apiserver.registry.autoscaling import HorizontalPodAutoscalerStrategy, hpa_v1_to_v2, hpa_v2_to_v1
from labkit.apiserver.registry.batch import CronJobStrategy, JobStrategy
from labkit.apiserver.registry.coordination import LeaseStrategy
from labkit.apiserver.registry.core import (ConfigMapStrategy, EndpointsStrategy, EventStrategy, NodeStrategy,
                                            PersistentVolumeClaimStrategy, PersistentVolumeStrategy,
                                            ReplicationControllerStrategy, SecretStrategy, ServiceAccountStrategy,
                                            ServiceStrategy)
from labkit.apiserver.registry.discovery import EndpointSliceStrategy
from labkit.apiserver.registry.events import event_core_to_events, event_events_to_core, EventsV1Strategy
from labkit.apiserver.registry.namespace import NamespaceStrategy
from labkit.apiserver.registry.pod import LegacyBindingStrategy, PodStrategy
from labkit.apiserver.registry.rbac import (ClusterRoleBindingStrategy, ClusterRoleStrategy, RoleBindingStrategy,
                                            RoleStrategy)


# -- the catalogue ---------------------------------------------------------------------------

def builtin_types() -> list[ResourceType]:
    rt = ResourceType
    hpa = HorizontalPodAutoscalerStrategy()
    return [
        rt("", "v1", "namespaces", "Namespace", False, NamespaceStrategy(), "namespace", ["ns"],
           verbs=NO_COLLECTION_DELETE),
        rt("", "v1", "pods", "Pod", True, PodStrategy(), "pod", ["po"], ["all"]),
        rt("", "v1", "bindings", "Binding", True, LegacyBindingStrategy(), "binding", verbs=["create"]),
        rt("", "v1", "replicationcontrollers", "ReplicationController", True, ReplicationControllerStrategy(),
           "replicationcontroller", ["rc"], ["all"]),
        rt("", "v1", "configmaps", "ConfigMap", True, ConfigMapStrategy(), "configmap", ["cm"]),
        rt("", "v1", "secrets", "Secret", True, SecretStrategy(), "secret"),
        rt("", "v1", "services", "Service", True, ServiceStrategy(), "service", ["svc"], ["all"],
           verbs=NO_COLLECTION_DELETE + ["deletecollection"]),
        rt("", "v1", "serviceaccounts", "ServiceAccount", True, ServiceAccountStrategy(), "serviceaccount", ["sa"]),
        rt("", "v1", "events", "Event", True, EventStrategy(), "event", ["ev"]),
        limit_range_type(),
        resource_quota_type(),
        rt("apps", "v1", "deployments", "Deployment", True, DeploymentStrategy(), "deployment", ["deploy"], ["all"]),
        rt("apps", "v1", "replicasets", "ReplicaSet", True, ReplicaSetStrategy(), "replicaset", ["rs"], ["all"]),
        rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
           CustomResourceDefinitionStrategy(), "customresourcedefinition", ["crd", "crds"], ["api-extensions"]),
        rt("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, APIServiceStrategy(), "apiservice",
           categories=["api-extensions"]),
        rt("", "v1", "nodes", "Node", False, NodeStrategy(), "node", ["no"]),
        rt("", "v1", "persistentvolumes", "PersistentVolume", False, PersistentVolumeStrategy(), "persistentvolume",
           ["pv"]),
        rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, PersistentVolumeClaimStrategy(),
           "persistentvolumeclaim", ["pvc"]),
        rt("", "v1", "endpoints", "Endpoints", True, EndpointsStrategy(), "endpoints", ["ep"]),
        rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, EndpointSliceStrategy(),
           "endpointslice"),
        rt("apps", "v1", "daemonsets", "DaemonSet", True, DaemonSetStrategy(), "daemonset", ["ds"], ["all"]),
        rt("apps", "v1", "statefulsets", "StatefulSet", True, StatefulSetStrategy(), "statefulset", ["sts"], ["all"]),
        rt("batch", "v1", "jobs", "Job", True, JobStrategy(), "job", [], ["all"]),
        rt("batch", "v1", "cronjobs", "CronJob", True, CronJobStrategy(), "cronjob", ["cj"], ["all"]),
        rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True, RoleStrategy(), "role"),
        rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, RoleBindingStrategy(),
           "rolebinding"),
        rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, ClusterRoleStrategy(),
           "clusterrole"),
        rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
           ClusterRoleBindingStrategy(), "clusterrolebinding"),
        rt("coordination.k8s.io", "v1", "leases", "Lease", True, LeaseStrategy(), "lease"),
        rt("events.k8s.io", "v1", "events", "Event", True, EventsV1Strategy(), "event", ["ev"],
           stored_as=("", "v1", "Event"), to_storage=event_events_to_core, from_storage=event_core_to_events),
        rt("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, hpa,
           "horizontalpodautoscaler", ["hpa"], ["all"]),
        rt("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, hpa,
           "horizontalpodautoscaler", ["hpa"], ["all"], stored_as=("autoscaling", "v2", "HorizontalPodAutoscaler"),
           to_storage=hpa_v1_to_v2, from_storage=hpa_v2_to_v1),
        rt("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
           SelfSubjectAccessReviewStrategy(), verbs=["create"]),
        rt("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
           SelfSubjectRulesReviewStrategy(), verbs=["create"]),
        rt("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
           SubjectAccessReviewStrategy(), verbs=["create"]),
        rt("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", True,
           LocalSubjectAccessReviewStrategy(), verbs=["create"]),
        rt("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
           SelfSubjectReviewStrategy(), verbs=["create"]),
        rt("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, TokenReviewStrategy(),
           verbs=["create"]),
        *admissionregistration_types(),
        *policy_types(),
        *storage_types(),
        rt("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False,
           CertificateSigningRequestStrategy(), "certificatesigningrequest", ["csr"]),
    ]


def custom_resource_types(crd: dict) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves: one per served version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    types = []
    for version in spec.get("versions") or []:
        if not isinstance(version, dict) or not version.get("served", True) or not version.get("name"):
            continue
        subresources = version.get("subresources") or {}
        strategy = CustomResourceStrategy("status" in subresources, version.get("additionalPrinterColumns") or [],
                                          subresources.get("scale"), (version.get("schema") or {}).get("openAPIV3Schema"))
        types.append(ResourceType(
            spec.get("group", ""), version["name"], names.get("plural", ""), names.get("kind", ""),
            spec.get("scope") == "Namespaced", strategy, names.get("singular") or str(names.get("kind", "")).lower(),
            list(names.get("shortNames") or []), list(names.get("categories") or [])))
    return types
