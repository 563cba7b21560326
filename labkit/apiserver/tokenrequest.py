"""TokenRequest: POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token (`kubectl create
token`), as pkg/registry/core/serviceaccount/storage/token.go `TokenREST.Create` answers it:
audiences default to the API server's, expirationSeconds defaults to 3600 and may not be under
10 minutes (pkg/apis/authentication/validation `ValidateTokenRequest`), a token may be bound to a
Pod (which must run as that ServiceAccount; its Node goes into the claims too), a Secret or a
Node, and a pod-bound token asking for exactly 3607 s of the API audiences lives a year, warning
after 3607 s (--service-account-extend-token-expiration, on by default).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from labkit.apiserver import authn
from labkit.apiserver.errors import ApiError, bad_request, field_invalid, invalid, not_found

DEFAULT_EXPIRATION = 3600                       # SetDefaults_TokenRequestSpec
WARN_ONLY_EXPIRATION = 3600 + 7                 # claims.go WarnOnlyBoundTokenExpirationSeconds
EXTENDED_EXPIRATION = 24 * 365 * 3600           # claims.go ExpirationExtensionSeconds
BOUND_KINDS = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}


def _rfc3339(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def create(tokens: "authn.ServiceAccountTokens", lookup, namespace: str, name: str, body, annotations: dict) -> dict:
    """The answered TokenRequest; `lookup(resource, namespace, name)` reads stored objects.
    (TokenREST.Create does not look at the CreateOptions: a dry run gets a token too.)"""
    request = body if isinstance(body, dict) else {}
    meta = request.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise invalid("TokenRequest", "authentication.k8s.io", name,
                      [field_invalid("metadata.name", meta["name"], "must match the service account name if specified")])
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise invalid("TokenRequest", "authentication.k8s.io", name,
                      [field_invalid("metadata.namespace", meta["namespace"],
                                     "must match the service account namespace if specified")])
    sa = lookup("serviceaccounts", namespace, name)
    if sa is None:
        raise not_found("serviceaccounts", "", name)
    spec = dict(request.get("spec") or {})
    audiences = list(spec.get("audiences") or []) or list(tokens.audiences)
    expiration = spec.get("expirationSeconds")
    expiration = DEFAULT_EXPIRATION if expiration is None else expiration
    now = datetime.now(timezone.utc).replace(microsecond=0)
    if not isinstance(expiration, int) or expiration < 600:
        raise invalid("TokenRequest", "authentication.k8s.io", "",
                      [field_invalid("spec.expirationSeconds", expiration,
                                     "may not specify a duration less than 10 minutes")])
    if expiration > 2 ** 32:
        raise invalid("TokenRequest", "authentication.k8s.io", "",
                      [field_invalid("spec.expirationSeconds", expiration,
                                     "may not specify a duration larger than 2^32 seconds")])
    bound: list[authn.BoundObject] = []
    pod = None
    ref = spec.get("boundObjectRef")
    if ref:
        kind, api_version = ref.get("kind", ""), ref.get("apiVersion", "")
        group = api_version.split("/")[0] if "/" in api_version else ""
        if group or kind not in BOUND_KINDS:
            shown = f"{api_version}, Kind={kind}" if "/" in api_version else f"/{api_version}, Kind={kind}"
            raise bad_request(f"cannot bind token to object of type {shown}")
        obj = lookup(BOUND_KINDS[kind], None if kind == "Node" else namespace, ref.get("name", ""))
        if obj is None:
            raise not_found(BOUND_KINDS[kind], "", ref.get("name", ""))
        uid = obj["metadata"].get("uid", "")
        if kind == "Pod":
            if (obj.get("spec") or {}).get("serviceAccountName", "") != name:
                raise bad_request(f'cannot bind token for serviceaccount "{name}" to pod running with different '
                                  "serviceaccount name.")
            pod = obj
        if ref.get("uid") and ref["uid"] != uid:
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {kind} "{ref.get("name", "")}": the UID in the bound '
                           f"object reference ({ref['uid']}) does not match the UID in record. The object might have "
                           "been deleted and then recreated", {"name": ref.get("name", ""), "kind": kind})
        bound.append(authn.BoundObject(kind, obj["metadata"]["name"], uid))
        node_name = (obj.get("spec") or {}).get("nodeName") if kind == "Pod" else None
        if node_name:      # ServiceAccountTokenPodNodeInfo: the pod's node, by name even when missing
            node = lookup("nodes", None, node_name)
            bound.append(authn.BoundObject("Node", node_name, node["metadata"].get("uid", "") if node else ""))
    lifetime, warnafter = expiration, 0
    if pod is not None and expiration == WARN_ONLY_EXPIRATION and set(audiences) <= set(tokens.audiences):
        lifetime, warnafter = EXTENDED_EXPIRATION, expiration
    token, jti = tokens.issue(sa, audiences, lifetime, bound, warnafter, now=now.timestamp())
    annotations[authn.ISSUED_CREDENTIAL_ID] = f"JTI={jti}"
    out = {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
           "metadata": {"name": name, "namespace": namespace, "creationTimestamp": _rfc3339(now)},
           "spec": {"audiences": audiences, "expirationSeconds": expiration,
                    "boundObjectRef": ref if ref else None},
           "status": {"token": token,
                      "expirationTimestamp": _rfc3339(now + timedelta(seconds=expiration))}}
    if not ref:
        del out["spec"]["boundObjectRef"]
    return out
