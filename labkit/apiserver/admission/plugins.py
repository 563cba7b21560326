"""The in-tree plugins labkit runs and the chain of the server (`default_chain`).

NamespaceLifecycle (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go,
Lifecycle.Admit, a mutating-phase plugin): the immortal namespaces cannot be deleted; namespaces
themselves and every DELETE of other objects pass; any other write of namespaced content needs an
existing namespace (404 `namespaces "x" not found`, also for an update of an object left behind
in a namespace that is gone), and a CREATE needs one that is not being terminated (403).

The others, each in a module of its own: LimitRanger (limitranger.py), ServiceAccount
(serviceaccount.py: every Pod needs its namespace's ServiceAccount, which the serviceaccount
controller of labkit.controllers makes, as kube-controller-manager's does), TaintNodesByCondition
(nodetaint.py: a new Node is tainted not-ready until the node lifecycle controller sees it Ready), PodSecurity
(podsecurity.py), Priority (priority.py), DefaultTolerationSeconds (tolerations.py),
CertificateApproval, CertificateSigning and CertificateSubjectRestriction (certificates.py),
ResourceQuota (resourcequota.py), StorageObjectInUseProtection (labkit.apiserver.storageprotection).
"""

from __future__ import annotations

from labkit.apiserver.admission import Attributes, Chain, Plugin
from labkit.apiserver.errors import forbidden, not_found
from labkit.apiserver.storageprotection import storage_object_in_use_protection

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


def namespace_lifecycle(store):
    def admit(attrs: Attributes) -> None:
        rt = attrs.rt
        if rt.resource == "namespaces" and rt.group == "":
            if attrs.operation == "DELETE" and attrs.name in IMMORTAL_NAMESPACES:
                raise forbidden("namespaces", "", attrs.name, "this namespace may not be deleted")
            return
        if not rt.namespaced or not attrs.namespace or attrs.operation == "DELETE":
            return
        namespace = store.get("/namespaces", "", attrs.namespace)
        if namespace is None:
            raise not_found("namespaces", "", attrs.namespace)
        if attrs.operation == "CREATE" and (namespace.get("status") or {}).get("phase") == "Terminating":
            meta = (attrs.obj or {}).get("metadata") or {}
            name = attrs.name or meta.get("generateName") or "Unknown"
            raise forbidden(rt.resource, rt.group, name,
                            f"unable to create new content in namespace {attrs.namespace} because it is "
                            "being terminated",
                            causes=[{"reason": "NamespaceTerminating",
                                     "message": f"namespace {attrs.namespace} is being terminated",
                                     "field": "metadata.namespace"}])
    return admit


def default_chain(registry) -> Chain:
    """The default-enabled plugins of v1.34 that labkit reconstructs, in AllOrderedPlugins' order."""
    from labkit.apiserver.admission.certificates import (CertificateApproval, CertificateSigning,
                                                         certificate_subject_restriction)
    from labkit.apiserver.admission.limitranger import LimitRanger
    from labkit.apiserver.admission.nodetaint import taint_nodes_by_condition
    from labkit.apiserver.admission.podsecurity import PodSecurity
    from labkit.apiserver.admission.policy import ValidatingPolicies
    from labkit.apiserver.admission.priority import Priority
    from labkit.apiserver.admission.resourcequota import ResourceQuota
    from labkit.apiserver.admission.serviceaccount import ServiceAccount
    from labkit.apiserver.admission.tolerations import default_toleration_seconds
    from labkit.apiserver.admission.webhook import MutatingWebhooks, ValidatingWebhooks
    from labkit.apiserver.authorizer import Authorizer
    authorizer = Authorizer(registry.store)
    priority = Priority(registry.store)
    limit_ranger = LimitRanger(registry.store)
    service_account = ServiceAccount(registry.store)
    return Chain([
        Plugin("NamespaceLifecycle", admit=namespace_lifecycle(registry.store)),
        Plugin("LimitRanger", admit=limit_ranger.admit, validate=limit_ranger.validate, handles=("CREATE", "UPDATE")),
        # admission.NewHandler(admission.Create)
        Plugin("ServiceAccount", admit=service_account.admit, validate=service_account.validate, handles=("CREATE",)),
        # admission.NewHandler(admission.Create)
        Plugin("TaintNodesByCondition", admit=taint_nodes_by_condition, handles=("CREATE",)),
        # admission.NewHandler(admission.Create, admission.Update)
        Plugin("PodSecurity", validate=PodSecurity(registry.store).validate, handles=("CREATE", "UPDATE")),
        Plugin("Priority", admit=priority.admit, validate=priority.validate, handles=("CREATE", "UPDATE", "DELETE")),
        Plugin("DefaultTolerationSeconds", admit=default_toleration_seconds, handles=("CREATE", "UPDATE")),
        Plugin("StorageObjectInUseProtection", admit=storage_object_in_use_protection, handles=("CREATE",)),
        Plugin("CertificateApproval", validate=CertificateApproval(authorizer).validate, handles=("UPDATE",)),
        Plugin("CertificateSigning", validate=CertificateSigning(authorizer).validate, handles=("UPDATE",)),
        Plugin("CertificateSubjectRestriction", validate=certificate_subject_restriction, handles=("CREATE",)),
        Plugin("MutatingAdmissionWebhook", admit=MutatingWebhooks(registry).admit),
        Plugin("ValidatingAdmissionPolicy", validate=ValidatingPolicies(registry).validate),
        Plugin("ValidatingAdmissionWebhook", validate=ValidatingWebhooks(registry).validate),
        # admission.NewHandler(admission.Create, admission.Update)
        Plugin("ResourceQuota", validate=ResourceQuota(registry.store).validate, handles=("CREATE", "UPDATE")),
    ])
