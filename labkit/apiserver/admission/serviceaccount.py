"""The ServiceAccount admission plugin (plugin/pkg/admission/serviceaccount/admission.go, v1.34).

Pods only, not their subresources, and only on CREATE (Plugin.Admit, Plugin.Validate):
- mutating: a Pod without spec.serviceAccountName gets `default`; the account must exist (403
  `error looking up service account <ns>/<name>: serviceaccount "<name>" not found`; for
  `default`, which the service-account controller creates for each namespace, getServiceAccount
  looks again up to ten times 100-200 ms apart first). Unless the Pod or else the account sets
  automountServiceAccountToken to false, every init and regular container without a mount at
  /var/run/secrets/kubernetes.io/serviceaccount gets a read-only one of a volume
  `kube-api-access-<5 random characters>` (an existing volume with that prefix is reused), and
  the volume is added when some container mounts it: a projected volume (TokenVolumeSource) of a
  service-account token valid 3607 s (`token`), the `ca.crt` of the ConfigMap kube-root-ca.crt
  and the namespace from the downward API, defaultMode 0644. A Pod without imagePullSecrets gets
  the account's.
- validating: the account still exists; a mirror pod (annotation kubernetes.io/config.mirror)
  may reference neither service accounts nor secrets; with the account's annotation
  kubernetes.io/enforce-mountable-secrets=true, secret volumes and env references must be among
  the account's secrets and pull secrets among its imagePullSecrets (limitSecretReferences).
"""

from __future__ import annotations

import random
import secrets
import time

from labkit.apiserver.admission import Attributes, forbidden_by

DEFAULT_SERVICE_ACCOUNT_NAME = "default"
DEFAULT_API_TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
SERVICE_ACCOUNT_VOLUME_NAME = "kube-api-access"
ENFORCE_MOUNTABLE_SECRETS = "kubernetes.io/enforce-mountable-secrets"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
# pkg/serviceaccount: WarnOnlyBoundTokenExpirationSeconds (one hour and seven seconds)
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 3607
# k8s.io/apiserver/pkg/storage/names: SimpleNameGenerator's alphabet (no vowels, no 0 1 3)
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_LOOKUP_ATTEMPTS = 10


def token_volume_source() -> dict:
    """TokenVolumeSource, as the v1 API shows it."""
    return {"defaultMode": 0o644, "sources": [
        {"serviceAccountToken": {"expirationSeconds": WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}


def _applies(attrs: Attributes) -> bool:
    rt = attrs.rt
    return ((rt.group, rt.resource) == ("", "pods") and not attrs.subresource and attrs.operation == "CREATE"
            and isinstance(attrs.obj, dict))


class ServiceAccount:
    def __init__(self, store, sleep=time.sleep):
        self.store = store
        self.sleep = sleep

    def _account(self, attrs: Attributes, name: str) -> dict:
        """getServiceAccount: the account, or the 403 of a missing one."""
        attempts = DEFAULT_LOOKUP_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT_NAME else 1
        interval = (100 + random.randrange(100)) / 1000
        for i in range(attempts):
            if i:
                self.sleep(interval)
            account = self.store.get("/serviceaccounts", attrs.namespace, name)
            if account is not None:
                return account
        raise forbidden_by(attrs, f"error looking up service account {attrs.namespace}/{name}: "
                                  f'serviceaccount "{name}" not found')

    def admit(self, attrs: Attributes) -> None:
        if not _applies(attrs):
            return
        pod = attrs.obj
        if MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
            return self.validate(attrs)
        spec = pod.setdefault("spec", {})
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = DEFAULT_SERVICE_ACCOUNT_NAME
            spec["serviceAccount"] = DEFAULT_SERVICE_ACCOUNT_NAME     # the v1 form's DeprecatedServiceAccount
        account = self._account(attrs, spec["serviceAccountName"])
        if _should_automount(account, spec):
            _mount_service_account_token(spec)
        if not spec.get("imagePullSecrets") and account.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [dict(s) for s in account["imagePullSecrets"]]
        self.validate(attrs)

    def validate(self, attrs: Attributes) -> None:
        if not _applies(attrs):
            return
        pod = attrs.obj
        spec = pod.get("spec") or {}
        if MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {}):
            if spec.get("serviceAccountName"):
                raise forbidden_by(attrs, "a mirror pod may not reference service accounts")
            if _secret_names(spec):
                raise forbidden_by(attrs, "a mirror pod may not reference secrets")
            return
        account = self._account(attrs, spec.get("serviceAccountName") or "")
        if ((account.get("metadata") or {}).get("annotations") or {}).get(ENFORCE_MOUNTABLE_SECRETS, "").lower() in (
                "1", "t", "true"):
            problem = _limit_secret_references(account, spec)
            if problem:
                raise forbidden_by(attrs, problem)


def _should_automount(account: dict, spec: dict) -> bool:
    # shouldAutomount: the pod's preference, then the account's, else true
    if spec.get("automountServiceAccountToken") is not None:
        return bool(spec["automountServiceAccountToken"])
    if account.get("automountServiceAccountToken") is not None:
        return bool(account["automountServiceAccountToken"])
    return True


def _mount_service_account_token(spec: dict) -> None:
    """mountServiceAccountToken."""
    volume_name = ""
    for volume in spec.get("volumes") or []:
        if str(volume.get("name", "")).startswith(SERVICE_ACCOUNT_VOLUME_NAME + "-"):
            volume_name = volume["name"]
            break
    has_volume = bool(volume_name)
    if not volume_name:
        volume_name = f"{SERVICE_ACCOUNT_VOLUME_NAME}-" + "".join(secrets.choice(NAME_ALPHABET) for _ in range(5))
    needs_volume = False
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            mounts = container.get("volumeMounts") or []
            if not any(m.get("mountPath") == DEFAULT_API_TOKEN_MOUNT_PATH for m in mounts):
                container["volumeMounts"] = list(mounts) + [
                    {"name": volume_name, "readOnly": True, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]
                needs_volume = True
    if needs_volume and not has_volume:
        spec["volumes"] = list(spec.get("volumes") or []) + [{"name": volume_name, "projected": token_volume_source()}]


def _secret_names(spec: dict) -> list[str]:
    """podutil.VisitPodSecretNames, for what labs write: pull secrets, secret volumes (also
    projected ones) and env/envFrom references."""
    names = [s.get("name", "") for s in spec.get("imagePullSecrets") or []]
    for volume in spec.get("volumes") or []:
        if volume.get("secret"):
            names.append(volume["secret"].get("secretName", ""))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if source.get("secret"):
                names.append(source["secret"].get("name", ""))
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            for env in container.get("env") or []:
                ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    names.append(ref.get("name", ""))
            for source in container.get("envFrom") or []:
                if source.get("secretRef"):
                    names.append(source["secretRef"].get("name", ""))
    return [n for n in names if n]


def _limit_secret_references(account: dict, spec: dict) -> str | None:
    """limitSecretReferences: the first reference the account does not list, in upstream's words."""
    name = account["metadata"]["name"]
    mountable = {s.get("name") for s in account.get("secrets") or []}
    for volume in spec.get("volumes") or []:
        secret = (volume.get("secret") or {}).get("secretName")
        if volume.get("secret") is not None and secret not in mountable:
            return (f'volume with secret.secretName="{secret}" is not allowed because service account {name} does not '
                    "reference that secret")
    for key, what in (("initContainers", "init container"), ("containers", "container")):
        for container in spec.get(key) or []:
            for env in container.get("env") or []:
                ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                if ref and ref.get("name") not in mountable:
                    return (f"{what} {container.get('name')} with envVar {env.get('name')} referencing "
                            f'secret.secretName="{ref.get("name")}" is not allowed because service account {name} '
                            "does not reference that secret")
    pull = {s.get("name") for s in account.get("imagePullSecrets") or []}
    for i, ref in enumerate(spec.get("imagePullSecrets") or []):
        if ref.get("name") not in pull:
            return (f'imagePullSecrets[{i}].name="{ref.get("name")}" is not allowed because service account {name} '
                    "does not reference that imagePullSecret")
    return None
