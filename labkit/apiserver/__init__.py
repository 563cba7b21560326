"""labkit's embedded Kubernetes API server.

A real HTTPS API server on 127.0.0.1, reporting Kubernetes v1.34, that kubectl (1.32 here, 1.20
on Debian 12: beyond kubectl's one-minor-version skew policy, but working) and the `kubernetes`
Python client use as they would a cluster's, with upstream's semantics: deletion
with DeleteOptions (propagationPolicy, orphanDependents, preconditions, gracePeriodSeconds), GC
finalizers, pods' graceful deletion, removal in the update that drops the last finalizer,
optimistic concurrency, the three patch formats, watches with resourceVersions and bookmarks,
lists at an exact resourceVersion and paged on one snapshot (410 once it is compacted away),
discovery (legacy and aggregated), Tables, PartialObjectMetadata and YAML answers, OpenAPI v3 enough for `kubectl
create|apply -f`, protobuf request bodies of kubectl's typed clients, custom resources served
from their CRDs, and Kubernetes Status errors with upstream's reasons and messages.

Modules, request path first:

  http.py       HTTPS front end, bearer tokens, body limits, streamed watches
  handler.py    routing (RequestInfo), verbs, content negotiation, DeleteOptions, audit
  registry.py   the generic registry: create/get/list/update/patch/delete/deletecollection/watch
  models.py     the built-in kinds' schemas, from the `kubernetes` package's generated models, and
                the typed decoding of every request body (type errors, unknown fields, nulls)
  defaults.py   upstream's defaulting (SetDefaults_*), applied to every decoded body
  quantity.py   resource quantities, read and written as apimachinery does
  resources.py  resource types, strategies, the status and scale subresources, the REST mapper
  kinds.py      the served kinds and their strategies (per-kind behaviour)
  storage.py    SQLite + in-memory index + event log; group commit, durable before answering
  validation.py, selectors.py, patch.py, protobuf.py, tables.py, discovery.py, errors.py
  audit.py      the audit log (audit.k8s.io/v1 Event JSON lines)
  internal.py   controllers of kube-apiserver itself: CRD cleanup, APIService registration and availability
  client.py     HttpClient (any cluster, from a kubeconfig), LocalClient (in-process), RESTMapper
  server.py     EmbeddedServer (all of it in one process), spawn() for labs, ServerInfo
  certs.py      the server's CA and certificate (client-go sends tokens only over TLS)

Every body a write decodes — create, update, each patch type once applied, status — goes
through the kind's typed decoding and defaulting (Registry.decode), as kube-apiserver's decoder
does: what a client leaves out reads the same however the object was written, unknown fields
are dropped, refused (fieldValidation=Strict, kubectl's default) or warned about (Warn, the
default: `Warning` headers).

Served kinds (kinds.builtin_types): core Namespaces, Pods, ReplicationControllers, ConfigMaps,
Secrets, Services, ServiceAccounts, Events, Nodes, PersistentVolumes, PersistentVolumeClaims,
Endpoints; apps Deployments, ReplicaSets, DaemonSets, StatefulSets; batch Jobs, CronJobs;
autoscaling/v2 and v1 HorizontalPodAutoscalers; rbac Roles, RoleBindings, ClusterRoles,
ClusterRoleBindings; coordination Leases; discovery EndpointSlices; events.k8s.io Events (a view
of core Events); CRDs and APIServices. Controllers run for Deployments, ReplicaSets, the garbage
collector and namespaces; nothing creates Nodes, runs Jobs or fills EndpointSlices.

Not (yet) served: authorization (every authenticated user may do everything), admission beyond
the namespace lifecycle, field ownership of server-side apply (an apply merges), kinds not
listed in kinds.builtin_types().

Adding a resource
-----------------
Write a `Strategy` subclass in kinds.py for what the kind does differently from the generic
registry, and add a `ResourceType` to `builtin_types()` (its schema and defaults come from its
model in the `kubernetes` package and defaults.py):

    class WidgetStrategy(Strategy):
        default_gc_policy = DELETE_DEPENDENTS        # what a DELETE without policy does
        subresources = (StatusSubresource(),         # <resource>/status, PUT/PATCH/GET (keeps the spec)
                        ScaleSubresource())          # <resource>/scale: an autoscaling/v1 Scale
        generation = True                            # metadata.generation follows spec changes
        printer = ([tables.NAME, tables.AGE], lambda obj: [obj["metadata"]["name"], tables.age(obj)])

        def prepare_for_create(self, obj): ...       # defaults; reset status
        def prepare_for_update(self, new, old): ...  # what a normal update may not change
        def validate(self, obj) -> list[FieldError]: ...

    ResourceType("example.io", "v1", "widgets", "Widget", True, WidgetStrategy(), "widget", ["wd"])

Discovery, OpenAPI, routing, the GC's monitors and `kubectl api-resources` pick it up. A strategy
may also set `graceful_deletion` (with `check_graceful_delete`), `return_deleted_object`,
`field_labels` (field selectors), `should_delete_during_update` (an extra condition for removing
the object when its last finalizer goes), or define `delete(registry, rt, namespace, name,
options, dry_run)` to replace the generic deletion (the namespace lifecycle does that).
Admission plugins are functions appended to `Registry.admission`; each gets an
`AdmissionRequest` (operation, resource, namespace, name, object) and raises an ApiError to
refuse. New scenario-visible capabilities go into `server.SERVER_FEATURES`.

Namespaces (pkg/registry/core/namespace): creation adds the `kubernetes` spec finalizer and
phase Active; the first DELETE sets deletionTimestamp and phase Terminating (later ones change
nothing while spec finalizers remain); `PUT namespaces/<name>/finalize` applies spec.finalizers;
the namespace is removed in the update that leaves spec and metadata finalizers empty; creating
content in a Terminating namespace is refused (403, cause NamespaceTerminating). The namespace
controller (labkit.controllers.namespace) empties a Terminating namespace and removes the
`kubernetes` finalizer.

Starting it from a lab
----------------------
    from labkit.apiserver.server import spawn

    def up(env):
        info = spawn(env)                  # tracked process, state in env.dir/apiserver
        client = info.client()             # HttpClient; info.kubeconfig for kubectl
        client.create("v1", "namespaces", {"metadata": {"name": "demo"}})

    def access(env):
        info = read_server_info(Path(env.dir) / "apiserver")     # also from labkit.apiserver.server
        return f"export KUBECONFIG={info.kubeconfig}"

`spawn(env, controllers=[...])` chooses the controllers (default: garbagecollector, deployment,
replicaset, node); `info.set_controller("garbagecollector", running=False)` stops one and
`running=True` / `restart=True` start it again (admin API under /labkit/v1, for system:masters).
The state directory holds objects.db, audit.log, decisions.log (what `labkit gc log` reads),
kubeconfig (mode 0600), tokens.csv and pki/. `labkit cleanup` stops the process through the
ledger. In tests and tools, `EmbeddedServer(state_dir, controllers=[...]).start()` runs the same
server in-process; `.client()` is an in-process LocalClient, `.http_client()` an HttpClient.
"""
