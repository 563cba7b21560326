"""The director at the end of the handler chain and the REST handlers: URL routing, verbs,
content negotiation (JSON, Table, aggregated discovery), DeleteOptions from the body or the
query, error Status answers. The filters before it (audit, impersonation, authorization, and
authentication for HTTP) are in filters/, composed by filters/chain.py; the HTTP server (http.py)
runs that chain, and the in-process client (client.LocalClient) calls `Api.handle`, the same
chain without authentication.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import yaml

from labkit.apiserver import availability, discovery, openapi, patch as patches, protobuf, tokenrequest
from labkit.apiserver.audit import AuditLog
from labkit.apiserver.auditpolicy import DEFAULT_POLICY, Policy
from labkit.apiserver.escalation import EscalationCheck
from labkit.apiserver.authorizer import Authorizer
from labkit.apiserver.trace import Traces
from labkit.apiserver.errors import (ApiError, FieldError, bad_request, field_invalid, field_unsupported,
                                     invalid, method_not_supported, not_acceptable, not_found_path,
                                     unsupported_media_type)
from labkit.apiserver.filters.chain import build_handler_chain
from labkit.apiserver.registry import podconnect
from labkit.apiserver.registry.store import Registry, WriteOptions, decode_delete_options
from labkit.apiserver.request import NO_BODY, Request, User, check_depth
from labkit.apiserver.response import ErrorStream, Response, WatchStream
from labkit.apiserver.resources import ResourceType
from labkit.apiserver.tables import build_table
from labkit.apiserver.version import EffectiveVersion

DISCOVERY_V2 = "apidiscovery.k8s.io/v2"
DISCOVERY_V2BETA1 = "apidiscovery.k8s.io/v2beta1"
NAMESPACE_SUBRESOURCES = ("status", "finalize")
FIELD_VALIDATION = ("Ignore", "Strict", "Warn")


@dataclass
class ResourceRequest:
    rt: ResourceType
    namespace: str | None
    name: str
    subresource: str
    verb: str


def _accepts(headers: dict, needle: str) -> bool:
    return needle in headers.get("accept", "").replace(" ", "")


SERVED_MEDIA_TYPES = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]


def negotiate(headers: dict, target: str) -> tuple[str, str | None, str]:
    """(encoding, `as` kind or None, meta.k8s.io version) for the Accept header of a read, as
    kube-apiserver's negotiation picks it: the first acceptable media range (by q), where `as`
    may ask for a Table, or PartialObjectMetadata (single objects and watches) /
    PartialObjectMetadataList (lists) of meta.k8s.io v1 or v1beta1. JSON and YAML are
    written; protobuf is not, so a client asking only for it gets 406."""
    accept = headers.get("accept", "").strip()
    if not accept:
        return "json", None, "v1"
    ranges = []
    for i, part in enumerate(accept.split(",")):
        fields = [f.strip() for f in part.split(";")]
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        ranges.append((-q, i, fields[0].lower(), params))
    partial = "PartialObjectMetadataList" if target == "list" else "PartialObjectMetadata"
    for _, _, mime, params in sorted(ranges):
        if mime in ("application/json", "application/*", "*/*"):
            encoding = "json"
        elif mime == "application/yaml":
            encoding = "yaml"
        else:
            continue
        as_kind = params.get("as")
        if as_kind is None:
            return encoding, None, "v1"
        if params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1") \
                and as_kind in ("Table", partial):
            return encoding, as_kind, params["v"]
    raise not_acceptable(SERVED_MEDIA_TYPES)


def media_type(encoding: str, as_kind: str | None, version: str) -> str:
    base = "application/yaml" if encoding == "yaml" else "application/json"
    return f"{base};as={as_kind};v={version};g=meta.k8s.io" if as_kind else base


def encoded(body, encoding: str, as_kind: str | None, version: str, code: int = 200) -> Response:
    if encoding == "yaml":
        import yaml
        return Response(code, yaml.safe_dump(body, sort_keys=False).encode(), media_type(encoding, as_kind, version))
    return Response(code, body, media_type(encoding, as_kind, version))


def partial_object_metadata(obj: dict, api_version: str) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": obj.get("metadata", {})}


def _media_type(headers: dict) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


class Api:
    """Routes requests to the registry and renders the answers."""

    def __init__(self, registry: Registry, audit: AuditLog | None = None, server_address: str = "127.0.0.1:0",
                 version: EffectiveVersion | None = None, audit_policy: Policy | None = None):
        self.registry = registry
        self.version = version or EffectiveVersion()
        self.audit = audit or AuditLog(None)
        self.audit_policy = audit_policy or Policy.from_dict(yaml.safe_load(DEFAULT_POLICY))
        self.server_address = server_address
        self.authorizer = Authorizer(registry.store)
        registry.write_guards.append(EscalationCheck(registry.store, self.authorizer))
        self.traces = Traces()
        self.openapi = openapi.Documents(registry.catalog)
        # the issuer and validator of ServiceAccount tokens (TokenRequest), set by the server
        self.service_account_tokens = None
        self.token_authenticator = None     # authn.Authenticator: what answers TokenReviews
        # non-resource paths served by the embedding program: prefix -> handler(request, rest)
        self.extensions: dict[str, Callable[[Request, str], Response]] = {}
        # pods/log, exec, attach, portforward: how the kubelet is dialled, and which lab process
        # stands for a Pod's container (registry/podconnect.py)
        self.kubelet_dialer = podconnect.dial
        self.container_logs: Callable[[dict, str], str | None] = lambda pod, container: None
        self._chain = build_handler_chain(self)

    # -- entry point ---------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        """A request of an in-process client, through the handler chain (filters/chain.py)."""
        return self._chain(request)

    def serve(self, request: Request) -> Response:
        """The director at the end of the handler chain (server/handler.go `director`): the
        aggregator's proxy for remote API groups, the REST handlers under /api and /apis, and
        discovery and the non-resource paths; errors are answered as Status objects. Answers
        only what is on disk."""
        path = request.path.rstrip("/") or "/"
        try:
            remote = self._remote_answer(request, path)
            if remote is not None:
                response = remote
            elif path.startswith("/api/") or path.startswith("/apis/"):
                info = self._resource_request(request, path)
                if info is not None:
                    response, request.audit_object = self._serve_resource(request, info)
                else:
                    response = self._serve_discovery(request, path)
            else:
                response = self._serve_other(request, path)
        except ApiError as exc:
            response = Response(exc.code, exc.status(), warnings=list(exc.warnings))
        finally:
            not_durable = self._wait_durable()
        return not_durable or response

    def _wait_durable(self) -> Response | None:
        try:
            self.registry.store.wait_durable()       # answer only what is on disk
        except ApiError as exc:
            return Response(exc.code, exc.status())
        return None

    def lookup(self, resource: str, namespace: str | None, name: str) -> dict | None:
        """A stored core/v1 object, or None (what token validation and TokenRequest read)."""
        rt = self.registry.catalog.lookup("", "v1", resource)
        try:
            return self.registry.get(rt, namespace if rt.namespaced else None, name)
        except ApiError:
            return None

    # -- routing -------------------------------------------------------------------------------
    def _resource_request(self, request: Request, path: str) -> ResourceRequest | None:
        parts = path.strip("/").split("/")
        if parts[0] == "api":
            if len(parts) < 3:
                return None
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) < 4:
                return None
            group, version, rest = parts[1], parts[2], parts[3:]
        if rest and rest[0] == "watch":
            request.query["watch"] = "true"
            rest = rest[1:]
            if not rest:
                raise not_found_path()
        namespace = None
        if rest[0] == "namespaces" and len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]      # else: the namespace object itself
        if len(rest) > 3 or not rest[0]:
            raise not_found_path()
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        rt = self.registry.catalog.lookup(group, version, resource)
        if rt is None:
            raise not_found_path()
        if namespace is not None and not rt.namespaced:
            raise not_found_path()
        method = request.method.upper()
        if name:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}.get(method)
        else:
            watch = request.query.get("watch", "").lower() in ("true", "1")
            verb = {"GET": "watch" if watch else "list", "POST": "create", "DELETE": "deletecollection"}.get(method)
        if verb is None:
            raise method_not_supported(rt.resource, rt.group, method.lower())
        if subresource and rt.group == "" and rt.resource == "pods" and subresource in podconnect.CONNECT_SUBRESOURCES:
            # the kubelet-proxied subresources: log is read (GET), exec, attach and portforward are
            # connected to with GET (WebSocket) or POST (SPDY) (pkg/registry/core/pod/rest)
            if verb not in (("get",) if subresource == "log" else ("get", "create")):
                raise method_not_supported(f"{rt.resource}/{subresource}", rt.group, verb)
        elif subresource:
            sub = rt.strategy.subresource(subresource)
            if sub is None:
                raise not_found_path()
            if verb not in sub.verbs:
                raise method_not_supported(f"{rt.resource}/{subresource}", rt.group, verb)
        elif verb not in rt.verbs or (verb == "create" and name):
            raise method_not_supported(rt.resource, rt.group, verb)
        if rt.namespaced and not namespace and verb in ("get", "update", "patch", "delete", "create"):
            raise not_found_path()
        return ResourceRequest(rt, namespace, name, subresource, verb)

    # -- the kubelet-proxied Pod subresources --------------------------------------------------
    def _serve_pod_connect(self, request: Request, info: ResourceRequest) -> Response:
        nodes = self.registry.catalog.lookup("", "v1", "nodes")
        try:
            podconnect.connect(info.name, lambda: self.registry.get(info.rt, info.namespace, info.name),
                               lambda node: self.registry.get(nodes, None, node), info.subresource, request.query,
                               self.kubelet_dialer, self.container_logs)
        except ApiError as exc:
            request.trace.add("storage", "pod connect", "kubelet not reached" if exc.code >= 500 else "refused",
                              exc.message)
            raise
        # a Pod without a node has an empty log (genericrest.LocationStreamer without a location)
        return Response(204, b"", content_type="text/plain")

    # -- resources -----------------------------------------------------------------------------
    def _body(self, request: Request):
        if request.obj is not NO_BODY:
            return request.obj
        data = request.body or b""
        media = _media_type(request.headers)
        if media in ("", "application/json", "*/*", "text/plain"):
            try:
                return check_depth(json.loads(data)) if data.strip() else None
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise bad_request(f"couldn't get version/kind; json parse error: {exc}")
        if media == protobuf.CONTENT_TYPE:
            return protobuf.decode(data)
        if media in ("application/yaml", "application/x-yaml"):
            import yaml
            try:
                return check_depth(yaml.safe_load(data))
            except (yaml.YAMLError, RecursionError) as exc:
                raise bad_request(f"error converting YAML to JSON: {exc}")
        raise unsupported_media_type(media, ["application/json", "application/yaml", protobuf.CONTENT_TYPE])

    def _dry_run(self, request: Request, options_kind: str = "CreateOptions") -> bool:
        value = request.query.get("dryRun")
        if value is None or value == "":
            return False
        if value != "All":
            raise invalid(options_kind, "meta.k8s.io", "", [field_unsupported("dryRun", value, ["All"])])
        return True

    def _write_options(self, request: Request, options_kind: str) -> WriteOptions:
        """CreateOptions / UpdateOptions / PatchOptions from the query."""
        q = request.query
        validation = q.get("fieldValidation") or "Warn"
        if validation not in FIELD_VALIDATION:
            raise invalid(options_kind, "meta.k8s.io", "",
                          [field_unsupported("fieldValidation", validation, ["", *FIELD_VALIDATION])])
        force = q.get("force", "").lower()
        if force not in ("", "true", "false", "1", "0"):
            raise bad_request(f"strconv.ParseBool: parsing {json.dumps(q['force'])}: invalid syntax")
        manager = q.get("fieldManager") or None
        if manager is not None and (len(manager) > 128 or not manager.isprintable()):
            raise invalid(options_kind, "meta.k8s.io", "", [
                FieldError("Too long", "fieldManager", "may not be more than 128 bytes") if len(manager) > 128 else
                field_invalid("fieldManager", manager, "must only contain printable characters")])
        dry_run = self._dry_run(request, options_kind)
        # what admission gets as the operation's options: a patch is an UPDATE with UpdateOptions
        # (handlers/patch.go, patchToUpdateOptions), an apply that creates a CREATE with CreateOptions
        admission_kind = "UpdateOptions" if options_kind == "PatchOptions" else options_kind
        admission_options = {"kind": admission_kind, "apiVersion": "meta.k8s.io/v1"}
        if dry_run:
            admission_options["dryRun"] = ["All"]
        if manager:
            admission_options["fieldManager"] = manager
        if q.get("fieldValidation"):
            admission_options["fieldValidation"] = validation
        return WriteOptions(dry_run=dry_run, field_validation=validation,
                            field_manager=manager, force=force in ("true", "1"),
                            user_agent=request.headers.get("user-agent", ""), user=request.user,
                            admission_options=admission_options, trace=request.trace, deadline=request.deadline)

    def _serve_resource(self, request: Request, info: ResourceRequest) -> tuple[Response, Any]:
        reg = self.registry
        rt, ns, name, q = info.rt, info.namespace, info.name, request.query
        if info.subresource in podconnect.CONNECT_SUBRESOURCES and rt.resource == "pods" and rt.group == "":
            return self._serve_pod_connect(request, info), None
        if info.verb == "get":
            obj = reg.get_scale(rt, ns, name) if info.subresource == "scale" else reg.get(rt, ns, name)
            return self._render(request, rt, [obj], single=True, rv=obj["metadata"].get("resourceVersion", "")), None
        if info.verb == "list":
            try:
                limit = int(q.get("limit") or 0)
            except ValueError:
                raise bad_request(f"strconv.ParseInt: parsing {json.dumps(q['limit'])}: invalid syntax")
            items, rev, token, remaining = reg.list_page(rt, ns, q.get("labelSelector"), q.get("fieldSelector"),
                                                         max(limit, 0), q.get("continue"), q.get("resourceVersion"),
                                                         q.get("resourceVersionMatch"))
            return self._render(request, rt, items, single=False, rv=str(rev), token=token,
                                remaining=remaining), None
        if info.verb == "watch":
            return self._watch(request, rt, ns), None
        if info.verb == "create":
            if not info.subresource and reg.crd_terminating(rt):
                # apiextensions-apiserver pkg/apiserver/customresource_handler.go serveResource: a
                # create while the CRD's condition Terminating is True, answered before decoding
                error = method_not_supported(rt.resource, rt.group, "create")
                error.message = "create not allowed while custom resource definition is terminating"
                raise error
            body = self._body(request)
            if info.subresource in ("binding", "token") or rt.strategy.binds_pods:
                named = name if info.subresource else \
                    ((body.get("metadata") or {}).get("name", "") if isinstance(body, dict) else "")
                if isinstance(body, dict):
                    kind = ("authentication.k8s.io", "v1", "TokenRequest") if info.subresource == "token" \
                        else ("", "v1", "Binding")
                    body = reg.admit_subresource_create(rt, ns, named, body, info.subresource, kind,
                                                        self._write_options(request, "CreateOptions"))
            if info.subresource == "binding":
                return Response(201, reg.bind(ns, name, body, self._dry_run(request))), None
            if rt.strategy.binds_pods:      # POST bindings: the Binding's name is the Pod's
                return Response(201, reg.bind(ns, named, body, self._dry_run(request))), body
            if info.subresource == "token":
                request.trace.add("storage", "TokenREST", "not stored", "a TokenRequest is answered with a "
                                  "signed token and not stored (pkg/registry/core/serviceaccount/storage/token.go)")
                return Response(201, tokenrequest.create(self.service_account_tokens, self.lookup, ns, name, body,
                                                         request.trace.annotations)), body
            if hasattr(rt.strategy, "set_requester"):     # a CSR records who asked for it
                body = rt.strategy.set_requester(body, request.user)
            options = self._write_options(request, "CreateOptions")
            if rt.strategy.virtual:
                answer = self._review(rt, ns, body, request.user, options)
                request.trace.add("storage", f"{rt.kind} REST", "not stored", "a review is answered and not stored "
                                  "(pkg/registry/authorization/*/rest.go, pkg/registry/authentication/*/rest.go)")
                return Response(201, answer), options.decoded
            # the audit's requestObject is the decoded, defaulted object (create.go, update.go:
            # audit.LogRequestObject after the decoder), not the body as sent
            return Response(201, reg.create(rt, ns, body, options), warnings=options.warnings), options.decoded
        if info.verb == "update":
            body = self._body(request)
            options = self._write_options(request, "UpdateOptions")
            obj = reg.update(rt, ns, name, body, info.subresource, options)
            return Response(200, obj, warnings=options.warnings), options.decoded
        if info.verb == "patch":
            patch_type = _media_type(request.headers)
            if patch_type not in (patches.JSON_PATCH, patches.MERGE_PATCH, patches.STRATEGIC_MERGE_PATCH,
                                  patches.APPLY_PATCH):
                raise unsupported_media_type(patch_type, [patches.JSON_PATCH, patches.MERGE_PATCH,
                                                          patches.STRATEGIC_MERGE_PATCH, patches.APPLY_PATCH])
            data = request.body if request.obj is NO_BODY else json.dumps(request.obj).encode()
            options = self._write_options(request, "PatchOptions")
            code, obj = reg.patch(rt, ns, name, patch_type, data or b"", info.subresource, options)
            return Response(code, obj, warnings=options.warnings), _loads_or_text(data)
        options = self._delete_options(request)
        warning = rt.strategy.delete_warning(options)
        caller = WriteOptions(user=request.user, trace=request.trace, warnings=[warning] if warning else [],
                              deadline=request.deadline)
        warnings = caller.warnings
        # handlers/delete.go: only DeleteOptions sent as a body are the audit's request object
        # (audit.LogRequestObject after decoding it); options from the query are not logged
        logged = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", **options} \
            if self._has_delete_body(request) else None
        if info.verb == "delete":
            code, body = reg.delete(rt, ns, name, options, bool(options.get("dryRun")), caller)
            return Response(code, body, warnings=warnings), logged
        body = reg.delete_collection(rt, ns, options, q.get("labelSelector"), q.get("fieldSelector"),
                                     bool(options.get("dryRun")), caller)
        return Response(200, _strip_item_types(rt, body), warnings=warnings), logged

    def _review(self, rt: ResourceType, namespace: str | None, body, user: User, options: WriteOptions) -> dict:
        """An access review or a TokenReview: decoded, through mutating admission (the create
        handler's), validated, through validating admission (the REST's createValidation),
        answered, not stored (pkg/registry/authorization/*/rest.go, authentication/*/storage.go)."""
        obj = self.registry.decode(rt, body, namespace, options)
        if rt.namespaced:
            obj["metadata"]["namespace"] = namespace
        obj, validate_admission = self.registry.admit_unstored(rt, namespace, obj, options)
        if rt.kind == "TokenReview":
            # tokenreview/storage.go REST.Create: no namespace, a token, then createValidation
            if namespace:
                raise bad_request(f"namespace is not allowed on this type: {namespace}")
            spec = obj.get("spec") or {}
            if not spec.get("token"):
                raise bad_request("token is required for TokenReview in authentication")
            validate_admission(obj)
            if self.token_authenticator is None:
                return obj
            return dict(obj, status=self.token_authenticator.review(spec["token"], list(spec.get("audiences") or [])))
        errors = rt.strategy.validate(obj)
        if errors:
            raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), errors)
        validate_admission(obj)
        return rt.strategy.review(obj, user, self.authorizer, namespace)

    @staticmethod
    def _has_delete_body(request: Request) -> bool:
        if request.obj is not NO_BODY:
            return request.obj is not None
        return bool(request.body and request.body.strip())

    def _delete_options(self, request: Request) -> dict:
        """handlers/delete.go: a non-empty body is the DeleteOptions and the query is ignored."""
        if self._has_delete_body(request):
            return decode_delete_options(request.obj if request.obj is not NO_BODY else self._body(request))
        q = request.query
        options: dict = {}
        if q.get("gracePeriodSeconds") not in (None, ""):
            try:
                options["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError:
                raise bad_request(f"strconv.ParseInt: parsing {json.dumps(q['gracePeriodSeconds'])}: invalid syntax")
        if q.get("orphanDependents") not in (None, ""):
            value = q["orphanDependents"].lower()
            if value not in ("true", "false", "1", "0"):
                raise bad_request(f"strconv.ParseBool: parsing {json.dumps(q['orphanDependents'])}: invalid syntax")
            options["orphanDependents"] = value in ("true", "1")
        if q.get("propagationPolicy") not in (None, ""):
            options["propagationPolicy"] = q["propagationPolicy"]
        if q.get("dryRun"):
            options["dryRun"] = [q["dryRun"]]
        return options

    def _render(self, request: Request, rt: ResourceType, items: list[dict], single: bool, rv: str,
                token: str = "", remaining: int = 0) -> Response:
        list_meta = {"resourceVersion": rv}
        if token:
            list_meta.update({"continue": token, "remainingItemCount": remaining})
        encoding, as_kind, version = negotiate(request.headers, "object" if single else "list")
        meta_version = f"meta.k8s.io/{version}"
        if as_kind == "Table":
            body = build_table(rt.printer, items, rv, request.query.get("includeObject", "Metadata"))
            body["apiVersion"], body["metadata"] = meta_version, list_meta
        elif as_kind == "PartialObjectMetadata":
            body = partial_object_metadata(items[0], meta_version)
        elif as_kind == "PartialObjectMetadataList":
            body = {"kind": "PartialObjectMetadataList", "apiVersion": meta_version, "metadata": list_meta,
                    "items": [partial_object_metadata(i, meta_version) for i in items]}
        elif single:
            body = items[0]
        else:
            body = _strip_item_types(rt, {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": list_meta,
                                          "items": items})
        return encoded(body, encoding, as_kind, version)

    def _watch(self, request: Request, rt: ResourceType, namespace: str | None) -> Response:
        q = request.query
        send_initial = q.get("sendInitialEvents", "").lower() == "true"
        rv = q.get("resourceVersion")
        if send_initial:
            rv = ""
        encoding, as_kind, version = negotiate(request.headers, "watch")
        if encoding != "json":
            raise not_acceptable(["application/json", "application/vnd.kubernetes.protobuf"])
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            raise bad_request(f"invalid timeoutSeconds: {q.get('timeoutSeconds')}")
        content_type = media_type("json", as_kind, version)
        try:
            watcher, initial = self.registry.watch(rt, namespace, rv, q.get("labelSelector"), q.get("fieldSelector"))
        except ApiError as exc:
            if exc.code != 410:
                raise
            # the watch cache answers a watch from a compacted revision with an ERROR event
            return Response(200, None, content_type, ErrorStream({"type": "ERROR", "object": exc.status()}))
        include = q.get("includeObject", "Metadata")
        present = self.registry.present
        meta_version = f"meta.k8s.io/{version}"

        def transform(obj: dict) -> dict:
            obj = present(rt, obj)
            if as_kind == "Table":
                table = build_table(rt.printer, [obj], obj["metadata"].get("resourceVersion", ""), include)
                table["apiVersion"] = meta_version
                return table
            if as_kind == "PartialObjectMetadata":
                return partial_object_metadata(obj, meta_version)
            return obj

        def bookmark(rev: int) -> dict:
            if as_kind == "PartialObjectMetadata":
                return {"kind": "PartialObjectMetadata", "apiVersion": meta_version,
                        "metadata": {"resourceVersion": str(rev)}}
            return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": str(rev)}}

        bookmarks = q.get("allowWatchBookmarks", "").lower() == "true"
        stream = WatchStream(watcher, initial, transform, timeout, bookmarks, send_initial and bookmarks, bookmark,
                             self.registry.store)
        return Response(200, None, content_type, stream)

    # -- discovery and the rest ----------------------------------------------------------------
    def _remote_answer(self, request: Request, path: str) -> Response | None:
        """Requests under /apis/<group>/<version> of an APIService with a backend service: the
        aggregator's proxy answers 503 while the APIService is not Available (proxy handler
        "service unavailable") and forwards them to the backend otherwise (availability.proxy)."""
        parts = path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "apis" or self.registry.catalog.in_group_version(parts[1], parts[2]):
            return None
        remote = discovery.remote_versions(self.registry.store)
        available = remote.get((parts[1], parts[2]))
        if available is None:
            return None
        answer = availability.proxy(self.registry.store, parts[1], parts[2], request) if available else None
        if answer is None:
            return Response(503, b"service unavailable\n", "text/plain; charset=utf-8")
        code, body, content_type = answer
        if content_type.split(";")[0].strip() == "application/json":
            try:
                body = json.loads(body)
            except ValueError:
                pass
        return Response(code, body, content_type)

    def _serve_discovery(self, request: Request, path: str) -> Response:
        catalog = self.registry.catalog
        remote = discovery.remote_versions(self.registry.store) if path.startswith("/apis") else {}
        parts = path.strip("/").split("/")
        if parts == ["api"] or parts == ["apis"]:
            legacy = parts == ["api"]
            for api_version in (DISCOVERY_V2, DISCOVERY_V2BETA1):
                group, version = api_version.split("/")
                if _accepts(request.headers, f"g={group};v={version};as=APIGroupDiscoveryList"):
                    return Response(200, discovery.aggregated(catalog, legacy, api_version, remote),
                                    f"application/json;g={group};v={version};as=APIGroupDiscoveryList")
            if legacy:
                return Response(200, discovery.api_versions(self.server_address))
            return Response(200, discovery.api_group_list(catalog, remote))
        if parts[0] == "api" and len(parts) == 2:
            body = discovery.api_resource_list(catalog, "", parts[1])
        elif parts[0] == "apis" and len(parts) == 2:
            body = discovery.api_group(catalog, parts[1], remote)
        elif parts[0] == "apis" and len(parts) == 3:
            body = discovery.api_resource_list(catalog, parts[1], parts[2])
        else:
            body = None
        if body is None:
            raise not_found_path()
        return Response(200, body)

    def _serve_other(self, request: Request, path: str) -> Response:
        if path == "/api" or path == "/apis":
            return self._serve_discovery(request, path)
        if path == "/version":
            return Response(200, self.version.info())
        if path in ("/healthz", "/livez", "/readyz"):
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if path == "/openapi/v2":
            if _accepts(request.headers, openapi.OPENAPI_V2_PROTOBUF):
                return Response(200, self.openapi.v2_protobuf(), openapi.OPENAPI_V2_PROTOBUF_ANSWER)
            return Response(200, self.openapi.v2())
        if path.startswith("/openapi/v3"):
            rest = path[len("/openapi/v3"):].strip("/")
            if not rest:
                return Response(200, self.openapi.root())
            parts = rest.split("/")
            if parts[0] == "api" and len(parts) == 2:
                group, version = "", parts[1]
            elif parts[0] == "apis" and len(parts) == 3:
                group, version = parts[1], parts[2]
            else:
                raise not_found_path()
            if not self.registry.catalog.in_group_version(group, version):
                raise not_found_path()
            return Response(200, self.openapi.v3_bytes(group, version), "application/json")
        for prefix, handler in self.extensions.items():
            if path == prefix or path.startswith(prefix + "/"):
                return handler(request, path[len(prefix):])
        raise not_found_path()


def _strip_item_types(rt: ResourceType, body: dict) -> dict:
    """Typed lists of built-in kinds carry no apiVersion/kind in their items (custom resources do)."""
    if rt.strategy.builtin:
        body["items"] = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in body["items"]]
    return body


def _loads_or_text(data: bytes | None):
    if not data:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")[:4096]
