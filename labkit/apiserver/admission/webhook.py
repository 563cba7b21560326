"""MutatingAdmissionWebhook and ValidatingAdmissionWebhook: real HTTPS calls with
AdmissionReview to the webhooks of the MutatingWebhookConfigurations and
ValidatingWebhookConfigurations (admissionregistration.k8s.io/v1).

Follows k8s.io/apiserver v1.34, pkg/admission/plugin/webhook:
- generic/webhook.go (Webhook.ShouldCallHook, Dispatch): the namespaceSelector, then the
  objectSelector, then the rules (with matchPolicy Equivalent: the same resource through another
  group/version the server serves), then the matchConditions (CEL); the admission configuration
  kinds themselves are never sent to webhooks (rules.IsExemptAdmissionConfigurationResource);
- predicates/rules/rules.go (Matcher), predicates/namespace/matcher.go (MatchNamespaceSelector:
  cluster-scoped objects other than namespaces always match; a namespace being created or updated
  is matched on its own labels), predicates/object/matcher.go (the new or the old object);
- mutating/dispatcher.go (mutatingDispatcher.Dispatch, callAttrMutatingHook): webhooks one after
  the other in configuration order, each JSONPatch applied to the object the next one sees, the
  audit annotations mutation.webhook.admission.k8s.io/round_{r}_index_{i} and
  patch.webhook.admission.k8s.io/round_{r}_index_{i}, reinvocation (webhookReinvokeContext);
- validating/dispatcher.go (validatingDispatcher.Dispatch, callHook): the matching webhooks
  called in parallel, the first error collected wins;
- request/admissionreview.go (CreateV1AdmissionReview, VerifyAdmissionResponse);
- errors/statuserror.go (ToStatusErr, NewDryRunUnsupportedErr) and pkg/util/webhook/error.go
  (ErrCallingWebhook: `failed calling webhook "<name>": <reason>`);
- failurePolicy Fail turns a call failure into a 500 (apierrors.NewInternalError), Ignore goes
  on with the audit annotation failed-open.<mutation|validating>.webhook.admission.k8s.io/...;
- pkg/util/webhook/client.go (ClientManager.HookClient): a Service is called as
  https://<name>.<namespace>.svc:<port><path> with the certificate checked for that name against
  caBundle; the address is one ready endpoint of the Service (what --enable-aggregator-routing
  does; availability.resolve_endpoint, shared with the APIService proxy).

The configurations are read from storage on every request (an in-memory read, see
`configurations`), sorted by name as upstream's configuration managers sort them.
"""

from __future__ import annotations

import base64
import copy
import functools
import http.client
import json
import math
import socket
import ssl
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from labkit.apiserver import gobase64, jsonpatch
from labkit.apiserver.admission import Attributes
from labkit.apiserver.availability import Unresolvable, resolve_endpoint
from labkit.apiserver.errors import ApiError, bad_request, forbidden, internal, not_found, request_timeout_error
from labkit.apiserver.selectors import LabelSelector
from labkit.jsondata import json_copy

MUTATING_KEY = "admissionregistration.k8s.io/mutatingwebhookconfigurations"
VALIDATING_KEY = "admissionregistration.k8s.io/validatingwebhookconfigurations"
EXEMPT_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
MUTATION_PREFIX = "mutation.webhook.admission.k8s.io/"
PATCH_PREFIX = "patch.webhook.admission.k8s.io/"
FAILED_OPEN_MUTATING = "failed-open." + MUTATION_PREFIX
FAILED_OPEN_VALIDATING = "failed-open.validating.webhook.admission.k8s.io/"


class CallError(Exception):
    """webhookutil.ErrCallingWebhook: the webhook could not be asked or its answer was unusable."""

    def __init__(self, webhook: str, reason: str):
        super().__init__(f"failed calling webhook {json.dumps(webhook)}: {reason}")
        self.webhook = webhook


def is_exempt(attrs: Attributes) -> bool:
    group, _, kind = attrs.gvk
    return group == "admissionregistration.k8s.io" and kind in EXEMPT_KINDS


def configurations(store, key: str) -> list[tuple[str, int, dict]]:
    """(configuration name, index, webhook) for every webhook, configurations sorted by name.
    Read on every request from the store's in-memory index (its shared objects, not copies: they
    are only read), so a configuration applies from the moment its write is acknowledged."""
    items = sorted((obj for _, obj, _ in store.scan(key)[0]), key=lambda c: c["metadata"]["name"])
    return [(c["metadata"]["name"], i, hook) for c in items for i, hook in enumerate(c.get("webhooks") or [])]


# -- matching --------------------------------------------------------------------------------------

def rule_matches(rule: dict, operation: str, gvr: tuple[str, str, str], subresource: str, namespace: str) -> bool:
    """rules.Matcher.Matches: scope, operation, group, version, resource[/subresource]."""
    group, version, resource = gvr
    scope = rule.get("scope") or "*"
    is_namespace = gvr == ("", "v1", "namespaces")
    if scope == "Namespaced" and (is_namespace or not namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not namespace):
        return False
    if scope not in ("*", "Namespaced", "Cluster"):
        return False
    ops = rule.get("operations") or []
    if "*" not in ops and operation not in ops:
        return False
    if not _exact_or_wildcard(rule.get("apiGroups") or [], group):
        return False
    if not _exact_or_wildcard(rule.get("apiVersions") or [], version):
        return False
    for item in rule.get("resources") or []:
        res, _, sub = item.partition("/")
        if (res == "*" or res == resource) and (sub == "*" or sub == subresource):
            return True
    return False


def _exact_or_wildcard(items: list[str], requested: str) -> bool:
    return "*" in items or requested in items


def namespace_labels(store, attrs: Attributes) -> dict:
    """namespace.Matcher.GetNamespaceLabels: a namespace being created or updated is matched on
    the labels it is given; everything else on its namespace's stored labels (404 if none)."""
    if attrs.rt.resource == "namespaces" and attrs.rt.group == "" and not attrs.subresource \
            and attrs.operation in ("CREATE", "UPDATE"):
        return (attrs.obj or {}).get("metadata", {}).get("labels") or {}
    namespace = store.get("/namespaces", "", attrs.namespace)
    if namespace is None:
        raise not_found("namespaces", "", attrs.namespace)
    return namespace["metadata"].get("labels") or {}


def namespace_selector_matches(store, selector: dict | None, attrs: Attributes) -> bool:
    """namespace.Matcher.MatchNamespaceSelector."""
    if not attrs.namespace and attrs.rt.resource != "namespaces":
        return True     # cluster-scoped objects other than namespaces are never exempted
    parsed = _selector(selector)
    if parsed.empty:
        return True
    return parsed.matches(namespace_labels(store, attrs))


def object_selector_matches(selector: dict | None, attrs: Attributes) -> bool:
    """object.Matcher.MatchObjectSelector: the new or the old object's labels."""
    parsed = _selector(selector)
    if parsed.empty:
        return True
    return any(o is not None and parsed.matches((o.get("metadata") or {}).get("labels"))
               for o in (attrs.obj, attrs.old))


def _selector(selector: dict | None) -> LabelSelector:
    try:
        return LabelSelector.from_label_selector(selector or {}) or LabelSelector([])
    except ValueError as exc:
        raise internal(str(exc))


class Invocation:
    """generic.WebhookInvocation: the webhook and the resource/kind it is called with."""

    def __init__(self, configuration: str, index: int, hook: dict, rt, attrs: Attributes):
        self.configuration = configuration
        self.index = index
        self.hook = hook
        self.rt = rt                # the ResourceType the webhook gets (another version under Equivalent)
        self.attrs = attrs          # attributes in that version

    @property
    def uid(self) -> str:
        # webhook.WebhookAccessor.GetUID: <configuration>/<webhook>/<index>
        return f"{self.configuration}/{self.hook.get('name')}/{self.index}"


def should_call(registry, configuration: str, index: int, hook: dict, attrs: Attributes):
    """Webhook.ShouldCallHook: an Invocation, or None when the webhook does not apply."""
    store = registry.store
    try:
        ns_match = namespace_selector_matches(store, hook.get("namespaceSelector"), attrs)
        ns_error = None
    except ApiError as exc:
        ns_match, ns_error = False, exc
    if not ns_match and ns_error is None:
        return None
    if not object_selector_matches(hook.get("objectSelector"), attrs):
        return None
    invocation = None
    for rule in hook.get("rules") or []:
        if rule_matches(rule, attrs.operation, attrs.gvr, attrs.subresource, attrs.namespace):
            invocation = Invocation(configuration, index, hook, attrs.rt, attrs)
            break
    if invocation is None and (hook.get("matchPolicy") or "Equivalent") == "Equivalent":
        for rule in hook.get("rules") or []:
            for other in _equivalents(registry, attrs.rt):
                gvr = (other.group, other.version, other.resource)
                if rule_matches(rule, attrs.operation, gvr, attrs.subresource, attrs.namespace):
                    invocation = Invocation(configuration, index, hook, other, _converted(registry, attrs, other))
                    break
            if invocation is not None:
                break
    if invocation is None:
        return None
    if ns_error is not None:
        raise ns_error
    conditions = hook.get("matchConditions") or []
    if conditions:
        from labkit.apiserver.admission import cel
        try:
            matched = cel.match_conditions(conditions, invocation.attrs, invocation.rt,
                                           failure_policy=hook.get("failurePolicy") or "Fail")
        except cel.EvaluationError as exc:
            # "Failed evaluating match conditions, failing closed"
            raise forbidden(attrs.rt.resource, attrs.rt.group, attrs.name, str(exc))
        if not matched:
            return None
    return invocation


_EQUIVALENTS: dict = {}


def _equivalents(registry, rt) -> list:
    """EquivalentResourcesFor: the same stored resource served in another group/version (kept
    until the catalogue changes)."""
    catalog = registry.catalog
    key = (id(catalog), catalog.generation, rt.group, rt.version, rt.resource)
    found = _EQUIVALENTS.get(key)
    if found is None:
        if len(_EQUIVALENTS) > 4096:
            _EQUIVALENTS.clear()
        found = _EQUIVALENTS[key] = [o for o in catalog.all() if o is not rt and o.storage_key == rt.storage_key
                                     and o.resource == rt.resource]
    return found


def _converted(registry, attrs: Attributes, other) -> Attributes:
    """The attributes in another version of the same resource (admission.NewVersionedAttributes)."""
    def convert(obj):
        if obj is None:
            return None
        stored = attrs.rt.to_storage(json_copy(obj)) if attrs.rt.to_storage else json_copy(obj)
        return registry.present(other, stored)
    clone = copy.copy(attrs)
    clone.obj, clone.old = convert(attrs.obj), convert(attrs.old)
    return clone


# -- the call --------------------------------------------------------------------------------------

class _Connection(http.client.HTTPSConnection):
    """HTTPS to `address` while the certificate is checked for the host name of the URL."""

    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext):
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _endpoint(config: dict) -> tuple[str, int, str, dict | None]:
    """(host, port, path) of the URL a webhook's clientConfig names, and its Service if any."""
    if config.get("url"):
        parts = urlsplit(config["url"])
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return parts.hostname or "", parts.port or 443, path, None
    service = config.get("service")
    if not service:
        raise LookupError("could not get REST client: webhook clientConfig has neither url nor service")
    return f"{service.get('name')}.{service.get('namespace')}.svc", service.get("port") or 443, \
        service.get("path") or "/", service


def _dial_address(registry, service: dict) -> tuple[str, int]:
    """A ready endpoint of the Service (availability.resolve_endpoint, the aggregator's resolver)."""
    base = resolve_endpoint(registry.store, service.get("namespace", ""), service.get("name", ""),
                            service.get("port") or 443)
    address, _, number = base[len("https://"):].rpartition(":")
    return address.strip("[]"), int(number)


def _context(config: dict) -> ssl.SSLContext:
    return _context_for(config.get("caBundle") or None)


@functools.lru_cache(maxsize=200)
def _context_for(bundle: str | None) -> ssl.SSLContext:
    """The TLS client context for a caBundle (None: the system's roots), made once: kube-apiserver
    keeps the REST client of each webhook client config in an LRU cache of 200
    (staging/src/k8s.io/apiserver/pkg/util/webhook/client.go, ClientManager.HookClient). Loading the
    system's roots costs ~20 ms of CPU, which every call paid. A bundle that does not load raises
    and is not cached."""
    if bundle:
        return ssl.create_default_context(cadata=base64.b64decode(bundle).decode("ascii", "replace"))
    return ssl.create_default_context()


def _go_error(url: str, address: str, port: int, exc: BaseException) -> str:
    """What client-go's REST client says when a POST fails, for the common failures."""
    if isinstance(exc, ConnectionRefusedError):
        detail = f"dial tcp {address}:{port}: connect: connection refused"
    elif isinstance(exc, (socket.timeout, TimeoutError)):
        detail = "context deadline exceeded"
    elif isinstance(exc, ssl.SSLCertVerificationError):
        detail = "tls: failed to verify certificate: " + (
            "x509: certificate signed by unknown authority" if "unable to get local issuer" in str(exc)
            or "self-signed" in str(exc) or "self signed" in str(exc) else str(exc.verify_message))
    elif isinstance(exc, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(exc):
        detail = "http: server gave HTTP response to HTTPS client"
    elif isinstance(exc, ConnectionResetError):
        detail = f"read tcp {address}:{port}: read: connection reset by peer"
    elif isinstance(exc, (http.client.RemoteDisconnected, http.client.BadStatusLine)):
        detail = "EOF" if isinstance(exc, http.client.RemoteDisconnected) else \
            f'net/http: HTTP/1.x transport connection broken: malformed HTTP response {json.dumps(str(exc))}'
    else:
        detail = str(exc) or type(exc).__name__
    return f'Post "{url}": {detail}'


def _status_error(code: int, body: bytes) -> str:
    """The error client-go makes of a non-2xx answer (rest.Result.Error, transformResponse)."""
    try:
        status = json.loads(body)
        if isinstance(status, dict) and status.get("kind") == "Status" and status.get("message"):
            return status["message"]
    except ValueError:
        pass
    if code == 404:
        return "the server could not find the requested resource"
    text = body.decode("utf-8", "replace").strip()
    return f"an error on the server ({json.dumps(text)}) has prevented the request from succeeding"


def admission_review(uid: str, version: str, invocation: Invocation) -> dict:
    """CreateV1AdmissionReview (v1beta1 is the same request under another apiVersion)."""
    attrs = invocation.attrs
    request = {"uid": uid, **attrs.admission_request(invocation.rt), "object": attrs.obj, "oldObject": attrs.old}
    # omitempty, as the Go types encode it
    request = {k: v for k, v in request.items() if v not in ("", None) or k == "dryRun"}
    return {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{version}", "request": request}


def call_deadline(hook: dict, attrs: Attributes) -> float:
    """When a webhook call's time is up (time.monotonic()): timeoutSeconds (default 10) after it
    starts, or the request's deadline when that comes first (callHook wraps the request's
    context with the webhook's timeout)."""
    deadline = time.monotonic() + (hook.get("timeoutSeconds") or 10)
    return deadline if attrs.deadline is None else min(deadline, attrs.deadline)


def call(registry, invocation: Invocation, mutating: bool) -> dict:
    """One webhook call: the verified response (VerifyAdmissionResponse), or CallError."""
    hook = invocation.hook
    name = hook.get("name", "")
    versions = [v for v in hook.get("admissionReviewVersions") or [] if v in ("v1", "v1beta1")]
    if not versions:
        raise CallError(name, "could not create admission objects: webhook does not accept known AdmissionReview "
                              "versions (v1, v1beta1)")
    version = versions[0]
    config = hook.get("clientConfig") or {}
    deadline = call_deadline(hook, invocation.attrs)
    timeout = deadline - time.monotonic()
    try:
        host, port, path, service = _endpoint(config)
        context = _context(config)
    except LookupError as exc:
        raise CallError(name, str(exc))
    except (ssl.SSLError, ValueError) as exc:
        raise CallError(name, f"could not get REST client: unable to load root certificates: {exc}")
    if timeout > 0:
        # callHook: the time left, rounded up to whole seconds, tells the webhook its deadline
        path += ("&" if "?" in path else "?") + f"timeout={math.ceil(timeout)}s"
    url = f"https://{host}:{port}{path}" if ":" not in host else f"https://[{host}]:{port}{path}"
    address, dial_port = host, port
    if service is not None:
        try:
            address, dial_port = _dial_address(registry, service)
        except Unresolvable as exc:
            raise CallError(name, f'failed to call webhook: Post "{url}": {exc}')
    uid = str(uuid.uuid4())
    body = json.dumps(admission_review(uid, version, invocation)).encode()
    conn = _Connection(host, dial_port, address, max(0.001, deadline - time.monotonic()), context)
    try:
        conn.putrequest("POST", path, skip_host=True)
        for header, value in (("Host", f"{host}:{port}"), ("Content-Type", "application/json"),
                              ("Accept", "application/json, */*"), ("Content-Length", str(len(body)))):
            conn.putheader(header, value)
        conn.endheaders(body)
        conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
        response = conn.getresponse()
        data = response.read()
        status = response.status
    except (OSError, http.client.HTTPException) as exc:
        raise CallError(name, "failed to call webhook: " + _go_error(url, address, dial_port, exc))
    finally:
        conn.close()
    if not 200 <= status < 300:
        raise CallError(name, "failed to call webhook: " + _status_error(status, data))
    try:
        review = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CallError(name, f"failed to call webhook: {_json_error(exc)}")
    patch = (review.get("response") or {}).get("patch") if isinstance(review, dict) else None
    if isinstance(patch, str):
        # the response is decoded into admissionv1.AdmissionReview, whose patch is a []byte:
        # Result.Into fails with encoding/base64's error (rest client, then dispatcher.go callHook)
        try:
            gobase64.decode(patch)
        except gobase64.CorruptInputError as exc:
            raise CallError(name, f"failed to call webhook: {exc}")
    try:
        return verify_response(uid, version, mutating, review)
    except ValueError as exc:
        raise CallError(name, f"received invalid webhook response: {exc}")


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError) and exc.pos < len(exc.doc):
        return f"invalid character {json.dumps(exc.doc[exc.pos])[1:-1]!r} looking for beginning of value"
    return "unexpected end of JSON input"


def verify_response(uid: str, version: str, mutating: bool, review) -> dict:
    """VerifyAdmissionResponse: the response's fields, or ValueError with upstream's text."""
    response = review.get("response") if isinstance(review, dict) else None
    if not isinstance(response, dict):
        raise ValueError("webhook response was absent")
    if version == "v1beta1":
        patch = response.get("patch") if mutating else None
        return {"allowed": bool(response.get("allowed")), "patch": patch,
                "patchType": "JSONPatch" if patch else "", "status": response.get("status"),
                "auditAnnotations": response.get("auditAnnotations") or {},
                "warnings": response.get("warnings") or []}
    if response.get("uid") != uid:
        raise ValueError(f"expected response.uid={json.dumps(uid)}, got {json.dumps(response.get('uid') or '')}")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        got_group, _, got_version = (review.get("apiVersion") or "").rpartition("/")
        raise ValueError(f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got "
                         f"{got_group}/{got_version}, Kind={review.get('kind') or ''}".replace(" /, ", " /, "))
    patch, patch_type = response.get("patch"), response.get("patchType")
    if mutating:
        if patch and patch_type is None:
            raise ValueError("webhook returned response.patch but not response.patchType")
        if not patch and patch_type is not None:
            raise ValueError("webhook returned response.patchType but not response.patch")
        if patch_type is not None and not patch_type:
            raise ValueError('webhook returned invalid response.patchType of ""')
    else:
        if patch:
            raise ValueError("validating webhook may not return response.patch")
        if patch_type is not None:
            raise ValueError("validating webhook may not return response.patchType")
    return {"allowed": bool(response.get("allowed")), "patch": patch, "patchType": patch_type or "",
            "status": response.get("status"), "auditAnnotations": response.get("auditAnnotations") or {},
            "warnings": response.get("warnings") or []}


def to_status_error(webhook: str, result: dict | None) -> ApiError:
    """errors.ToStatusErr: the webhook's Status, its code at least 400, its message prefixed."""
    result = dict(result or {})
    code = result.get("code") or 0
    if code < 400:
        code = 400
    denied = f"admission webhook {json.dumps(webhook)} denied the request"
    if result.get("message"):
        message = f"{denied}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied}: {result['reason']}"
    else:
        message = f"{denied} without explanation"
    return ApiError(code, result.get("reason") or "", message, result.get("details"))


def dry_run_unsupported(webhook: str) -> ApiError:
    """errors.NewDryRunUnsupportedErr."""
    return bad_request(f"admission webhook {json.dumps(webhook)} does not support dry run")


def _check_dry_run(hook: dict, attrs: Attributes) -> None:
    if attrs.dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
        raise dry_run_unsupported(hook.get("name", ""))


def _record_response(attrs: Attributes, hook: dict, result: dict) -> None:
    for key, value in (result.get("auditAnnotations") or {}).items():
        attrs.annotate(f"{hook.get('name')}/{key}", value)
    attrs.warnings.extend(w for w in result.get("warnings") or [] if isinstance(w, str))


# -- MutatingAdmissionWebhook ----------------------------------------------------------------------

class MutatingWebhooks:
    name = "MutatingAdmissionWebhook"

    def __init__(self, registry):
        self.registry = registry

    def admit(self, attrs: Attributes) -> None:
        """mutatingDispatcher.Dispatch."""
        if is_exempt(attrs):
            return
        state = attrs.reinvoke.setdefault(self.name, {"previous": set(), "reinvoke": set(), "last": None})
        if attrs.round == 1 and state["last"] != attrs.obj:
            self._require_reinvoking(state)     # in-tree plugins changed the object in round 1
        try:
            for i, (configuration, index, hook) in enumerate(configurations(self.registry.store, MUTATING_KEY)):
                invocation = should_call(self.registry, configuration, index, hook, attrs)
                if invocation is None:
                    continue
                if attrs.round == 1 and invocation.uid not in state["reinvoke"]:
                    continue
                self._call_one(attrs, invocation, i, state)
        finally:
            state["last"] = json_copy(attrs.obj)

    @staticmethod
    def _require_reinvoking(state: dict) -> None:
        if state["previous"]:
            state["reinvoke"] |= state["previous"]
            state["previous"] = set()

    def _call_one(self, attrs: Attributes, invocation: Invocation, i: int, state: dict) -> None:
        hook = invocation.hook
        name = hook.get("name", "")
        suffix = f"round_{attrs.round}_index_{i}"
        ignore = hook.get("failurePolicy") == "Ignore"
        changed, applied, error = False, None, None
        try:
            _check_dry_run(hook, attrs)
            result = call(self.registry, invocation, mutating=True)
            _record_response(attrs, hook, result)
            if not result["allowed"]:
                error = to_status_error(name, result.get("status"))
            elif result.get("patch"):
                changed, applied = self._apply(attrs, invocation, result, suffix)
        except CallError as exc:
            error = exc
        except ApiError as exc:
            error = exc
        finally:
            attrs.annotate(MUTATION_PREFIX + suffix, json.dumps(
                {"configuration": invocation.configuration, "webhook": name, "mutated": changed},
                separators=(",", ":")))
        if changed:
            self._require_reinvoking(state)
            attrs.reinvoke["should_reinvoke"] = True
        if hook.get("reinvocationPolicy") == "IfNeeded":
            state["previous"].add(invocation.uid)
        data = {"configuration": invocation.configuration, "round": attrs.round, "index": i}
        if error is None:
            if applied is not None:
                attrs.trace.add("mutating-admission", name, "patched" if changed else "admitted",
                                f"webhook {name} returned a JSON patch" + ("" if changed else " that changed nothing"),
                                patch=applied, **data)
            else:
                attrs.trace.add("mutating-admission", name, "admitted", f"webhook {name} allowed the request", **data)
            return
        if isinstance(error, CallError):
            if ignore:
                attrs.annotate(FAILED_OPEN_MUTATING + suffix, name)
                if attrs.deadline is not None and time.monotonic() >= attrs.deadline:
                    # mutatingDispatcher.Dispatch: the request's own deadline has passed, "no point in
                    # continuing" (apierrors.NewTimeoutError, retry after 0 s)
                    attrs.trace.add("mutating-admission", name, "error",
                                    f"{error}; the request's timeout has passed", **data)
                    raise request_timeout_error()
                attrs.trace.add("mutating-admission", name, "failed open",
                                f"{error}; failurePolicy Ignore lets the request go on", **data)
                return
            attrs.trace.add("mutating-admission", name, "error",
                            f"{error}; failurePolicy Fail rejects the request", **data)
            raise internal(str(error))
        attrs.trace.add("mutating-admission", name, "rejected", error.message, code=error.code, **data)
        raise error

    def _apply(self, attrs: Attributes, invocation: Invocation, result: dict, suffix: str) -> tuple[bool, list]:
        name = invocation.hook.get("name", "")
        try:
            raw = gobase64.decode(result["patch"])
            ops = json.loads(raw)
            problem = jsonpatch.check_operations(ops)     # jsonpatch.DecodePatch
            if problem:
                raise ValueError(problem)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            message = _json_error(exc) if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise CallError(name, f"received undecodable patch in webhook response: {message}")
        if not ops:
            return False, ops
        if attrs.obj is None:
            raise internal(f"admission webhook {json.dumps(name)} attempted to modify the object, which is not "
                           "supported for this operation")
        if result.get("patchType") != "JSONPatch":
            raise CallError(name, f"unsupported patch type {json.dumps(result.get('patchType'))}")
        target = invocation.attrs.obj
        try:
            # patchObj.Apply; its error as apierrors.NewInternalError wraps it
            patched = jsonpatch.apply(target, ops)
        except jsonpatch.PatchError as exc:
            raise internal(str(exc))
        if not isinstance(patched, dict):
            raise internal("the patched object is not an object")
        changed = patched != target
        # webhookAnnotator.addPatchAnnotation (logged at audit level Request and above)
        attrs.annotate(PATCH_PREFIX + suffix, json.dumps(
            {"configuration": invocation.configuration, "webhook": name, "patch": ops, "patchType": "JSONPatch"},
            separators=(",", ":")), level="Request")
        if invocation.attrs is not attrs:
            # back into the request's version (the dispatcher's final Convert)
            stored = invocation.rt.to_storage(patched) if invocation.rt.to_storage else patched
            patched = self.registry.present(attrs.rt, stored)
        decoded = self.registry.redecode(attrs.rt, patched)
        attrs.obj.clear()
        attrs.obj.update(decoded)
        return changed, ops


# -- ValidatingAdmissionWebhook --------------------------------------------------------------------

class ValidatingWebhooks:
    name = "ValidatingAdmissionWebhook"

    def __init__(self, registry):
        self.registry = registry
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="validating-webhook")

    def validate(self, attrs: Attributes) -> None:
        """validatingDispatcher.Dispatch: matching webhooks called in parallel; the first error wins."""
        if is_exempt(attrs):
            return
        relevant = []
        for configuration, index, hook in configurations(self.registry.store, VALIDATING_KEY):
            invocation = should_call(self.registry, configuration, index, hook, attrs)
            if invocation is not None:
                relevant.append(invocation)
        if not relevant:
            return
        errors: list[Exception] = []
        lock = threading.Lock()

        def run(i: int, invocation: Invocation) -> None:
            error = self._call_one(attrs, invocation, i, lock)
            if error is not None:
                with lock:
                    errors.append(error)

        list(self._pool.map(lambda pair: run(*pair), enumerate(relevant)))
        if errors:
            raise errors[0]

    def _call_one(self, attrs: Attributes, invocation: Invocation, i: int, lock: threading.Lock):
        hook = invocation.hook
        name = hook.get("name", "")
        data = {"configuration": invocation.configuration, "index": i}
        try:
            _check_dry_run(hook, attrs)
            result = call(self.registry, invocation, mutating=False)
        except CallError as exc:
            with lock:
                if hook.get("failurePolicy") == "Ignore":
                    attrs.annotate(f"{FAILED_OPEN_VALIDATING}round_0_index_{i}", name)
                    attrs.trace.add("validating-admission", name, "failed open",
                                    f"{exc}; failurePolicy Ignore lets the request go on", **data)
                    return None
                attrs.trace.add("validating-admission", name, "error",
                                f"{exc}; failurePolicy Fail rejects the request", **data)
            return internal(str(exc))
        except ApiError as exc:
            with lock:
                attrs.trace.add("validating-admission", name, "rejected", exc.message, code=exc.code, **data)
            return exc
        with lock:
            _record_response(attrs, hook, result)
            if result["allowed"]:
                attrs.trace.add("validating-admission", name, "admitted", f"webhook {name} allowed the request",
                                **data)
                return None
            error = to_status_error(name, result.get("status"))
            attrs.trace.add("validating-admission", name, "rejected", error.message, code=error.code, **data)
            return error
