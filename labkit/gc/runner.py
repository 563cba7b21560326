"""Playing a scenario: on a fresh embedded API server with labkit's controllers, or against a real
cluster (`--kubeconfig`), through the same plain-HTTP client either way.

Observations: the runner observes the scenario's objects after every step and while it waits
(every 50 ms): each observation reads all of them twice and is used only when both reads agree,
so it is one consistent moment. On the embedded server every committed write is an observation
too. Invariants are checked at every observation from the first `delete` step on — the action
the invariants describe — (on the embedded server from the first write that DELETE makes; a
refused DELETE writes nothing, so then from the next delete step; when a scenario has no delete
step, from its first step).

Namespace conditions in `expect.conditions` are compared with the namespace's final state, or,
when the namespace is gone at the end, with the first conditions it showed (its first deletion
pass).

A scenario whose category's controller labkit does not have, or that requires a server feature
the target lacks, is reported as not playable and fails at once.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.apiserver.client import ApiResource, HttpClient, RESTMapper
from labkit.apiserver.errors import ApiError
from labkit.errors import ConfigError
from labkit.gc.scenario import REF_EXPR as _REF_EXPR, ObjectSpec, Scenario, Step

CATEGORY_CONTROLLERS = {"gc": "garbagecollector", "namespace": "namespace", "serviceaccount": "serviceaccount",
                        "endpointslice": "endpointslice", "node": "node", "podgc": "podgc",
                        "volumeprotection": "pvc-protection"}
POLL = 0.05
_VERB_METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
                 "delete": "DELETE", "deletecollection": "DELETE"}


# -- targets -------------------------------------------------------------------------------------

# Controllers whose waits are all on the clock they are given (labkit.controllers.clock), and
# controllers that only react to events: while only these run, the time nothing happens in may be
# skipped. Others (the kubelet stand-in's grace periods, PodGC's periods, ...) wait in real time.
CLOCKED_CONTROLLERS = {"garbagecollector", "namespace", "node"}
EVENT_DRIVEN_CONTROLLERS = {"serviceaccount", "root-ca-cert-publisher"}


class EmbeddedTarget:
    """A fresh embedded server in a temporary directory; controllers as the scenario says.

    With `skip_idle_time`, the controllers run on a SkippingClock and the runner's waits move it
    ahead whenever the server and every controller have nothing to do but wait for a time (the
    namespace controller's 5 s grace period and estimate/2+1 s requeues, the GC's backoffs): the
    controllers see the same delays in the same order, the scenario does not sit through them.
    Only while every running controller is one of CLOCKED_CONTROLLERS or EVENT_DRIVEN_CONTROLLERS;
    otherwise the scenario plays in real time."""

    embedded = True

    def __init__(self, emulated_version: str | None = None, skip_idle_time: bool = False):
        from labkit.apiserver.server import SERVER_FEATURES, EmbeddedServer
        from labkit.controllers.clock import SkippingClock
        self._tmp = tempfile.TemporaryDirectory(prefix="labkit-scenario-")
        self.server = EmbeddedServer(self._tmp.name, controllers=[], emulated_version=emulated_version).start()
        self.skipping = SkippingClock() if skip_idle_time else None
        self.clock = self.skipping or time.monotonic
        if self.skipping is not None:
            self.server.controllers.settings["clock"] = self.skipping
        self.client = self.server.http_client()
        self.features = set(SERVER_FEATURES)
        if not self.server.api.version.enabled("OrderedNamespaceDeletion"):
            self.features.discard("ordered-namespace-deletion")
        self.description = f"embedded API server {self.server.url}"

    def controller_available(self, name: str) -> bool:
        return name in self.server.controllers.known()

    def start_controller(self, name: str) -> None:
        self.server.controllers.start(name)
        controller = self.server.controllers.get(name)
        if hasattr(controller, "wait_synced"):
            controller.wait_synced(30)

    def restart_controller(self, name: str) -> None:
        controller = self.server.controllers.restart(name)
        if hasattr(controller, "wait_synced"):
            controller.wait_synced(30)

    def pin_discovery(self, resources: list[ApiResource]) -> None:
        """The namespace controller discovers exactly `resources` (a scenario's `discovery:`)."""
        controller = self.server.controllers.get("namespace")
        if controller is not None:
            controller.deleter.discover = lambda client: (list(resources), {})

    def gc_observed(self, uid: str) -> bool:
        gc = self.server.controllers.get("garbagecollector")
        return bool(gc and gc.graph_has_uid(uid))

    def gc_unseen(self, objects: list[tuple[str, str, str]]) -> list[tuple[str, str, str]] | None:
        """Of (apiVersion, kind, uid), those no monitor of the running garbage collector has
        delivered yet — kinds it ignores (events) aside; None when it does not run."""
        from labkit.controllers.garbagecollector.graph import ObjectReference
        from labkit.controllers.garbagecollector.graph_builder import group_kind
        gc = self.server.controllers.get("garbagecollector")
        if gc is None or not gc.running:
            return None
        ignored_kinds = {("", "Event"), ("events.k8s.io", "Event")}
        return [o for o in objects if group_kind(o[0], o[1]) not in ignored_kinds
                and not gc.builder.was_observed(ObjectReference(o[0], o[1], "", o[2], ""))]

    def settle(self, timeout: float) -> bool:
        deadline = self.clock() + timeout
        while self.clock() < deadline:
            self.skip_idle_time(deadline)
            if self.server.internals.idle() and self.server.controllers.wait_idle(
                    min(1.0, max(0.01, deadline - self.clock())), stable_for=0.2):
                return True
        return False

    def _quiet(self) -> bool:
        """The server and every running controller have nothing to do now (timers aside), and
        only controllers whose timers are all on the clock run."""
        running = {n for n, up in self.server.controllers.status().items() if up}
        return running <= CLOCKED_CONTROLLERS | EVENT_DRIVEN_CONTROLLERS and self.server.internals.idle() \
            and self.server.controllers.quiet()

    def skip_idle_time(self, limit: float, to_limit: bool = False) -> float:
        """With a skipping clock, while all is quiet: move it to the next delayed item, if it is due
        by `limit`; with `to_limit`, to `limit` when nothing is due sooner (SkippingClock.skip). What
        was due is handled before the runner looks again: an observation then sees the outcome of a
        whole pass, never the middle of one. The seconds skipped."""
        if self.skipping is None:
            return 0.0
        return self.skipping.skip(self._quiet, limit, to_limit)

    def decisions(self) -> list[dict]:
        return self.server.decisions.recent()

    def audit_events(self) -> list[dict]:
        from labkit.apiserver import audit
        return audit.read(self.server.state_dir / "audit.log")

    def close(self) -> None:
        self.server.stop()
        self._tmp.cleanup()


class ClusterTarget:
    """A real cluster: its own controllers run, labkit starts or stops none of them."""

    embedded = False
    features = {"crd", "crd-instance-cleanup", "pod-graceful-deletion", "ordered-namespace-deletion",
                "apiservice-unavailable"}

    def __init__(self, kubeconfig: str, context: str | None = None):
        self.client = HttpClient.from_kubeconfig(kubeconfig, context)
        self.description = f"cluster {self.client.scheme}://{self.client.host}:{self.client.port}"

    def controller_available(self, name: str) -> bool:
        return True

    def start_controller(self, name: str) -> None:
        pass

    def restart_controller(self, name: str) -> None:
        pass

    def gc_observed(self, uid: str) -> bool:
        return True

    def gc_unseen(self, objects: list[tuple[str, str, str]]) -> list[tuple[str, str, str]] | None:
        return None         # a cluster's GC is not visible; its objects are waited for by the case's steps

    clock = staticmethod(time.monotonic)

    def settle(self, timeout: float) -> bool:
        time.sleep(min(timeout, 2.0))
        return True

    def skip_idle_time(self, limit: float, to_limit: bool = False) -> float:
        return 0.0          # a cluster's controllers run on their own clocks

    def decisions(self) -> list[dict]:
        return []

    def audit_events(self) -> list[dict]:
        return []

    def close(self) -> None:
        pass


# -- the report ----------------------------------------------------------------------------------

@dataclass
class Check:
    what: str
    ok: bool
    detail: str = ""


@dataclass
class Report:
    id: str
    title: str
    path: str
    target: str
    unsupported: str | None = None
    notes: list[str] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    invariants: list[dict] = field(default_factory=list)
    objects: dict = field(default_factory=dict)
    decisions: list[dict] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return (self.unsupported is None and all(s["ok"] for s in self.steps) and all(c.ok for c in self.checks)
                and all(i["ok"] for i in self.invariants))

    def failures(self) -> list[str]:
        found = []
        if self.unsupported:
            found.append(f"not playable: {self.unsupported}")
        found += [f"step {s['index']} {s['description']}: {s['detail']}" for s in self.steps if not s["ok"]]
        found += [f"{c.what}: {c.detail}" for c in self.checks if not c.ok]
        found += [f"invariant {i['while']} ⇒ {i['then']}: {i['detail']}" for i in self.invariants if not i["ok"]]
        return found

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "path": self.path, "target": self.target, "passed": self.passed,
                "unsupported": self.unsupported, "notes": self.notes, "duration_s": round(self.duration_s, 3),
                "steps": self.steps, "expectations": [c.__dict__ for c in self.checks],
                "invariants": self.invariants, "objects": self.objects, "decisions": self.decisions}


# -- matching ------------------------------------------------------------------------------------

def _path_get(obj, dotted: str):
    node = obj
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def match(expected, actual, where: str = "", dotted_keys: bool = False) -> list[str]:
    """Partial match: mappings compare the listed keys (with dotted_keys, the first level's keys
    are paths such as metadata.ownerReferences), lists element by element with the same rule,
    `null` means unset, "<set>" any value, "<starts-with:X>" a prefix."""
    problems: list[str] = []
    if isinstance(expected, dict):
        if expected and not isinstance(actual, dict):
            return [f"{where or 'value'}: expected a mapping, got {json.dumps(actual)}"]
        for key, value in expected.items():
            sub = _path_get(actual, key) if dotted_keys else (actual or {}).get(key)
            problems += match(value, sub, f"{where}.{key}" if where else key)
        return problems
    if isinstance(expected, list):
        actual_list = actual if isinstance(actual, list) else ([] if actual in (None, {}) else None)
        if actual_list is None or len(actual_list) != len(expected):
            return [f"{where}: expected {json.dumps(expected)}, got {json.dumps(actual)}"]
        for i, (e, a) in enumerate(zip(expected, actual_list)):
            problems += match(e, a, f"{where}[{i}]")
        return problems
    if expected is None:
        if actual not in (None, [], {}):
            problems.append(f"{where}: expected unset, got {json.dumps(actual)}")
        return problems
    if expected == "<set>":
        if actual is None:
            problems.append(f"{where}: expected a value, got none")
        return problems
    if isinstance(expected, str) and expected.startswith("<starts-with:") and expected.endswith(">"):
        prefix = expected[len("<starts-with:"):-1]
        if not (isinstance(actual, str) and actual.startswith(prefix)):
            problems.append(f"{where}: expected a value starting with {prefix!r}, got {json.dumps(actual)}")
        return problems
    if expected != actual and not (isinstance(expected, str) and str(actual) == expected and actual is not None
                                   and not isinstance(actual, (dict, list))):
        problems.append(f"{where}: expected {json.dumps(expected)}, got {json.dumps(actual)}")
    return problems


def summarize(obj: dict | None) -> dict | None:
    """The parts of an object a scenario talks about."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
           "namespace": meta.get("namespace"), "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
           "finalizers": meta.get("finalizers") or [], "deletionTimestamp": meta.get("deletionTimestamp"),
           "deletionGracePeriodSeconds": meta.get("deletionGracePeriodSeconds"),
           "ownerReferences": meta.get("ownerReferences") or []}
    if (obj.get("spec") or {}).get("finalizers") is not None:
        out["specFinalizers"] = obj["spec"]["finalizers"]
    status = obj.get("status") or {}
    if status.get("phase"):
        out["phase"] = status["phase"]
    if status.get("conditions"):
        out["conditions"] = status["conditions"]
    return {k: v for k, v in out.items() if v is not None}


# -- the runner ----------------------------------------------------------------------------------

@dataclass
class RefInfo:
    spec: ObjectSpec
    resource: ApiResource | None = None
    name: str | None = None
    uid: str | None = None
    created: dict | None = None


class _View:
    def __init__(self, runner: "Runner", objects: dict[str, dict | None]):
        self.runner = runner
        self.objects = objects

    def object(self, ref: str) -> dict | None:
        return self.objects.get(ref)

    def gc_observed(self, ref: str) -> bool:
        info = self.runner.refs.get(ref)
        return bool(info and info.uid and self.runner.target.gc_observed(info.uid))

    def expand(self, value):
        return self.runner.expand(value)


class Runner:
    def __init__(self, scenario: Scenario, target):
        self.scenario = scenario
        self.target = target
        self.client = target.client
        self.refs: dict[str, RefInfo] = {ref: RefInfo(spec) for ref, spec in scenario.refs().items()}
        self.step_bodies: dict[int, Any] = {}
        self.report = Report(scenario.id, scenario.title, str(scenario.path), target.description)
        self.mapper: RESTMapper | None = None
        self.invariants_active = False
        self._arm: tuple | None = None
        self.observations = 0
        self._violations: dict[int, list[str]] = {i: [] for i in range(len(scenario.invariants))}
        self._observed: dict[int, int] = {i: 0 for i in range(len(scenario.invariants))}
        self._lock = threading.Lock()
        self._first_conditions: dict[str, list] = {}

    # -- expansion ---------------------------------------------------------------------------------
    def expand(self, value):
        if isinstance(value, dict):
            return {k: self.expand(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        if not isinstance(value, str) or "${" not in value:
            return value
        whole = _REF_EXPR.fullmatch(value)
        if whole:
            return self._resolve(*whole.groups())
        return _REF_EXPR.sub(lambda m: str(self._resolve(*m.groups())), value)

    def _resolve(self, ref: str, fld: str, step: str | None):
        if step is not None:
            return _path_get(self.step_bodies.get(int(step)), fld)
        info = self.refs.get(ref)
        if info is None:
            raise ValueError(f"unknown ref {ref!r} in ${{{ref}.{fld}}}")
        if fld == "uid":
            return info.uid
        if fld == "name":
            return info.name or info.spec.name
        if fld == "namespace":
            return info.spec.namespace
        return _path_get(info.created, fld)

    # -- objects -----------------------------------------------------------------------------------
    def resource_for(self, info: RefInfo) -> ApiResource:
        if info.resource is None:
            resource = self.mapper.for_kind(info.spec.api_version, info.spec.kind)
            if resource is None:
                self.mapper.reset()
                resource = self.mapper.for_kind(info.spec.api_version, info.spec.kind)
            if resource is None:
                # kubectl's words for a kind the server does not serve; the run stops here
                raise ConfigError(self.scenario.path, f"ref {info.spec.ref}",
                                  f'no matches for kind "{info.spec.kind}" in version "{info.spec.api_version}": '
                                  f"{self.target.description} does not serve it (ensure CRDs are installed first)")
            info.resource = resource
        return info.resource

    def path_of(self, ref: str, subresource: str | None = None, collection: bool = False) -> str:
        info = self.refs[ref]
        resource = self.resource_for(info)
        namespace = info.spec.namespace if resource.namespaced else None
        name = None if collection else (info.name or info.spec.name)
        return self.client.path(resource.api_version, resource.resource, namespace, name, subresource)

    def fetch(self, ref: str) -> dict | None:
        info = self.refs[ref]
        if not (info.name or info.spec.name) or (info.uid is None and not info.spec.existing):
            return None         # not created (yet)
        code, body = self.client.request("GET", self.path_of(ref))
        if code == 404:
            return None
        if code >= 400:
            raise ApiError.from_status(code, body)
        if info.uid and (body.get("metadata") or {}).get("uid") != info.uid:
            return None         # another object under the same name
        return body

    def snapshot(self) -> dict[str, dict | None]:
        refs = list(self.refs)
        second: dict[str, dict | None] = {}
        for _ in range(5):
            first = {r: self.fetch(r) for r in refs}
            second = {r: self.fetch(r) for r in reversed(refs)}
            if all(_rv(first[r]) == _rv(second[r]) for r in refs):
                break
        return second

    def observe(self) -> _View:
        view = _View(self, self.snapshot())
        self.check_invariants(view)
        return view

    def _note_conditions(self, view) -> None:
        """The first status.conditions each object showed (a namespace's first deletion pass), for
        `expect.conditions` of a namespace that is gone at the end."""
        for ref in self.scenario.expect.get("conditions") or {}:
            if ref not in self._first_conditions:
                conditions = ((view.object(ref) or {}).get("status") or {}).get("conditions")
                if conditions:
                    self._first_conditions[ref] = conditions

    def check_invariants(self, view) -> None:
        self._note_conditions(view)
        if not self.invariants_active:
            return
        with self._lock:
            self.observations += 1
            for i, inv in enumerate(self.scenario.invariants):
                try:
                    applies = inv.while_.evaluate(view)
                    holds = not applies or inv.then.evaluate(view)
                except Exception as exc:      # a view that cannot answer is a violation to report
                    applies, holds = True, False
                    self._violations[i].append(f"could not evaluate: {exc}")
                if applies:
                    self._observed[i] += 1
                if not holds and len(self._violations[i]) < 5:
                    refs = sorted(inv.while_.refs() | inv.then.refs())
                    state = {r: summarize(view.object(r)) for r in refs}
                    self._violations[i].append(json.dumps(state, sort_keys=True))

    # -- store-level invariant checks (embedded) ---------------------------------------------------
    def _store_view(self) -> _View:
        server = self.target.server
        objects = {}
        for ref, info in self.refs.items():
            if info.uid is None and not info.spec.existing:
                objects[ref] = None
                continue
            rt = server.registry.catalog.for_kind(info.spec.api_version, info.spec.kind)
            name = info.name or info.spec.name
            obj = None
            if rt is not None:
                obj = server.store.get(rt.storage_key, info.spec.namespace or "" if rt.namespaced else "", name)
            if obj is not None and info.uid and obj["metadata"].get("uid") != info.uid:
                obj = None
            objects[ref] = obj
        return _View(self, objects)

    def _on_commit(self, event) -> None:
        if not self.invariants_active:
            self._note_conditions(self._store_view())
        if not self.invariants_active and self._arm is not None and self._arm == (event.key, event.namespace,
                                                                                   event.name):
            self.invariants_active = True       # the first write the first DELETE made
        if self.invariants_active:
            self.check_invariants(self._store_view())

    def _arm_on(self, ref: str) -> None:
        """Start checking invariants at the first write to `ref`'s object (embedded server)."""
        info = self.refs[ref]
        rt = self.target.server.registry.catalog.for_kind(info.spec.api_version, info.spec.kind)
        if rt is not None:
            self._arm = (rt.storage_key, (info.spec.namespace or "") if rt.namespaced else "",
                         info.name or info.spec.name)

    # -- running -----------------------------------------------------------------------------------
    def run(self) -> Report:
        started = time.monotonic()
        try:
            if self._playable():
                self._play()
        finally:
            if self.target.embedded:
                self.target.server.store.remove_listener(self._on_commit)
            skipped = getattr(self.target, "skipping", None)
            if skipped is not None and skipped.skipped > 0:
                self.report.notes.append(f"skipped {skipped.skipped:.1f} s in which the controllers only waited "
                                         "(their clock moved ahead)")
            self.report.duration_s = time.monotonic() - started
        return self.report

    def _playable(self) -> bool:
        missing = sorted(set(self.scenario.requires) - self.target.features)
        if missing:
            self.report.unsupported = f"requires {', '.join(missing)}, which {self.target.description} does not have"
            return False
        for name, state in self.scenario.controllers.items():
            if state == "stopped" or self.target.controller_available(name):
                continue
            if CATEGORY_CONTROLLERS.get(self.scenario.category) == name:
                self.report.unsupported = (f"the case exercises the {name} controller, which labkit does not have yet "
                                           f"(controllers.{name}: {state})")
                return False
            self.report.notes.append(f"controllers.{name}: {state}, but labkit has no {name} controller; "
                                     f"this {self.scenario.category} case does not depend on it")
        if not self.target.embedded:
            self.report.notes.append("real cluster: its own controllers run; controllers: settings are not applied")
            if self.scenario.emulated_version:
                self.report.notes.append(f"emulatedVersion {self.scenario.emulated_version} applies to the embedded "
                                         "server only: the cluster runs its own version")
        return True

    def _play(self) -> None:
        s = self.scenario
        self.mapper = RESTMapper(self.client)
        if self.target.embedded:
            for name, state in s.controllers.items():
                if state == "running" and self.target.controller_available(name):
                    self.target.start_controller(name)
            if "serviceaccount" not in s.controllers:
                # kube-controller-manager's serviceaccount controller runs in every cluster unless a case
                # stops it: the ServiceAccount admission plugin refuses a Pod whose namespace has no
                # ServiceAccount `default` (plugin/pkg/admission/serviceaccount/admission.go)
                self.target.start_controller("serviceaccount")
            self.target.server.store.add_listener(self._on_commit)
        if s.discovery:
            if self.target.embedded:
                self.target.pin_discovery(pinned_resources(s.discovery))
            else:
                self.report.notes.append("discovery: not pinned on a real cluster (its controller discovers itself)")
        if not self._setup():
            return
        gc_state = s.controllers.get("garbagecollector")
        if gc_state == "started-after-setup" and not any(st.op == "restart-gc" for st in s.steps):
            self.target.start_controller("garbagecollector")
        if not self._await_gc_observation():
            return
        deletes = [st.index for st in s.steps if st.op == "delete"]
        first_delete = deletes[0] if deletes else None
        if first_delete is None:
            self.invariants_active = True
        for step in s.steps:
            if step.index == first_delete and self.target.embedded:
                self._arm_on(step.target)
            result = self._step(step)
            if step.index == first_delete and not self.invariants_active:
                later = [i for i in deletes if i > step.index]
                if (result.get("code") or 0) >= 400 and later:
                    # a refused DELETE writes nothing: the action the invariants describe starts
                    # with the next delete step (else a commit in between, a controller's, say,
                    # would be judged against a deletion that has not begun)
                    first_delete, self._arm = later[0], None
                else:
                    self.invariants_active = True
            self.report.steps.append(result)
        self._final()

    def _setup(self) -> bool:
        for ns in self.scenario.namespaces:
            code, body = self.client.request("POST", "/api/v1/namespaces",
                                             body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            if code >= 400 and not (code == 409 and not self.target.embedded):
                self.report.checks.append(Check(f"setup: namespace {ns}", False, _error_text(code, body)))
                return False
        for spec in self.scenario.objects:
            ok, detail = self._create(spec)
            if not ok:
                self.report.checks.append(Check(f"setup: object {spec.ref}", False, detail))
                return False
        return True

    def _await_gc_observation(self, timeout: float = 30.0) -> bool:
        """Upstream's tests act on objects that have existed for a while (an RC manager made the
        Pods, the test waited for them), so the garbage collector's graph holds them before the
        first DELETE; a replay creates them an instant before its first step. Without this wait a
        Foreground DELETE can reach the graph before its dependents do: the owner has no blocking
        dependent yet and the GC removes its finalizer at once (processDeletingDependentsItem in
        pkg/controller/garbagecollector/garbagecollector.go), as it would on a cluster whose
        informers lag. So the steps start once the GC has observed every object the setup made."""
        made = [(info.spec.api_version, info.spec.kind, info.uid) for info in self.refs.values()
                if info.uid and info.created is not None]
        deadline = time.monotonic() + timeout
        while True:
            unseen = self.target.gc_unseen(made)
            if not unseen:
                return True
            if time.monotonic() >= deadline:
                names = ", ".join(f"{kind} {uid}" for _, kind, uid in unseen[:5])
                self.report.checks.append(Check("setup: the garbage collector observed every object", False,
                                                f"not observed within {timeout:g} s: {names}"))
                return False
            time.sleep(0.02)

    def _create(self, spec: ObjectSpec) -> tuple[bool, str]:
        info = self.refs[spec.ref]
        if spec.existing:
            obj = self.fetch(spec.ref)
            if obj is None:
                return False, f"existing object {spec.kind} {spec.name} not found"
            info.uid, info.name, info.created = obj["metadata"]["uid"], obj["metadata"]["name"], obj
            return True, ""
        body = self.expand(spec.body())
        code, answer = self.client.request("POST", self.path_of(spec.ref, collection=True), body=body)
        if code >= 400:
            return False, _error_text(code, answer)
        info.uid, info.name, info.created = answer["metadata"]["uid"], answer["metadata"]["name"], answer
        return True, ""

    # -- steps -------------------------------------------------------------------------------------
    def _step(self, step: Step) -> dict:
        result = {"index": step.index, "op": step.op, "description": step.describe(), "ok": True, "detail": ""}
        started = time.monotonic()
        try:
            handler = getattr(self, "_op_" + step.op.replace("-", "_"))
            handler(step, result)
        except ApiError as exc:
            result.update(ok=False, detail=f"{exc.code} {exc.reason}: {exc.message}")
        except ValueError as exc:
            result.update(ok=False, detail=str(exc))
        result["seconds"] = round(time.monotonic() - started, 3)
        return result

    def _answer(self, step: Step, result: dict, code: int, body) -> None:
        result["code"] = code
        self.step_bodies[step.index] = body
        expect = self.expand(step.raw.get("expect") or {})
        problems = _check_answer(expect, code, body)
        if not expect and code >= 400:
            problems.append(_error_text(code, body))
        if problems:
            result.update(ok=False, detail="; ".join(problems))
        else:
            result["detail"] = f"{code}" + (f" {body.get('reason')}" if isinstance(body, dict) and code >= 400 else "")
        self.observe()

    def _op_create(self, step: Step, result: dict) -> None:
        spec = step.object
        info = self.refs[spec.ref]
        code, body = self.client.request("POST", self.path_of(spec.ref, collection=True), body=self.expand(spec.body()))
        if code < 400:
            info.uid, info.name, info.created = body["metadata"]["uid"], body["metadata"]["name"], body
        self._answer(step, result, code, body)

    def _op_find(self, step: Step, result: dict) -> None:
        spec = step.object
        info = self.refs[spec.ref]
        selector = spec.raw.get("labelSelector")
        deadline = time.monotonic() + float(step.raw.get("timeout_s") or 30)
        while True:
            if selector:
                code, body = self.client.request("GET", self.path_of(spec.ref, collection=True),
                                                 {"labelSelector": self.expand(selector)})
                items = sorted((body or {}).get("items") or [], key=lambda o: o["metadata"].get("creationTimestamp", ""))
                found = items[0] if code == 200 and items else None
            else:
                code, found = self.client.request("GET", self.path_of(spec.ref))
                found = found if code == 200 else None
            if found is not None:
                info.uid, info.name, info.created = found["metadata"]["uid"], found["metadata"]["name"], found
                result["detail"] = f"found {spec.kind} {found['metadata']['name']}"
                self.observe()
                return
            if time.monotonic() > deadline:
                result.update(ok=False, detail=f"no {spec.kind} {selector or spec.name} appeared")
                return
            time.sleep(POLL)

    def _op_delete(self, step: Step, result: dict) -> None:
        body = self.expand(step.raw["body"]) if "body" in step.raw else None
        query = {k: str(v) for k, v in self.expand(step.raw.get("query") or {}).items()}
        code, answer = self.client.request("DELETE", self.path_of(step.target), query or None, body=body)
        self._answer(step, result, code, answer)

    def _op_update(self, step: Step, result: dict) -> None:
        sub = step.raw.get("subresource")
        current = self.fetch(step.target)
        if current is None:
            raise ApiError(404, "NotFound", f"{step.target} does not exist")
        for dotted, value in self.expand(step.raw["set"]).items():
            _path_set(current, dotted, value)
        code, body = self.client.request("PUT", self.path_of(step.target, sub), body=current)
        self._answer(step, result, code, body)

    def _op_patch(self, step: Step, result: dict) -> None:
        from labkit.apiserver.client import PATCH_TYPES
        patch = self.expand(step.raw["patch"])
        data = patch.encode() if isinstance(patch, str) else json.dumps(patch).encode()
        code, body = self.client.request("PATCH", self.path_of(step.target, step.raw.get("subresource")),
                                         {"fieldManager": "labkit-scenario"} if step.raw["type"] == "apply" else None,
                                         body=data, content_type=PATCH_TYPES[step.raw["type"]])
        self._answer(step, result, code, body)

    def _op_finalize(self, step: Step, result: dict) -> None:
        finalizers = self.expand(step.raw["spec_finalizers"])
        for _ in range(5):          # GET, replace spec.finalizers, PUT .../finalize; retried on conflict
            current = self.fetch(step.target)
            if current is None:
                raise ApiError(404, "NotFound", f"{step.target} does not exist")
            current.setdefault("spec", {})["finalizers"] = finalizers
            code, body = self.client.request("PUT", self.path_of(step.target, "finalize"), body=current)
            if code != 409:
                break
        self._answer(step, result, code, body)

    def _op_wait(self, step: Step, result: dict) -> None:
        # timeouts and durations are on the controllers' clock (EmbeddedTarget's skip_idle_time)
        clock = self.target.clock
        timeout = float(step.raw.get("timeout_s") or (60 if step.raw.get("for") == "settle" else 30))
        if step.until is not None:
            deadline = clock() + timeout
            while True:
                view = self.observe()
                if step.until.evaluate(view):
                    return
                if clock() > deadline:
                    state = {r: summarize(view.object(r)) for r in sorted(step.until.refs())}
                    result.update(ok=False, detail=f"not true after {timeout:g} s; last observed: "
                                                   + json.dumps(state, sort_keys=True))
                    return
                if not self.target.skip_idle_time(deadline):
                    time.sleep(POLL)
        value = str(step.raw["for"])
        if value == "settle":
            if not self.target.settle(timeout):
                result.update(ok=False, detail=f"the controllers did not settle within {timeout:g} s")
            self.observe()
            return
        deadline = clock() + float(value[:-1])
        while clock() < deadline:
            self.observe()
            if not self.target.skip_idle_time(deadline, to_limit=True):
                time.sleep(min(0.1, max(0.0, deadline - clock())))

    def _op_assert(self, step: Step, result: dict) -> None:
        view = self.observe()
        failed = [p for p in step.that if not p.evaluate(view)]
        if failed:
            refs = sorted(set().union(*(p.refs() for p in failed)))
            state = {r: summarize(view.object(r)) for r in refs}
            result.update(ok=False, detail="false: " + "; ".join(str(p) for p in failed) + "; observed: "
                                           + json.dumps(state, sort_keys=True))

    def _op_restart_gc(self, step: Step, result: dict) -> None:
        if not self.target.embedded:
            result["detail"] = "skipped: the runner cannot restart a real cluster's garbage collector"
            return
        self.target.restart_controller("garbagecollector")
        self.observe()

    # -- final state -------------------------------------------------------------------------------
    def _final(self) -> None:
        s, report = self.scenario, self.report
        if not self.target.settle(30):
            report.notes.append("the controllers were still busy 30 s after the last step")
        view = self.observe()
        for ref in s.expect.get("present", []):
            report.checks.append(Check(f"present {ref}", view.object(ref) is not None,
                                       "" if view.object(ref) is not None else "absent (GET answers 404)"))
        for ref in s.expect.get("absent", []):
            obj = view.object(ref)
            report.checks.append(Check(f"absent {ref}", obj is None,
                                       "" if obj is None else f"still present: {json.dumps(summarize(obj))}"))
        for ref, fields in (s.expect.get("objects") or {}).items():
            obj = view.object(ref)
            if obj is None:
                report.checks.append(Check(f"object {ref}", False, "absent"))
                continue
            problems = match(self.expand(fields), obj, dotted_keys=True)
            report.checks.append(Check(f"object {ref}", not problems, "; ".join(problems)))
        for i, inv in enumerate(s.invariants):
            violations = self._violations[i]
            detail = (f"held at {self._observed[i]} of {self.observations} observations where it applied"
                      if not violations else f"violated ({len(violations)}x), first: {violations[0]}")
            report.invariants.append({"while": str(inv.while_), "then": str(inv.then), "ok": not violations,
                                      "observations": self.observations, "applied": self._observed[i],
                                      "detail": detail})
        self._check_events()
        self._check_conditions(view)
        self._check_controller_requests()
        report.objects = {ref: view.object(ref) for ref in self.refs}
        report.decisions = [d for d in self.target.decisions() if d.get("level") == "info"]

    def _check_events(self) -> None:
        expected = self.expand(self.scenario.expect.get("events") or [])
        if not expected:
            return
        code, body = self.client.request("GET", "/api/v1/events")
        events = body.get("items", []) if code == 200 else []
        for i, want in enumerate(expected):
            found = any(_event_matches(want, e, self) for e in events)
            report_what = f"event {want.get('reason', '')} {want.get('type', '')}".strip()
            seen = [f"{e.get('type')} {e.get('reason')}: {e.get('message')}" for e in events][:5]
            self.report.checks.append(Check(report_what, found, "" if found else f"no matching event; saw {seen}"))

    def _check_conditions(self, view) -> None:
        for ref, wanted in (self.scenario.expect.get("conditions") or {}).items():
            wanted = self.expand(wanted)
            obj = view.object(ref)
            if obj is None and ref in self._first_conditions:
                # gone at the end: compare with the conditions it showed after the first pass
                actual = self._first_conditions[ref]
            else:
                actual = ((obj or {}).get("status") or {}).get("conditions") or []
            by_type = {c.get("type"): c for c in actual}
            for cond in wanted:
                got = by_type.get(cond.get("type"))
                problems = []
                if got is None:
                    problems.append("missing")
                else:
                    for key in ("status", "reason"):
                        if key in cond and got.get(key) != cond[key]:
                            problems.append(f"{key}: expected {cond[key]!r}, got {got.get(key)!r}")
                    if "message" in cond and got.get("message") != cond["message"]:
                        regex = cond.get("message_regex")
                        if self.target.embedded or not regex or not re.fullmatch(regex, got.get("message", "")):
                            problems.append(f"message: expected {cond['message']!r}, got {got.get('message')!r}")
                self.report.checks.append(Check(f"condition {ref} {cond.get('type')}", not problems, "; ".join(problems)))
            order = [c.get("type") for c in actual if c.get("type") in {w.get("type") for w in wanted}]
            want_order = [w.get("type") for w in wanted if w.get("type") in by_type]
            self.report.checks.append(Check(f"condition order {ref}", order == want_order,
                                            "" if order == want_order else f"expected {want_order}, got {order}"))

    def _check_controller_requests(self) -> None:
        expected = self.scenario.expect.get("controller_requests")
        if not expected:
            return
        if not self.target.embedded:
            self.report.notes.append("controller_requests: not checked on a real cluster (no request log)")
            return
        from labkit.controllers.manager import CONTROLLERS
        user = CONTROLLERS["namespace"].user
        seen = {f"{_VERB_METHODS.get(e.get('verb'), e.get('verb', '').upper())} {e.get('requestURI', '').split('?')[0]}"
                for e in self.target.audit_events() if (e.get("user") or {}).get("username") == user}
        for request in self.expand(expected):
            self.report.checks.append(Check(f"controller request {request}", request in seen,
                                            "" if request in seen else "not sent by the namespace controller"))


def pinned_resources(raw) -> list[ApiResource]:
    """A scenario's `discovery:` as the namespace controller's discovery result: a list of
    APIResourceList-like entries `{groupVersion, resources | apiResources: [{name, namespaced,
    kind, verbs}]}` (a mapping group/version -> resources is accepted too). Only namespaced
    resources count, as with ServerPreferredNamespacedResources."""
    entries = raw
    if isinstance(raw, dict):
        entries = raw.get("resources") if isinstance(raw.get("resources"), list) and not raw.get("groupVersion") \
            else [{"groupVersion": gv, "resources": rs} for gv, rs in raw.items()]
    found = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        gv = entry.get("groupVersion") or entry.get("GroupVersion") or ""
        group, _, version = gv.rpartition("/")
        for r in entry.get("resources") or entry.get("apiResources") or entry.get("APIResources") or []:
            name = r.get("name") or r.get("Name") or ""
            if not name or "/" in name or not r.get("namespaced", r.get("Namespaced", True)):
                continue
            found.append(ApiResource(group, version, name, r.get("kind") or r.get("Kind") or "", True,
                                     tuple(r.get("verbs") or r.get("Verbs") or ())))
    return found


def _rv(obj: dict | None):
    return None if obj is None else (obj.get("metadata") or {}).get("resourceVersion")


def _path_set(obj: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    node = obj
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value


def _error_text(code: int, body) -> str:
    if isinstance(body, dict) and body.get("kind") == "Status":
        return f"{code} {body.get('reason', '')}: {body.get('message', '')}"
    return f"HTTP {code}"


def _check_answer(expect: dict, code: int, body) -> list[str]:
    problems = []
    if "code" in expect and expect["code"] != code:
        problems.append(f"code: expected {expect['code']}, got {code} ({_error_text(code, body)})")
    is_status = isinstance(body, dict) and body.get("kind") == "Status"
    if expect.get("returns") == "object" and is_status:
        problems.append(f"expected the object back, got a Status: {json.dumps(body)}")
    if expect.get("returns") == "status" and not is_status:
        problems.append(f"expected a Status back, got {body.get('kind') if isinstance(body, dict) else body!r}")
    if "object" in expect:
        problems += match(expect["object"], body, "object")
    status = body if is_status else {}
    for key in ("reason", "message"):
        if key in expect and status.get(key) != expect[key]:
            problems.append(f"{key}: expected {expect[key]!r}, got {status.get(key)!r}")
    if "message_contains" in expect and expect["message_contains"] not in (status.get("message") or ""):
        problems.append(f"message: expected it to contain {expect['message_contains']!r}, got {status.get('message')!r}")
    if "details" in expect:
        problems += match(expect["details"], status.get("details"), "details")
    return problems


def _event_matches(want: dict, event: dict, runner: Runner) -> bool:
    for key in ("type", "reason", "message"):
        if key in want and event.get(key) != want[key]:
            return False
    if "message_contains" in want and want["message_contains"] not in (event.get("message") or ""):
        return False
    if "namespace" in want and (event.get("metadata") or {}).get("namespace") != want["namespace"]:
        return False
    if "object" in want:
        info = runner.refs.get(want["object"])
        if info is None or (event.get("involvedObject") or {}).get("uid") != info.uid:
            return False
    if "involvedObject" in want and match(want["involvedObject"], event.get("involvedObject")):
        return False
    return True


def run_scenario(path: str | Path, kubeconfig: str | None = None, context: str | None = None,
                 skip_idle_time: bool = False) -> Report:
    """`skip_idle_time`: on the embedded server, skip the time in which the controllers only wait
    (EmbeddedTarget); a cluster always plays in real time."""
    from labkit.gc.scenario import load
    scenario = load(path)
    target = ClusterTarget(kubeconfig, context) if kubeconfig else \
        EmbeddedTarget(scenario.emulated_version, skip_idle_time=skip_idle_time)
    try:
        return Runner(scenario, target).run()
    finally:
        target.close()

