"""Checks of the namespace lab.

The truth comes from the live API server (namespaces, their conditions, every
namespaced resource type through discovery), labkit's NamespaceLifecycle plugin (what a create in
a Terminating namespace is answered) and the API server's audit log (who sent which finalize
request) — never from answers stored here. On a real cluster (`labkit run namespace
--kubeconfig`) there is no audit log to read: the checks that need it say so and judge the live
state only.

Audit events count from when the exercise's namespace was last built (`labkit run`, `labkit
reset namespace EXERCISE`). Where the mechanism judged is still settling, checks wait for it,
bounded, so that the verdict does not depend on machine load: an APIService until its Service's
EndpointSlices are published and its Available condition stayed the same for 2 s; a namespace
that nothing holds any more until the namespace controller removed it (20 s at most). Where the
controllers work on a longer period (the pod garbage collector's 20 s, the namespace controller's
backoff) they say so ("check again shortly"). Feedback on answers says where to look, never the
right value (that goes only into `right_answer`); it names an object the student listed wrongly,
but neither which nor how many of the few-valued cells (a count, a resource type or finalizer of a
condition, true/false) are wrong (README, "Predictions").

The checks of exercises that change live state are `judge_<name>(ctx, observe_<name>(ctx))`:
the observation is plain data, and labs/namespace/mutants/ judges near-misses of it in-process.
"""

import difflib
import json
import re

from labkit import predictions
from labkit.apiserver.audit import received_at
from labkit.exercises import LIVE, AnswerMalformed, CheckFailed, NotJudged, settle, wait_for

CONTROLLER_USER = "system:serviceaccount:kube-system:namespace-controller"
_REMAINING = re.compile(r"^(\S+) has (\d+) resource instances$")
_HELD = re.compile(r"^(\S+) in (\d+) resource instances$")
NO_AUDIT = ("on a real cluster labkit has no audit log, so {what} could not be checked; judged by the live "
            "state only")


def _lab(env):
    """The lab's lab.py (target, client, original_uid)."""
    return env.lab.environment_module()


# -- live state --------------------------------------------------------------------------------

def _namespace(c, name):
    code, body = c.request("GET", f"/api/v1/namespaces/{name}")
    return body if code == 200 else None


def _audit(ctx):
    """The API server's audit events since the exercise's namespace was built, but the namespace
    controller's (most of the log: each namespace held by a finalizer is swept again every 8 s; only
    the status it writes is judged, _discovery_failures_written); None on a real cluster."""
    return _lab(ctx.env).target(ctx.env).audit(since=ctx.ready_time, exclude_users=(CONTROLLER_USER,))


def _finalize_requests(ctx, namespace):
    """Every successful PUT …/namespaces/<namespace>/finalize: (user, spec.finalizers sent, time);
    None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    found = []
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("name"), ref.get("subresource"), e.get("verb")) != \
                ("namespaces", namespace, "finalize", "update"):
            continue
        if (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        sent = ((e.get("requestObject") or {}).get("spec") or {}).get("finalizers") or []
        found.append({"user": (e.get("user") or {}).get("username", ""), "finalizers": list(sent),
                      "time": e.get("requestReceivedTimestamp", "")})
    return found


def _force_finalized(ctx, namespace):
    """finalize requests by anyone but the namespace controller that removed `kubernetes`; None
    on a real cluster (no audit log)."""
    requests = _finalize_requests(ctx, namespace)
    if requests is None:
        return None
    return [r for r in requests if r["user"] != CONTROLLER_USER and "kubernetes" not in r["finalizers"]]


def _stored_objects(c, namespace):
    """Every object stored under `namespace`, as <resource>[.<group>]/<name> (events excluded)."""
    found = c.discover()
    objects = {}
    for r in found.resources:
        if not r.namespaced or "list" not in r.verbs or found.preferred.get(r.group) != r.version:
            continue
        if (r.group, r.resource) == ("", "events"):
            continue
        code, body = c.request("GET", c.path(r.api_version, r.resource, namespace))
        if code != 200:
            continue
        for item in body.get("items") or []:
            key = f"{r.resource}.{r.group}/{item['metadata']['name']}" if r.group else \
                f"{r.resource}/{item['metadata']['name']}"
            objects[key] = item
    return objects


def _spec_edit_verb(ctx, namespace) -> str:
    """"patched" or "updated" when the student changed the namespace itself (not a subresource)
    since the exercise began, else ""."""
    events = _audit(ctx) or []
    edits = [e for e in events if (e.get("objectRef") or {}).get("resource") == "namespaces"
             and (e.get("objectRef") or {}).get("name") == namespace and not (e.get("objectRef") or {}).get("subresource")
             and e.get("verb") in ("update", "patch") and (e.get("user") or {}).get("username") != CONTROLLER_USER
             and (e.get("responseStatus") or {}).get("code", 0) < 300]
    return {"patch": "patched", "update": "updated"}[edits[-1]["verb"]] if edits else ""


def _spec_edit_note(verb) -> str:
    if not verb:
        return ""
    return (f". You {verb} the namespace itself: a normal update keeps spec.finalizers as they are "
            "(only the finalize subresource changes them)")


def _spec_edits(ctx, namespace) -> str:
    """A note when the student updated or patched the namespace itself since the exercise began."""
    return _spec_edit_note(_spec_edit_verb(ctx, namespace))


def observe_gone(ctx, c, namespace, wait: bool = True) -> dict:
    """What the checks that want `namespace` gone judge: whether the lab's namespace still exists
    (waiting, bounded, while nothing holds it any more: the namespace controller then finishes on
    one of its next passes), who force-finalized it, what is still stored under its name."""
    original = _lab(ctx.env).original_uid(ctx.env, namespace)

    def look():
        ns = _namespace(c, namespace)
        if ns is None or ns["metadata"]["uid"] != original:
            return None
        held = sorted(k for k, obj in _stored_objects(c, namespace).items() if obj["metadata"].get("finalizers"))
        return {"phase": (ns.get("status") or {}).get("phase"), "deleting": bool(ns["metadata"].get("deletionTimestamp")),
                "held": len(held), "held_by": held}
    current = look()
    if wait and current is not None and current["deleting"] and not current["held"]:
        # nothing holds it: the namespace controller removes it within one requeue (8 s), give it two
        def finished():
            now = look()
            return "gone" if now is None else (now if now["held"] or not now["deleting"] else None)
        found = wait_for(finished, timeout=20, interval=0.5)
        current = None if found == "gone" else (found or look())
    forced = _force_finalized(ctx, namespace)
    return {"namespace": current, "spec_edit": _spec_edit_verb(ctx, namespace),
            "forced": None if forced is None else [{"user": f["user"], "finalizers": f["finalizers"]} for f in forced],
            "stored": sorted(_stored_objects(c, namespace)) if current is None else []}


def judge_gone(ctx, namespace, seen: dict) -> str:
    """The namespace the lab made is gone, emptied by the namespace controller (not forced), and
    nothing is stored under its name. Returns a note when the audit log could not be read (a real
    cluster): then only the live state says it was not forced."""
    ns = seen["namespace"]
    edit = _spec_edit_note(seen.get("spec_edit"))
    if ns is not None:
        why = (f"{ns['held']} object(s) in it still carry finalizers: `labkit ns explain {namespace}` says which"
               if ns["held"] or not ns["deleting"] else
               "nothing in it carries a finalizer any more, but the namespace controller has not finished it yet: "
               "check again in a few seconds")
        raise CheckFailed(f"namespace {namespace} still exists ({ns['phase']}); {why}" + edit)
    forced = seen["forced"]
    if forced:
        raise CheckFailed(f"namespace {namespace} was force-finalized by {forced[0]['user']} (PUT …/finalize with "
                          f"spec.finalizers {forced[0]['finalizers']}): that is not a fix — `labkit reset namespace "
                          f"{ctx.exercise.id}` and do it without touching the namespace's finalizers")
    if seen["stored"]:
        raise CheckFailed(f"objects are still stored under {namespace}: {', '.join(seen['stored'])}")
    return "" if forced is not None else " (" + NO_AUDIT.format(what="who finalized it") + ")"


# -- (a) conditions --------------------------------------------------------------------------

def _counts(condition, pattern, prefix):
    if not condition or condition.get("status") != "True":
        return {}
    text = condition.get("message", "")
    if not text.startswith(prefix):
        return {}
    counts = {}
    for part in text[len(prefix):].split(", "):
        m = pattern.match(part.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def _key_form_problems(got: dict, what: str) -> list[str]:
    """Keys of the student's `what` mapping that cannot be what its condition writes, whatever the
    namespace holds: judged by their form only, so naming them tells nothing of the answer.
    NamespaceContentRemaining writes resource types as <resource>.<group> (the core group empty:
    `secrets.`); NamespaceFinalizersRemaining writes finalizer names, which are qualified names
    (apimachinery's IsQualifiedName, as metadata.finalizers validates them)."""
    from labkit.apiserver.validation import qualified_name_problems
    problems = []
    for key in sorted(str(k).strip() for k in got):
        if what == "remaining" and "/" in key:
            problems.append(f"remaining: {key!r} is not a resource type: the condition writes <resource>.<group> "
                            "(finalizer names go under `finalizers`)")
        elif what == "remaining" and "." not in key:
            problems.append(f"remaining: {key!r} lacks the group: the condition writes <resource>.<group>, and the "
                            "core group is empty, so its resources end with a trailing dot (`configmaps.`)")
        elif what == "finalizers" and qualified_name_problems(key):
            problems.append(f"finalizers: {key!r} is not a finalizer name (a qualified name, `<prefix>/<name>` "
                            "or `<name>`, as in metadata.finalizers; the resource types go under `remaining`)")
    not_numbers = sorted(str(k).strip() for k, v in got.items() if isinstance(v, bool) or not isinstance(v, int))
    if not_numbers:
        problems.append(f"{what}: the count of {', '.join(not_numbers)} should be a whole number (no quotes)")
    return problems


def _same_entries(got: dict, truth: dict) -> bool:
    return {str(k).strip(): v for k, v in got.items()} == truth


def _released_content(ctx, namespace) -> list[str]:
    """The student's successful writes that changed which finalizers hold objects stored in
    `namespace`: a patch that touches metadata.finalizers, an update that sends none, and a create
    of an object that carries finalizers (the namespace controller cannot delete it either, so the
    conditions count it and its finalizers beside the lab's). Empty on a real cluster (no audit
    log)."""
    released = []
    for e in _audit(ctx) or []:
        ref = e.get("objectRef") or {}
        if ref.get("namespace") != namespace or ref.get("subresource") \
                or e.get("verb") not in ("create", "patch", "update") \
                or (e.get("user") or {}).get("username", "").startswith("system:") \
                or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        body = e.get("requestObject")
        sent = ((body.get("metadata") or {}).get("finalizers") if isinstance(body, dict) else None)
        if e["verb"] == "create":
            if sent:
                name = ref.get("name") or ((body.get("metadata") or {}).get("name") if isinstance(body, dict) else "")
                released.append(f"create {ref.get('resource')}/{name} with {', '.join(map(str, sent))}")
        elif (e["verb"] == "patch" and "finalizers" in json.dumps(body or {})) or (e["verb"] == "update" and not sent):
            released.append(f"{e['verb']} {ref.get('resource')}/{ref.get('name')}")
    return list(dict.fromkeys(released))


def check_conditions(ctx):
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    released = _released_content(ctx, name)
    if released:
        # the conditions are the namespace controller's last pass: until its next one they still
        # count what a released finalizer no longer holds, and then the namespace goes
        # a create adds finalizers; a patch or an update may add or remove them (its request alone
        # does not say which): "changed"
        added = [r for r in released if r.startswith("create ")]
        verb = "added finalizers to" if len(added) == len(released) else \
            "changed and added finalizers of" if added else "changed the finalizers of"
        raise CheckFailed(f"you {verb} {name}'s content yourself ({', '.join(released)}): the exercise is about "
                          "what the namespace the lab built waits for, and that changes what it waits for — "
                          f"`labkit reset namespace {ctx.exercise.id}`, delete {name} again and read its "
                          "conditions without touching its content",
                          expected=f"the content of {name} keeps its finalizers, and nothing that carries "
                                   "finalizers is added to it", observed=", ".join(released),
                          observed_in=LIVE)
    ns = _namespace(c, name)
    if ns is None:
        raise CheckFailed(f"namespace {name} is gone, and its conditions with it: `labkit reset namespace "
                          f"{ctx.exercise.id}`, then delete it and read the conditions while it is Terminating")
    if not ns["metadata"].get("deletionTimestamp"):
        raise NotJudged(f"namespace {name} is not being deleted: delete it first "
                        f"(kubectl delete namespace {name} --wait=false)")

    def conditions():
        current = _namespace(c, name) or {}
        pods = c.request("GET", f"/api/v1/namespaces/{name}/pods")[1].get("items") or []
        return len(pods), {x["type"]: x for x in (current.get("status") or {}).get("conditions") or []}

    seen = settle(conditions, timeout=1.5, stable_for=0.3)
    pods, by_type = seen.value
    if not seen.settled or pods or "NamespaceContentRemaining" not in by_type:
        raise NotJudged(f"the namespace controller is still working on {name} (its first pass comes 5 s after the "
                        "DELETE, and pods go first): check again in a few seconds")
    remaining = _counts(by_type.get("NamespaceContentRemaining"), _REMAINING, "Some resources are remaining: ")
    held = _counts(by_type.get("NamespaceFinalizersRemaining"), _HELD,
                   "Some content in the namespace has finalizers remaining: ")
    data = ctx.answer()
    got_remaining = ctx.answer_field(data, "remaining", dict)
    got_held = ctx.answer_field(data, "finalizers", dict)
    return grade_conditions_answer(ctx, name, got_remaining, got_held, remaining, held)


def grade_conditions_answer(ctx, name: str, got_remaining: dict, got_held: dict, remaining: dict, held: dict):
    """The verdict on the answer's two mappings against the counts the namespace's conditions
    NamespaceContentRemaining (`remaining`) and NamespaceFinalizersRemaining (`held`) give."""
    where = (f"read the conditions NamespaceContentRemaining (resource types and how many objects of each) and "
             f"NamespaceFinalizersRemaining (finalizers and how many objects each holds) of namespace {name} "
             f"(`kubectl get ns {name} -o yaml`) again, and copy every entry with its count")
    observed = {"remaining": got_remaining, "finalizers": got_held}
    right = {"remaining": remaining, "finalizers": held}
    problems = _key_form_problems(got_remaining, "remaining") + _key_form_problems(got_held, "finalizers")
    if problems:
        # a key whose form is wrong whatever the namespace holds: the answer cannot be read as the
        # conditions' entries (malformed, not counted as a wrong answer: README, Predictions)
        raise AnswerMalformed("\n".join(problems) + f"\nThen {where}", expected=f"the entries of namespace {name}'s "
                              "conditions", observed=observed, right_answer=right)
    wrong = [what for what, got, truth in (("remaining", got_remaining, remaining), ("finalizers", got_held, held))
             if not _same_entries(got, truth)]
    if wrong:
        # which entries are wrong, or how many, is not said: the types a namespace can hold and
        # the finalizers it can wait for are few, and so are the counts (CheckContext.grid_feedback)
        raise CheckFailed(ctx.grid_feedback(wrong, len(got_remaining) + len(got_held), "entries", noun="answer",
                                            advice=where),
                          expected=f"the entries of namespace {name}'s conditions", observed=observed,
                          right_answer=right)
    return ctx.passed(f"right: {name} waits for " + ", ".join(f"{n} {k}" for k, n in remaining.items())
                      + " held by " + ", ".join(held))


# -- (b) create in a Terminating namespace -----------------------------------------------------

def _normalize(text):
    text = str(text).strip().strip("'\"")
    for prefix in ("Error from server (Forbidden): ", "error: failed to create configmap: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return " ".join(text.split())


_KUBECTL_PREFIX = re.compile(r"^\s*Error from server \((\w+)\):\s*")


def check_terminating_create(ctx):
    """Graded against the situation the exercise describes: the lab's namespace, Terminating. The
    API server's answer comes from labkit's NamespaceLifecycle admission plugin
    (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go, Lifecycle.Admit), see
    _create_answer."""
    name, cm = ctx.params["namespace"], ctx.params["configmap"]
    c = _lab(ctx.env).client(ctx.env)
    ns = _namespace(c, name)
    reset = f"`labkit reset namespace {ctx.exercise.id}` builds it again"
    if ns is None or ns["metadata"]["uid"] != _lab(ctx.env).original_uid(ctx.env, name) \
            or not ns["metadata"].get("deletionTimestamp"):
        raise CheckFailed(f"the situation the exercise describes has changed: namespace {name} is not the lab's "
                          f"Terminating namespace any more, and your prediction is judged against that one — {reset}")
    code, body = _create_answer(ctx, c, name, cm)
    if code < 300:
        raise CheckFailed(f"namespace {name} accepts new content now (it is no longer Terminating): {reset}")
    truth = body.get("message", "")
    graded, note = _prediction_file(ctx)
    answer = ctx.answer_field(graded, "error", str)
    tried = _first_try(ctx, name)
    # a try before a reset of the exercise counts too (labkit.predictions' reset rule: the lab's
    # keep_student_work kept it; only `labkit reset ... --forget-prediction` forgets it)
    earlier = predictions.kept_trial(ctx.lab.id, ctx.exercise.id)
    if earlier is not None and (tried is None or earlier["at"] <= tried["at"]):
        tried = earlier
    kept = predictions.kept(ctx.lab.id, ctx.exercise.id)
    if tried is not None and kept is not None and kept.at <= tried["at"]:
        tried = None        # `labkit gc run` kept the prediction before the try: that copy is judged
    if tried is not None and _answer_written_at(ctx) >= tried["at"]:
        # a prediction is judged as it stood before the student's first create in the namespace:
        # an answer file written (or changed) after that create is what the server answered, not a
        # prediction, so it earns nothing
        where = name if tried["namespace"] == name and not tried.get("server") else \
            f"{tried['namespace']}, a namespace being terminated too,"
        reset = (" (a reset since then built it again, but does not undo what that try showed)"
                 if tried is earlier else "")
        raise CheckFailed(f"you sent a request into {where} yourself ({tried['what']}, at {tried['time']}) before your "
                          f"prediction was written, and changed your answer file after it{reset}: this exercise asks "
                          "for a prediction made before trying, and trying first earns no points. Work it out from the "
                          "admission plugin's source and apimachinery's errors package (see the hints)",
                          expected="a prediction written before any create in the namespace", observed_in=LIVE,
                          observed=f"answer file changed after {tried['what']}")
    if _normalize(answer) != _normalize(truth):
        raise CheckFailed(f"that is not what the API server answers: {_which_part(answer, body)}",
                          expected="the message of the API server's answer, word for word" + note, observed=answer,
                          right_answer=truth)
    return ctx.passed(f"right: {code} {body.get('reason')}: {truth}{note}")


def _refused_as_terminating(event) -> bool:
    """Whether the API server refused the request because its namespace is being terminated: the
    Status NamespaceLifecycle answers (lifecycle/admission.go Admit: errors.NewForbidden with the
    cause NamespaceTerminating, apimachinery's StatusCause in the audit event's responseStatus)."""
    status = event.get("responseStatus") or {}
    causes = (status.get("details") or {}).get("causes") or []
    return status.get("code") == 403 and (any(c.get("reason") == "NamespaceTerminating" for c in causes)
                                          or "because it is being terminated" in status.get("message", ""))


def observe_terminating_create_tries(ctx, namespace: str) -> list[dict] | None:
    """The student's own requests that showed the answer since the exercise was built: any create in
    `namespace` (accepted or refused, any resource), and any request the server refused because its
    namespace is being terminated, whatever its verb (the same message, perhaps another name in it:
    a create elsewhere, or a server-side apply, a PATCH that would create, which NamespaceLifecycle
    admits as a Create: lifecycle/admission.go Admit, `a.GetOperation() == admission.Create`). Oldest
    first: [{at, time, what, namespace}]; None on a real cluster. A try before a reset is kept by the
    lab's keep_student_work (labkit.predictions.keep_trial)."""
    from labkit.apiserver import audit as audit_log
    events = _audit(ctx)
    if events is None:
        return None

    def what(e):
        ref = e.get("objectRef") or {}
        body = e.get("requestObject") if isinstance(e.get("requestObject"), dict) else {}
        name = ref.get("name") or (body.get("metadata") or {}).get("name") or ""
        return f"{e.get('verb')} {ref.get('resource')} {name}".strip()

    def student(e):
        return not (e.get("user") or {}).get("username", "").startswith("system:")
    tries = [{"at": audit_log.received_at(e), "time": e.get("requestReceivedTimestamp", "")[11:19], "what": what(e),
              "namespace": (e.get("objectRef") or {}).get("namespace")}
             for e in events
             if ((e.get("verb") == "create" and (e.get("objectRef") or {}).get("namespace") == namespace)
                 or _refused_as_terminating(e)) and student(e)]
    return sorted(tries + _tries_elsewhere(ctx, what, student), key=lambda t: t["at"])


def _tries_elsewhere(ctx, what, student) -> list[dict]:
    """The refusals as terminating that another labkit API server on this machine answered the
    student (another lab's, `labkit apiserver`'s: labkit.servers; each answers a create into a
    namespace being terminated with the same message), since the exercise's last
    `--forget-prediction`: [{at, time, what, namespace, server}]."""
    from labkit import servers
    from labkit.apiserver import audit as audit_log
    from pathlib import Path

    from labkit.apiserver.target import SERVER_TAG
    own = Path(ctx.env.dir) / SERVER_TAG        # the lab's own server, running or not (its log is read above)
    since = max((e["at"] for e in predictions.forgotten(ctx.lab.id, ctx.exercise.id)), default=0.0)
    out = []
    for other in servers.others(own):
        out += [{"at": audit_log.received_at(e), "time": e.get("requestReceivedTimestamp", "")[11:19],
                 "what": f"{what(e)} on the labkit API server of {other.state_dir}",
                 "namespace": (e.get("objectRef") or {}).get("namespace"), "server": str(other.state_dir)}
                for e in servers.lines_with(other.state_dir, "audit.log", ("being terminated", "NamespaceTerminating"))
                if audit_log.received_at(e) >= since and _refused_as_terminating(e) and student(e)]
    return out


def _first_try(ctx, namespace: str) -> dict | None:
    tries = observe_terminating_create_tries(ctx, namespace)
    return tries[0] if tries else None


def _answer_written_at(ctx) -> float:
    try:
        return ctx.answer_path.stat().st_mtime
    except OSError:
        return 0.0


def _prediction_file(ctx):
    """(the answer, a note): the prediction `labkit gc run` kept when it first showed the refusal
    (labkit.predictions), else the answer file, parsed; an unquoted message (`error: configmaps "late" is forbidden: ...`)
    is not valid YAML (a second `: ` in a plain value), and the failure says to quote it."""
    from labkit.exercises import AnswerMissing, AnswerUnreadable
    try:
        return predictions.graded_answer(ctx)
    except AnswerMissing as exc:
        if "mapping values are not allowed" not in str(exc):
            raise
        raise AnswerUnreadable(f"{exc}\nThe message itself contains `: `, which YAML reads as another key: quote the "
                            "whole message, in single quotes (error: '...'; a ' inside is written twice) or "
                            "write it as a block (error: |, then the message indented on the next line)") from None


def _create_answer(ctx, c, namespace: str, name: str) -> tuple[int, dict]:
    """What the API server answers a create of ConfigMap `name` in `namespace`: (code, Status).

    On the embedded server, labkit's NamespaceLifecycle plugin (the first of the admission chain,
    labkit.apiserver.admission.plugins.namespace_lifecycle, as Lifecycle.Admit) judges the create
    in-process against the live namespace: no request is sent, so the answer does not appear in
    the lab's audit log, which students read. On a real cluster: a dry-run create."""
    if not _lab(ctx.env).target(ctx.env).embedded:
        return c.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", {"dryRun": "All"},
                         body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    from types import SimpleNamespace

    from labkit.apiserver.admission import Attributes
    from labkit.apiserver.admission.plugins import namespace_lifecycle
    from labkit.apiserver.errors import ApiError

    store = SimpleNamespace(get=lambda _key, _ns, ns_name: c.get_or_none("v1", "namespaces", ns_name))
    rt = SimpleNamespace(resource="configmaps", group="", version="v1", kind="ConfigMap", namespaced=True)
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    try:
        namespace_lifecycle(store)(Attributes("CREATE", rt, namespace, name, obj, dry_run=True))
    except ApiError as exc:
        return exc.code, {"reason": exc.reason, "message": exc.message}
    return 201, {}


def _which_part(answer: str, body: dict) -> str:
    """Which part of a wrong prediction differs, without the right words: the kind of error
    kubectl prints (when the prediction has it), the object part (`<resource> "<name>" is ...`
    built by apimachinery's errors.NewForbidden), or the reason after it (the admission plugin's)."""
    prefix = _KUBECTL_PREFIX.match(str(answer).strip().strip("'\""))
    if prefix and prefix.group(1) != body.get("reason"):
        return (f"the kind of error in your prediction ({prefix.group(1)}) is not the one the API server answers "
                "with — what does the admission plugin that guards namespaces return?")
    truth = _normalize(body.get("message", ""))
    head, _, reason = truth.partition(": ")
    given = _normalize(answer)
    if not given.startswith(head + ":") and given != head:
        if given == reason:
            return ("your message is the admission plugin's reason alone: the API server's message starts with "
                    "which object is refused and what kind of refusal it is, which apimachinery's errors package "
                    "writes for the plugin, before that reason")
        if not given.endswith(": " + reason):
            return ("neither the start of your message (which object, and what kind of refusal: apimachinery's "
                    "errors package writes it for the plugin) nor the reason after it (the admission plugin's "
                    "words) is the API server's")
        return ("the start of your message (which object, and what kind of refusal) is not the API server's — "
                "apimachinery's errors package writes it for the plugin")
    return "the object part is right, but the reason after it is not the admission plugin's words, word for word"


# -- (c) release the custom resource's finalizer ---------------------------------------------

def _kind_of_held(env, namespace):
    """The custom resources the lab put into `namespace`, and the CRD and the lab's objects of
    that kind in the other namespaces (lab.py's CONTENT: labkit's record of the lab as built)."""
    lab = _lab(env)
    mine = [(v, r) for v, r, _obj in lab.CONTENT[namespace] if "." in v.split("/")[0]]
    others = sorted((ns, obj["metadata"]["name"], list(obj["metadata"].get("finalizers") or []))
                    for ns, content in lab.CONTENT.items() if ns != namespace
                    for v, r, obj in content if (v, r) in mine)
    return mine, others


def observe_release_finalizer(ctx) -> dict:
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    mine, others = _kind_of_held(ctx.env, name)
    crds = {}
    for api_version, resource in mine:
        crd_name = f"{resource}.{api_version.split('/')[0]}"
        crd = c.get_or_none("apiextensions.k8s.io/v1", "customresourcedefinitions", crd_name)
        crds[crd_name] = None if crd is None else "deleting" if crd["metadata"].get("deletionTimestamp") else "present"
    elsewhere = {}
    for (api_version, resource), (ns, obj, _built) in ((m, o) for m in mine for o in others):
        found = c.get_or_none(api_version, resource, obj, ns) if crds.get(
            f"{resource}.{api_version.split('/')[0]}") is not None else None
        elsewhere[f"{resource}.{api_version.split('/')[0]}/{obj} in {ns}"] = {
            "state": None if found is None else "deleting" if found["metadata"].get("deletionTimestamp") else "present",
            "finalizers": [] if found is None else list(found["metadata"].get("finalizers") or [])}
    crd_writes = []
    for crd_name in sorted(crds):
        found = _student_writes(ctx, "customresourcedefinitions", None, crd_name, ("update", "patch"))
        if found is None:
            crd_writes = None
            break
        crd_writes += sorted({f"{w['verb']} {crd_name}" for w in found})
    created = _student_writes(ctx, "namespaces", None, name, ("create",))
    return {"gone": observe_gone(ctx, c, name), "crds": crds, "crd_writes": crd_writes,
            "recreated": None if created is None else bool(created), "elsewhere": elsewhere}


def judge_release_finalizer(ctx, seen: dict):
    name = ctx.params["namespace"]
    _mine, others = _kind_of_held(ctx.env, name)
    built = {f"{k}/{obj} in {ns}": fins for ns, obj, fins in others for k in seen["crds"]}
    reset = f"`labkit reset namespace {ctx.exercise.id}` repairs it"
    for crd, state in sorted(seen["crds"].items()):
        if state != "present":
            raise CheckFailed(f"the CustomResourceDefinition {crd} {'is being deleted' if state == 'deleting' else 'is gone'}"
                              ": that deletes every object of its kind in every namespace, not only the one that held "
                              f"{name} — {reset} (and the other namespaces' objects of that kind)")
    if seen.get("crd_writes"):
        # a CRD is cluster-wide: a version no longer served (apiextensions-apiserver's discovery and
        # handler serve only versions with served: true) hides that kind in every namespace, from
        # kubectl and from the namespace controller's discovery (pkg/controller/namespace/deletion,
        # namespaced_resources_deleter.go, deleteAllContent lists what discovery gives), so the
        # namespace can go while its objects stay stored
        raise CheckFailed(f"you changed the CustomResourceDefinition itself ({', '.join(seen['crd_writes'])}): a CRD is "
                          "cluster-wide — a version no longer served, say, hides its objects in every namespace, from "
                          f"the API and from the namespace controller, so {name} could go while its object was still "
                          f"stored. The fix is the object that holds {name}, not its kind — {reset}",
                          expected="no update or patch of the CustomResourceDefinition",
                          observed_in=LIVE, observed=", ".join(seen["crd_writes"]))
    if seen.get("recreated"):
        raise CheckFailed(f"you created a namespace {name} again: the exercise is about the namespace the lab built, "
                          f"which must go because it became empty — `labkit ns explain {name}` says what holds it; "
                          f"{reset}",
                          expected=f"no namespace {name} created by you", observed_in=LIVE, observed=f"create namespace {name}")
    terminating = {f"{k}/{obj} in {ns}" for ns, obj, _f in others for k in seen["crds"]
                   if ns in _lab(ctx.env).DELETED_AT_SETUP}
    for key, state in sorted(seen["elsewhere"].items()):
        if key not in built:
            continue
        # in a namespace the lab built Terminating, the namespace controller has asked to delete
        # everything already: there, only the object's finalizer keeps it, as built
        if state["state"] is None or (state["state"] == "deleting" and key not in terminating):
            raise CheckFailed(f"{key} {'is being deleted' if state['state'] == 'deleting' else 'is gone'}: the fix of "
                              f"{name} must leave "
                              f"the other namespaces' objects alone — {reset}")
        if state["finalizers"] != built[key]:
            raise CheckFailed(f"the finalizers of {key} were changed: the fix of {name} must leave the other "
                              f"namespaces' objects alone — {reset}")
    note = judge_gone(ctx, name, seen["gone"])
    return ctx.passed(f"namespace {name} emptied itself and went away; its kubernetes finalizer was removed by the "
                      "namespace controller, not by hand" + note)


def check_release_finalizer(ctx):
    return judge_release_finalizer(ctx, observe_release_finalizer(ctx))


# -- (d) unavailable APIService --------------------------------------------------------------

def _discovery_failures_written(ctx, namespace):
    """The message of the first NamespaceDeletionDiscoveryFailure the namespace controller wrote
    into `namespace`'s status; None if it never did; NO_AUDIT on a real cluster."""
    events = _lab(ctx.env).target(ctx.env).audit(since=ctx.ready_time, containing='"subresource":"status"')
    if events is None:
        return NO_AUDIT
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("name"), ref.get("subresource")) != ("namespaces", namespace, "status"):
            continue
        if (e.get("user") or {}).get("username") != CONTROLLER_USER:
            continue
        for cond in ((e.get("requestObject") or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "NamespaceDeletionDiscoveryFailure" and cond.get("status") == "True":
                return cond.get("message", "")
    return None


# what each of kube-aggregator's reasons means for the student (availability.py lists the checks)
UNAVAILABLE = {
    "ServiceNotFound": "its Service is missing",
    "ServicePortError": "its Service does not offer the APIService's port",
    "EndpointsNotFound": "its Service has no EndpointSlices (a Service without a selector gets none), so no ready "
                         "endpoints",
    "MissingEndpoints": "its Service has no ready endpoints: no ready Pod behind its selector has the port the "
                        "Service names",
    "FailedDiscoveryCheck": "its backend does not answer discovery through the Service: the endpoints lead nowhere "
                            "that serves the API",
}


class _ClientStore:
    """The two reads of kube-aggregator's availability check (labkit.apiserver.availability:
    the Service, the Service's EndpointSlices), answered by the API server through `c`."""

    def __init__(self, c):
        self.c = c

    def get(self, key, namespace, name):
        assert key == "/services", key
        return self.c.get_or_none("v1", "services", name, namespace)

    def list(self, key, namespace=None):
        assert key == "discovery.k8s.io/endpointslices", key
        return self.c.list("discovery.k8s.io/v1", "endpointslices", namespace)


def _apiservice_state(ctx, c, apiservice):
    """`apiservice` once kube-aggregator's availability check has settled on it (None: it does not
    exist): its Available condition and what it serves from where.

    The availability controller looks again whenever the APIService, its Service or the Service's
    EndpointSlices change (remote_available_controller.go), and the EndpointSlice controller
    publishes a selector's endpoints some time after the Service appears: a verdict taken before
    the controllers caught up would judge a transient state (EndpointsNotFound while the slice is
    being made). So on the embedded server this waits (bounded) until a Service with a selector has
    its EndpointSlice, and until the condition says what
    labkit's reconstruction of that check (labkit.apiserver.availability.availability, run here
    on the live Service and EndpointSlices) says now, and until the condition, the Service and its
    slices stayed the same for 2 s."""
    from labkit.apiserver.availability import availability

    embedded = _lab(ctx.env).target(ctx.env).embedded

    def probe():
        code, svc = c.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{apiservice}")
        if code == 404:
            return None
        cond = next((x for x in (svc.get("status") or {}).get("conditions") or [] if x.get("type") == "Available"), {})
        ref = (svc.get("spec") or {}).get("service") or {}
        backend = None
        if ref.get("name"):
            found = c.get_or_none("v1", "services", ref["name"], ref.get("namespace"))
            slices = c.list("discovery.k8s.io/v1", "endpointslices", ref.get("namespace"),
                            label_selector=f"kubernetes.io/service-name={ref['name']}")[0] if found else []
            backend = (found or {}).get("metadata", {}).get("resourceVersion"), \
                tuple(sorted(s["metadata"]["resourceVersion"] for s in slices))
        spec = svc.get("spec") or {}
        return {"status": cond.get("status"), "reason": cond.get("reason"), "message": cond.get("message"),
                "group": spec.get("group"), "version": spec.get("version"),
                "service": f"{ref.get('namespace')}/{ref['name']}" if ref.get("name") else None,
                "_backend": backend, "_object": svc}

    def agrees():
        now = probe()
        if now is None or not embedded or not now["service"]:
            return True
        namespace, name = now["service"].split("/", 1)
        service = c.get_or_none("v1", "services", name, namespace)
        if service is not None and (service.get("spec") or {}).get("selector") and not now["_backend"][1]:
            # the EndpointSlice controller always writes a slice (maybe without endpoints) for a
            # Service with a selector (pkg/controller/endpointslice reconciler: placeholder slice):
            # none yet means it has not got to this Service
            return False
        _status, reason, _message = availability(_ClientStore(c), now["_object"])
        return now["reason"] == reason
    agreed = bool(wait_for(agrees, timeout=20, interval=0.3))
    seen = settle(lambda: (lambda v: v and {k: x for k, x in v.items() if k != "_object"})(probe()),
                  timeout=20, stable_for=2.0, interval=0.2)
    if seen.value is None:
        return None
    value = {k: v for k, v in seen.value.items() if k != "_backend"}
    value["settled"] = seen.settled and agreed
    return value


def observe_broken_apiservice(ctx) -> dict:
    name, apiservice = ctx.params["namespace"], ctx.params["apiservice"]
    c = _lab(ctx.env).client(ctx.env)
    ns = _namespace(c, name)
    untouched = ns is not None and ns["metadata"]["uid"] == _lab(ctx.env).original_uid(ctx.env, name) \
        and not ns["metadata"].get("deletionTimestamp")
    failure = _discovery_failures_written(ctx, name)
    state = _apiservice_state(ctx, c, apiservice)
    working = state is None or state.get("status") == "True"
    return {"deleted": not untouched, "discovery_failure": failure, "apiservice": state,
            "other_apiservices": _other_apiservice_writes(ctx, apiservice),
            "rewrites": _apiservice_rewrites(ctx, apiservice, ctx.params["service"]),
            "gone": observe_gone(ctx, c, name, wait=working)}


def _other_apiservice_writes(ctx, apiservice) -> list[str] | None:
    """The student's successful deletes and changes of APIServices other than `apiservice`, as
    `delete v1.apps`; None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    out = []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "apiservices" or e.get("verb") not in ("update", "patch", "delete", "deletecollection") \
                or ref.get("name") == apiservice or (e.get("user") or {}).get("username", "").startswith("system:") \
                or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        entry = f"{e['verb']} {ref.get('name') or '(every APIService)'}"
        if entry not in out:
            out.append(entry)
    return out


def _serves(spec: dict) -> tuple:
    ref = spec.get("service") or {}
    return spec.get("group"), spec.get("version"), \
        f"{ref.get('namespace')}/{ref['name']}" if isinstance(ref, dict) and ref.get("name") else None


def _patched_spec(spec: dict, verb: str, body) -> dict:
    """`spec` (group, version and service of an APIService) after the student's update or patch
    `body` as the audit log has it: a whole object (update, apply), a JSON patch (a list of
    operations) or a merge/strategic patch (a mapping, null removing a field)."""
    spec = {"group": spec.get("group"), "version": spec.get("version"), "service": dict(spec.get("service") or {})
            or None}
    if isinstance(body, list):
        for op in body:
            path = [p for p in str((op or {}).get("path", "")).split("/") if p]
            if len(path) < 2 or path[0] != "spec" or path[1] not in spec:
                continue
            value = None if op.get("op") == "remove" else op.get("value")
            if len(path) == 2:
                spec[path[1]] = dict(value) if isinstance(value, dict) else value
            elif path[1] == "service":
                spec["service"] = dict(spec["service"] or {})
                spec["service"][path[2]] = value
        return spec
    if not isinstance(body, dict):
        return spec
    given = body.get("spec")
    if not isinstance(given, dict):
        return spec
    whole = verb == "update"
    for key in ("group", "version"):
        if key in given or whole:
            spec[key] = given.get(key)
    if "service" in given or whole:
        ref = given.get("service")
        if isinstance(ref, dict) and not whole:
            merged = dict(spec["service"] or {})
            merged.update(ref)
            spec["service"] = {k: v for k, v in merged.items() if v is not None}
        else:
            spec["service"] = dict(ref) if isinstance(ref, dict) else None
    return spec


def _apiservice_rewrites(ctx, apiservice: str, service: str) -> list[str] | None:
    """The student's creates, updates and patches of `apiservice` that made it serve anything but its
    group and version from kube-system/`service`, even for a while (kube-aggregator then drops or
    serves the group otherwise, and the namespace controller's discovery no longer fails on it: a
    Local APIService, say, with `spec.service` removed, apiregistration types.go). Deleting it and
    creating it again otherwise is the same detour as patching it (the create's body is the whole
    object, as an update's). Each as `patch: service none`; None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    group, version = apiservice.split(".", 1)[1], apiservice.split(".", 1)[0]
    built = {"group": group, "version": version, "service": {"namespace": "kube-system", "name": service}}
    spec, out = built, []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "apiservices" or ref.get("name") != apiservice or ref.get("subresource") \
                or e.get("verb") not in ("create", "update", "patch", "delete") \
                or (e.get("responseStatus") or {}).get("code", 0) >= 300 \
                or (e.get("user") or {}).get("username", "").startswith("system:"):
            continue
        if e["verb"] == "delete":
            # what is made after a delete starts from nothing (a server-side apply's patch too)
            spec = {"group": None, "version": None, "service": None}
            continue
        spec = _patched_spec(spec, "update" if e["verb"] == "create" else e["verb"], e.get("requestObject"))
        now = _serves(spec)
        if now != _serves(built):
            entry = f"{e['verb']}: " + ", ".join(f"{k} {v or 'none'}" for k, v, b in
                                                 zip(("group", "version", "service"), now, _serves(built)) if v != b)
            if entry not in out:
                out.append(entry)
    return out


def judge_broken_apiservice(ctx, seen: dict):
    name, apiservice, service = (ctx.params[k] for k in ("namespace", "apiservice", "service"))
    others = seen.get("other_apiservices") or []
    if others:
        # the built-in groups' APIServices (Local: served by kube-apiserver itself) are registered
        # once per start by kube-aggregator's autoregister controller (checkAPIService, 2B: created
        # once); without one, its group drops out of discovery until kube-apiserver restarts
        raise CheckFailed(f"you deleted or changed {len(others)} APIService(s) besides {apiservice} "
                          f"({', '.join(others[:3])}{', …' if len(others) > 3 else ''}): the fix concerns the one "
                          "APIService whose backend is gone; the others serve the cluster's own APIs (`kubectl get "
                          "apiservice` shows them as Local) and stay as they were — `labkit reset namespace "
                          f"{ctx.exercise.id}` makes them again", expected=f"no change to any APIService but {apiservice}",
                          observed=others, observed_in=LIVE)
    if not seen["deleted"]:
        raise CheckFailed(f"namespace {name} has not been deleted yet: break the API and delete it (see the prompt)")
    rewrites = seen.get("rewrites") or []
    if rewrites:
        raise CheckFailed(f"you changed APIService {apiservice} ({rewrites[0]}) so that it no longer served {apiservice.split('.', 1)[1]}"
                          f"/{apiservice.split('.', 1)[0]} from the Service kube-system/{service}, even if you put it "
                          f"back later or deleted it: while it was so, the namespace controller's discovery did not "
                          f"fail on it, and {name} could finish with a broken API. The fix is the backend (or, if it is gone for good, "
                          f"the APIService's deletion) — `labkit reset namespace {ctx.exercise.id}` to start over",
                          expected=f"no create, update or patch of yours that points {apiservice} elsewhere",
                          observed=rewrites, observed_in=LIVE)
    failure = seen["discovery_failure"]
    if failure is None and seen["gone"]["namespace"] is not None:
        raise CheckFailed(f"namespace {name} never waited for a failing discovery: delete the Service "
                          f"kube-system/{service} before you delete the namespace")
    if failure is None:
        raise CheckFailed(f"namespace {name} went away without ever waiting for a failing discovery: "
                          f"`labkit reset namespace {ctx.exercise.id}` and break the API first (see the prompt)")
    state = seen["apiservice"]
    if state is not None:
        group, version = apiservice.split(".", 1)[1], apiservice.split(".", 1)[0]
        if (state.get("group"), state.get("version"), state.get("service")) != (group, version, f"kube-system/{service}"):
            raise CheckFailed(f"APIService {apiservice} was changed: it must still serve {group}/{version} from the "
                              f"Service kube-system/{service} (or be deleted, if that backend is gone for good)",
                              observed={k: state.get(k) for k in ("group", "version", "service")})
        if state.get("status") != "True":
            reason = state.get("reason") or "no condition yet"
            words = UNAVAILABLE.get(reason, "see its conditions")
            still = "" if state.get("settled", True) else " (its availability was still changing: check again shortly)"
            raise CheckFailed(f"APIService {apiservice} is not Available ({reason}): {words}. Discovery of its group "
                              f"keeps failing, so namespace {name} (and every other namespace being deleted) keeps "
                              f"waiting — `kubectl get apiservice {apiservice} -o yaml`{still}",
                              observed=f"{reason}: {state.get('message')}")
    judge_gone(ctx, name, seen["gone"])
    note = " (" + NO_AUDIT.format(what="the discovery failure it waited for") + ")" if failure is NO_AUDIT else ""
    return ctx.passed(f"namespace {name} finished once discovery worked again"
                      + (f" (APIService {apiservice} deleted)" if state is None else f" ({apiservice} Available again)")
                      + note)


def check_broken_apiservice(ctx):
    return judge_broken_apiservice(ctx, observe_broken_apiservice(ctx))


# -- (e) force-finalize ----------------------------------------------------------------------

def _built_held(env, namespace) -> set[str]:
    """The objects the lab built in `namespace` with finalizers (lab.py's CONTENT): what a
    force-finalize of the namespace as built leaves in storage, nothing having released them (the
    namespace controller deletes everything else before it would remove `kubernetes`)."""
    out = set()
    for api_version, resource, obj in _lab(env).CONTENT[namespace]:
        if obj["metadata"].get("finalizers"):
            group = api_version.split("/")[0] if "/" in api_version else ""
            out.add(f"{resource}.{group}/{obj['metadata']['name']}" if group else f"{resource}/{obj['metadata']['name']}")
    return out


def _created_after(events, namespace: str, when: str) -> set[str]:
    """<resource>[.<group>]/<name> of every object the audit log has created in `namespace`
    after `when` (an audit time, with microseconds)."""
    out = set()
    for e in events:
        ref = e.get("objectRef") or {}
        if e.get("verb") != "create" or ref.get("namespace") != namespace or ref.get("subresource") or \
                (e.get("responseStatus") or {}).get("code") != 201 or e.get("requestReceivedTimestamp", "") <= when:
            continue
        obj = ref.get("name") or ((e.get("requestObject") or {}).get("metadata") or {}).get("name")
        if obj:
            group = ref.get("apiGroup") or ""
            out.add(f"{ref.get('resource')}.{group}/{obj}" if group else f"{ref.get('resource')}/{obj}")
    return out


def _left_at(objects: dict, when: str, created_after: set[str]) -> list[str]:
    """The stored objects (`_stored_objects`) that a force-finalize at `when` left behind, sorted:
    created no later than its second (creationTimestamp has whole seconds), and not among
    `created_after`, what the audit log shows created after it — a namespace made again in the
    same second gets its `default` ServiceAccount and `kube-root-ca.crt` in that second too."""
    return sorted(k for k, obj in objects.items()
                  if obj["metadata"].get("creationTimestamp", "")[:19] <= when[:19] and k not in created_after)


def check_force_finalize(ctx):
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    forced = _force_finalized(ctx, name)
    not_yet = (f"namespace {name} has not been force-finalized yet (PUT /api/v1/namespaces/{name}/finalize "
               "with empty spec.finalizers)")
    if forced is not None and not forced:
        raise NotJudged(not_yet)
    ns = _namespace(c, name)
    original = ns is not None and ns["metadata"]["uid"] == _lab(ctx.env).original_uid(ctx.env, name)
    if forced is None and original:
        raise NotJudged(not_yet)
    objects = _stored_objects(c, name)
    if forced is not None:
        when = forced[0]["time"]
        left = _left_at(objects, when, _created_after(_audit(ctx) or [], name, when))
    elif ns is not None:
        # no audit log (a real cluster): what was created before the namespace of the same name came back
        when = ns["metadata"]["creationTimestamp"]
        left = sorted(k for k, obj in objects.items() if obj["metadata"].get("creationTimestamp", "")[:19] < when[:19])
    else:
        left = sorted(objects)
    recreated = ns is not None and not original
    if not recreated:
        raise NotJudged(f"create the namespace {name} again and look at it before you answer")
    if forced is None and not left:
        raise CheckFailed(f"nothing outlived the old namespace {name}: it went away the normal way, not "
                          f"force-finalized ({NO_AUDIT.format(what='the finalize request')})")
    if not _built_held(ctx.env, name) <= set(left):
        raise CheckFailed(f"the situation the exercise describes has changed: some of what the old namespace {name} "
                          "left behind was deleted or released since, and the answer is about what it left — "
                          f"`labkit reset namespace {ctx.exercise.id}`, force-finalize it again and look before you "
                          "clean up")
    data = ctx.answer()
    got = ctx.answer_field(data, "left_behind", list)
    visible = ctx.answer_field(data, "visible_again", bool)
    return grade_force_finalize_answer(ctx, name, got, visible, left)


def grade_force_finalize_answer(ctx, name: str, got: list, visible: bool, left: list[str]):
    """The verdict on the answer (`got`, the left_behind list as written, and visible_again)
    against `left`, the objects still stored under the old namespace's name, sorted."""
    got = sorted(str(x).strip() for x in got)
    right = {"left_behind": left, "visible_again": bool(left)}
    # entries whose form is wrong whatever is stored (no /<name>, or a core resource with the
    # conditions' trailing dot): the list cannot be read as objects (malformed, not counted)
    unreadable = [entry for entry in got if not entry.partition("/")[2] or entry.partition("/")[0].endswith(".")]
    if unreadable:
        raise AnswerMalformed("left_behind: " + ", ".join(repr(e) for e in unreadable) + ": write each object as "
                              "<resource>/<name> for the core group (without the trailing dot the namespace's "
                              "conditions write after a resource type of the core group), "
                              "<resource>.<group>/<name> otherwise",
                              expected=f"every object still stored under {name}", observed=got, right_answer=right)
    if got != left:
        parts, named = [], set()
        for entry in sorted(set(got) - set(left)):
            resource, _, obj = entry.partition("/")
            grouped = [k for k in left if k.startswith(f"{resource}.") and k.endswith(f"/{obj}")]
            named.update(grouped)
            other_form = [k for k in left if k.endswith(f"/{obj}") and _other_form(resource, k.split("/", 1)[0])]
            if other_form:
                named.update(other_form)
                parts.append(f"{entry}: written in another form than the answer asks for (kubectl's `-o name` writes "
                             "the kind, singular): write the resource, plural and lowercase, as `kubectl api-resources` "
                             "names it — <resource>/<name> for the core group, <resource>.<group>/<name> otherwise")
            elif grouped:
                parts.append(f"{entry}: the resource {resource} is not in the core group: write "
                             "<resource>.<group>/<name> (`kubectl api-resources` shows its group)")
            else:
                parts.append(f"{entry}: not stored under {name} (or created after the force-finalize)")
        # the objects are named (an object's name is found only by looking), the ones missing
        # neither named nor counted
        if set(left) - set(got) - named:
            parts.append("objects left behind are missing from your list: look at every namespaced resource type "
                         "(`kubectl api-resources --namespaced`), built-in and custom alike")
        raise CheckFailed("left_behind: " + "\n".join(parts), expected=f"every object still stored under {name}",
                          observed=got, right_answer=right)
    if visible != bool(left):
        # visible_again is true or false: it is not named while the answer can earn points (README,
        # "Predictions"), only where to look
        tries = ctx.count_wrong_answer()
        raise CheckFailed(f"your answer is not right ({tries} different wrong {'answer' if tries == 1 else 'answers'} "
                          f"checked): look again at what is stored under {name} (every namespaced resource type: "
                          "`kubectl api-resources --namespaced`) and at what a client sees in the new namespace "
                          f"{name} (`kubectl get all,cm,backups -n {name}`)",
                          expected=f"what the old namespace {name} left behind, and what a client sees of it in "
                                   f"the new one", observed={"left_behind": got, "visible_again": visible},
                          right_answer=right)
    return ctx.passed(f"right: {len(left)} object(s) outlived namespace {name} and reappear in the namespace of the "
                      "same name — nothing deleted them while no namespace of that name existed, and their "
                      "finalizers' cleanup never ran (deleting the new one the normal way lets the namespace "
                      "controller empty it)")


def _other_form(written: str, stored: str) -> bool:
    """Whether `written` names the resource type `stored` (<resource>[.<group>]) in another form:
    singular or capitalized, as kubectl's `-o name` writes it (configmap/x, backup.example.com/x)."""
    w_res, _, w_group = written.partition(".")
    s_res, _, s_group = stored.partition(".")
    return written != stored and w_group.lower() == s_group.lower() and \
        w_res.lower().removesuffix("s") == s_res.lower().removesuffix("s")


# -- (f) own finalizer -----------------------------------------------------------------------

def observe_own_finalizer(ctx) -> dict:
    """The finalize requests sent on the namespace by anyone but the namespace controller (None on
    a real cluster), whether the namespace itself was updated or patched, and the namespace now."""
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    requests = _finalize_requests(ctx, name)
    ns = _namespace(c, name)
    return {"requests": None if requests is None else [r["finalizers"] for r in requests if r["user"] != CONTROLLER_USER],
            "spec_edit": _spec_edit_verb(ctx, name),
            "other_namespaces": _other_namespace_writes(ctx, name),
            "namespace": None if ns is None else {
                "original": ns["metadata"]["uid"] == _lab(ctx.env).original_uid(ctx.env, name),
                "deleting": bool(ns["metadata"].get("deletionTimestamp")),
                "finalizers": list((ns.get("spec") or {}).get("finalizers") or []),
                "changed": ns["metadata"].get("resourceVersion") != _lab(ctx.env).built_resource_version(ctx.env, name),
                "metadata": {"finalizers": list(ns["metadata"].get("finalizers") or []),
                             "labels": dict(ns["metadata"].get("labels") or {}),
                             "annotations": dict(ns["metadata"].get("annotations") or {})}}}


def _built_metadata(name: str) -> dict:
    """The namespace's metadata as the lab builds it (created with its name only): the label the
    API server gives every namespace (pkg/registry/core/namespace/strategy.go, PrepareForCreate:
    kubernetes.io/metadata.name), no annotations, no finalizers in metadata."""
    return {"finalizers": [], "labels": {"kubernetes.io/metadata.name": name}, "annotations": {}}


def _metadata_changes(name: str, metadata: dict | None) -> list[str]:
    """Where the namespace's metadata (finalizers, labels, annotations) differs from as built."""
    if metadata is None:
        return []
    built = _built_metadata(name)
    out = []
    if metadata.get("finalizers"):
        out.append("metadata.finalizers")
    for part in ("labels", "annotations"):
        now, then = metadata.get(part) or {}, built[part]
        out += [f"metadata.{part}.{k}" for k in sorted(now.keys() | then.keys()) if now.get(k) != then.get(k)]
    return out


def _other_namespace_writes(ctx, name) -> list[str] | None:
    """The student's successful writes to namespaces other than `name` that are not another
    exercise's work: any update, patch or delete (of the namespace or its finalize/status
    subresource) of a namespace that is no exercise's (default, kube-system, ...), and a finalize
    request that puts a finalizer other than `kubernetes` on any other namespace (what this
    exercise does; the other exercises only take finalizers away), or that takes finalizers away
    from another exercise's namespace that was not being deleted then (no exercise does that: the
    finalize requests of the others, right or wrong, are on namespaces being deleted; one on an
    Active namespace, billing say, leaves it to go at once when it is deleted, its content left in
    storage). A namespace the student created themselves (since the exercise was built: another
    exercise's experiment, say) is theirs to change or delete, as the exercises' namespaces are. As
    `update …/finalize on default`; None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    deleting = _namespaces_being_deleted(_namespace_history(ctx)) if any(
        (e.get("objectRef") or {}).get("subresource") == "finalize" for e in events) else None
    exercises = set(getattr(_lab(ctx.env), "EXERCISE_NAMESPACES", {}).values())
    theirs = {(e.get("objectRef") or {}).get("name") for e in events
              if e.get("verb") == "create" and (e.get("objectRef") or {}).get("resource") == "namespaces"
              and not (e.get("objectRef") or {}).get("subresource")
              and not (e.get("user") or {}).get("username", "").startswith("system:")
              and (e.get("responseStatus") or {}).get("code", 0) < 300} - {name, None}
    out = []
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "namespaces" or not ref.get("name") or ref.get("name") == name \
                or e.get("verb") not in ("update", "patch", "delete") \
                or (e.get("user") or {}).get("username", "").startswith("system:") \
                or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        sent = ((e.get("requestObject") or {}).get("spec") or {}).get("finalizers") or [] \
            if ref.get("subresource") == "finalize" else []
        if not any(f != "kubernetes" for f in sent) and (ref["name"] in theirs or ref["name"] in exercises and (
                ref.get("subresource") != "finalize" or deleting(ref["name"], received_at(e)))):
            continue
        what = f"{e['verb']} …/{ref['subresource']}" if ref.get("subresource") else e["verb"]
        entry = f"{what} on {ref['name']}"
        if entry not in out:
            out.append(entry)
    return out


def _namespace_history(ctx) -> list[dict]:
    """The whole audit log's requests on namespaces (the lab's builds and resets included: they
    create and delete through the API too), but the namespace controller's."""
    return _lab(ctx.env).target(ctx.env).audit(exclude_users=(CONTROLLER_USER,), containing="namespaces") or []


def _namespaces_being_deleted(events: list[dict]):
    """deleting(name, time): whether the namespace `name` was being deleted at `time` (seconds since
    the epoch), as `events` have it: a successful DELETE of it, by anyone, since the last create of
    that name."""
    marks: dict[str, list[tuple[str, bool]]] = {}
    for e in events:
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "namespaces" or ref.get("subresource") or e.get("verb") not in ("create", "delete") \
                or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        name = ref.get("name") or ((e.get("requestObject") or {}).get("metadata") or {}).get("name")
        marks.setdefault(name, []).append((received_at(e), e["verb"] == "delete"))

    def deleting(name: str, at: float) -> bool:
        before = [d for t, d in marks.get(name, []) if t <= at]
        return bool(before) and before[-1]
    return deleting


# the finalizer names Kubernetes defines itself (pkg/apis/core/helper/helpers.go, standardFinalizers:
# FinalizerKubernetes, metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents); every other
# name must be qualified, <domain>/<name> (pkg/apis/core/validation validateFinalizerName)
STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")


def _own(finalizer: str) -> bool:
    return finalizer not in STANDARD_FINALIZERS


def judge_own_finalizer(ctx, seen: dict):
    name = ctx.params["namespace"]
    ns = seen["namespace"]
    if ns is None or not ns["original"]:
        raise CheckFailed(f"namespace {name} is not the lab's any more (deleted or made anew): leave it as it was — "
                          f"`labkit reset namespace {ctx.exercise.id}`")
    others = seen.get("other_namespaces") or []
    if others:
        touched = sorted({o.rsplit(" on ", 1)[1] for o in others})
        raise CheckFailed(f"you also changed namespace {', '.join(touched)} ({'; '.join(others)}): the exercise is "
                          f"about {name} only, and every other namespace stays as it was — a finalizer of your own left "
                          "on another namespace keeps it from ever being deleted, and a finalize request that takes "
                          "`kubernetes` away from one not being deleted lets it go at once when it is deleted, its content "
                          "left in storage. Look at "
                          f"`kubectl get ns {touched[0]} -o yaml` (spec.finalizers), and `labkit reset namespace "
                          f"{ctx.exercise.id}` to start over", expected=f"requests on namespace {name} only",
                          observed=others, observed_in=LIVE)
    changed = _metadata_changes(name, ns.get("metadata"))
    if "metadata.finalizers" in changed:
        # pkg/registry/core/namespace/storage/storage.go (REST.Delete): a namespace with
        # metadata.finalizers is only marked for deletion; nothing but whoever set them removes them
        raise CheckFailed(f"leave {name} as it was: it carries finalizers in metadata.finalizers "
                          f"({', '.join(ns['metadata']['finalizers'])}), where a normal update or patch put them — "
                          f"not spec.finalizers, and no controller removes them: once deleted, {name} would wait "
                          "for them for ever. Look at `kubectl get ns " + name + " -o yaml` (metadata and spec)",
                          expected="metadata.finalizers: none", observed=ns["metadata"]["finalizers"],
                          observed_in=LIVE)
    if changed:
        raise CheckFailed(f"leave {name} as it was: {', '.join(changed)} changed since the lab built it (the "
                          "exercise changes spec.finalizers through the finalize subresource, and nothing else)",
                          expected="the labels and annotations the lab built", observed=changed, observed_in=LIVE)
    requests = seen["requests"]
    if requests is None:
        return _own_finalizer_live(ctx, name, ns)
    added = next((i for i, sent in enumerate(requests) if any(_own(f) for f in sent)), None)
    if added is None:
        standard = sorted({f for sent in requests for f in sent if f != "kubernetes"})
        if standard:
            raise CheckFailed(f"{', '.join(standard)} is not a finalizer of your own: Kubernetes defines it itself "
                              "(the standard finalizer names are kubernetes, orphan and foregroundDeletion, "
                              "pkg/apis/core/helper IsStandardFinalizerName), for its own controllers. A finalizer of "
                              "your own is a qualified name, <domain>/<name>, as the prompt says")
        raise CheckFailed(f"no finalizer of your own was put on {name} through the finalize subresource yet"
                          + _spec_edit_note(seen["spec_edit"]))
    mine = [f for f in requests[added] if _own(f)]
    if not any(set(mine).isdisjoint(sent) for sent in requests[added + 1:]) \
            or any(f != "kubernetes" for f in requests[-1]):
        raise CheckFailed(f"you added {', '.join(mine)}; now remove it again (through the same subresource): your "
                          "last finalize request must leave only `kubernetes`")
    if ns["finalizers"] != ["kubernetes"] or ns["deleting"]:
        raise CheckFailed(f"leave {name} as it was: Active with spec.finalizers [kubernetes]",
                          expected=["kubernetes"], observed=ns["finalizers"])
    if any("kubernetes" not in sent for sent in requests):
        # pkg/registry/core/namespace/storage/storage.go (REST.Delete): a namespace is removed once
        # spec.finalizers is empty; pkg/controller/namespace/deletion/namespaced_resources_deleter.go
        # (Delete, finalized: an empty list) removes a deleted namespace with no finalizers without
        # deleting its content. Only `kubernetes` makes the namespace wait for its content to go.
        raise CheckFailed(f"one of your finalize requests left out `kubernetes`: it is what keeps {name} until the "
                          "namespace controller has deleted its content — without it, once no other finalizer is "
                          f"left, deleting {name} removes it at once and leaves its content in storage. Keep "
                          "`kubernetes` in every request")
    return ctx.passed(f"added and removed {', '.join(mine)} through PUT …/namespaces/{name}/finalize")


def check_own_finalizer(ctx):
    return judge_own_finalizer(ctx, observe_own_finalizer(ctx))


def _own_finalizer_live(ctx, name, ns):
    """(f) without an audit log (a real cluster): the namespace is the lab's, Active with
    spec.finalizers [kubernetes] again, and was written since the lab built it (each finalize
    request gives it a new resourceVersion). Weaker than the audit log: any other write to the
    namespace (a label) would count too, and the message says so."""
    spec = ns["finalizers"]
    if spec != ["kubernetes"]:
        raise CheckFailed(f"spec.finalizers of {name} is {spec}: remove your finalizer again (through the same "
                          "subresource)", expected=["kubernetes"], observed=spec)
    if ns["deleting"]:
        raise CheckFailed(f"leave {name} as it was: Active with spec.finalizers [kubernetes]")
    if not ns["changed"]:
        raise CheckFailed(f"namespace {name} has not been changed since the lab built it: add a finalizer of your "
                          "own through the finalize subresource, then remove it")
    return ctx.passed(f"{name} was changed and is back to spec.finalizers [kubernetes] ("
                      + NO_AUDIT.format(what="which requests changed it") + ")")


# -- (g) a volume's Pod on a dead node ---------------------------------------------------------

PODGC_USER = "system:serviceaccount:kube-system:pod-garbage-collector"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def _student_writes(ctx, resource, namespace, name, verbs):
    """Successful requests of `verbs` on `resource` namespace/name by anyone but a component of the
    cluster (users named system:...); None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    found = []
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name"), ref.get("subresource")) != \
                (resource, namespace, name, None) or e.get("verb") not in verbs:
            continue
        user = (e.get("user") or {}).get("username", "")
        if user.startswith("system:") or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        found.append({"user": user, "verb": e["verb"], "request": e.get("requestObject")})
    return found


def _volume_writes(ctx, volume: str):
    """The student's successful writes of the PersistentVolume (delete, patch, update): who, which
    verb, whether the request carried metadata.finalizers; None on a real cluster (no audit log)."""
    writes = _student_writes(ctx, "persistentvolumes", None, volume, ("delete", "patch", "update"))
    return None if writes is None else [{"user": w["user"], "verb": w["verb"],
                                         "finalizers": "finalizers" in json.dumps(w["request"] or {})} for w in writes]


def _volume_state(c, volume: str, claim_gone: bool) -> dict | None:
    """The PersistentVolume's phase and finalizers. Once the claim is gone the PV controller marks
    it Released on its next sync of the volume: when it is still Bound then, wait for that (bounded)."""
    def look():
        pv = c.get_or_none("v1", "persistentvolumes", volume)
        return None if pv is None else {"phase": (pv.get("status") or {}).get("phase"),
                                        "finalizers": list(pv["metadata"].get("finalizers") or [])}
    current = look()
    if claim_gone and current is not None and current["phase"] == "Bound":
        def synced():
            now = look()
            return "gone" if now is None else (now if now["phase"] != "Bound" else None)
        found = wait_for(synced, timeout=10, interval=0.3)
        current = None if found == "gone" else (found or look())
    return current


def observe_volume_in_use(ctx) -> dict:
    name, node_name, claim, pod_name = (ctx.params[k] for k in ("namespace", "node", "claim", "pod"))
    c = _lab(ctx.env).client(ctx.env)
    edits = _student_writes(ctx, "persistentvolumeclaims", name, claim, ("patch", "update"))
    deletes = _student_writes(ctx, "pods", name, pod_name, ("delete",))
    pod = c.get_or_none("v1", "pods", pod_name, name)
    node = c.get_or_none("v1", "nodes", node_name)
    events = _audit(ctx)
    others = [n for n in c.list("v1", "nodes")[0] if n["metadata"]["name"] != node_name]
    seen = {
        "other_nodes_marked": sorted(n["metadata"]["name"] for n in others
                                     if any(t.get("key") == OUT_OF_SERVICE for t in (n.get("spec") or {}).get("taints") or [])),
        # another node marked by a write of the student's since the exercise was built, the mark
        # taken off again or not (None on a real cluster: no audit log)
        "other_nodes_marked_on_the_way": None if events is None else sorted({
            (e.get("objectRef") or {}).get("name") for e in events
            if (e.get("objectRef") or {}).get("resource") == "nodes" and e.get("verb") in ("patch", "update")
            and (e.get("objectRef") or {}).get("name") not in (None, node_name)
            and not (e.get("user") or {}).get("username", "").startswith("system:")
            and (e.get("responseStatus") or {}).get("code", 0) < 300
            and OUT_OF_SERVICE in json.dumps(e.get("requestObject") or {})}),
        "claim_finalizers_edited_by": None if edits is None else
        [e["user"] for e in edits if "finalizers" in json.dumps(e["request"] or {})],
        "pod_force_deleted_by": None if deletes is None else
        [e["user"] for e in deletes if (e["request"] or {}).get("gracePeriodSeconds") == 0],
        "pod": None if pod is None else {"terminating": bool(pod["metadata"].get("deletionTimestamp"))},
        "node": None if node is None else {
            "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
            "taints": [{k: t.get(k) for k in ("key", "value", "effect")} for t in (node.get("spec") or {}).get("taints") or []]},
        "pod_deleted_by_podgc": None if events is None else any(
            (e.get("objectRef") or {}).get("resource") == "pods" and (e.get("objectRef") or {}).get("name") == pod_name
            and (e.get("objectRef") or {}).get("namespace") == name and e.get("verb") == "delete"
            and (e.get("user") or {}).get("username") == PODGC_USER and (e.get("responseStatus") or {}).get("code", 0) < 300
            for e in events),
        "gone": observe_gone(ctx, c, name, wait=pod is None),
        "volume_writes": _volume_writes(ctx, ctx.params["volume"]),
    }
    # read after the namespace had its time to go: the claim with it, and the volume Released
    seen["volume"] = _volume_state(c, ctx.params["volume"], seen["gone"]["namespace"] is None)
    return seen


def judge_volume_in_use(ctx, seen: dict):
    name, node_name, claim, pod_name = (ctx.params[k] for k in ("namespace", "node", "claim", "pod"))
    reset = f"`labkit reset namespace {ctx.exercise.id}`"
    if seen["claim_finalizers_edited_by"]:
        raise CheckFailed(f"{seen['claim_finalizers_edited_by'][0]} changed the finalizers of PVC {claim} by hand: "
                          "kubernetes.io/pvc-protection keeps a claim while a Pod still uses it, and its controller "
                          f"removes it itself once no Pod does — {reset} and leave it to it")
    volume, writes = ctx.params["volume"], seen.get("volume_writes") or []
    deleted = next((w for w in writes if w["verb"] == "delete"), None)
    if deleted or seen["volume"] is None:
        # pv_controller.go syncVolume: with reclaim policy Retain a volume whose claim is gone stays,
        # Released, its claimRef still naming the claim: the data and the record of whose it was
        who = f"{deleted['user']} deleted" if deleted else "someone deleted"
        raise CheckFailed(f"{who} PersistentVolume {volume}, the volume claim {claim} was bound to: its reclaim "
                          "policy Retain keeps it after the claim is gone, so that an administrator finds the data "
                          f"and decides what becomes of it — {reset} makes it again; leave it to its controllers")
    changed = next((w for w in writes if w["finalizers"]), None) or (writes[0] if writes else None)
    if changed:
        what = ("removed or changed the finalizers of" if changed["finalizers"] else "changed")
        raise CheckFailed(f"{changed['user']} {what} PersistentVolume {volume} by hand ({changed['verb']}): "
                          "kubernetes.io/pv-protection keeps a volume while it is Bound, and the PV controller "
                          f"releases it itself once its claim is gone — {reset} and leave the volume as it is")
    if seen["pod_force_deleted_by"]:
        raise CheckFailed(f"{seen['pod_force_deleted_by'][0]} force-deleted Pod {pod_name} (grace period 0): the API "
                          f"server forgets it at once, although nothing confirmed that {node_name} stopped it and "
                          f"released the volume — {reset} and tell Kubernetes about the node instead")
    if seen.get("other_nodes_marked"):
        # pkg/controller/podgc/gc_controller.go gcTerminating and the attach/detach controller act on
        # every node with the taint that is not Ready: a node marked by mistake loses its Pods and
        # volumes as soon as it is not Ready for a moment
        marked_too = seen["other_nodes_marked"]
        raise CheckFailed(f"node {', '.join(marked_too)} is marked out of service too: only the machine behind "
                          f"{node_name} was shut down for good, and the mark tells Kubernetes that whatever runs on a "
                          "node is dead and its volumes released — look at every node's taints (`kubectl get nodes "
                          "-o custom-columns=NAME:.metadata.name,TAINTS:.spec.taints`), and mark only the dead one "
                          f"({reset} takes the mark off the others)", expected=f"the out-of-service mark on {node_name} only",
                          observed=marked_too, observed_in=LIVE)
    if seen.get("other_nodes_marked_on_the_way"):
        marked_too = seen["other_nodes_marked_on_the_way"]
        raise CheckFailed(f"node {', '.join(marked_too)} was marked out of service on the way, though its machine "
                          f"runs: only the machine behind {node_name} was shut down for good, and while the mark is "
                          "on a node Kubernetes takes whatever runs there for dead (the NoExecute taint evicts its "
                          "Pods, and once the node is not Ready its Pods and volumes are released) — taking it off "
                          f"later does not undo that; {reset}, and mark only the dead node",
                          expected=f"the out-of-service mark on {node_name} only, all along",
                          observed=marked_too, observed_in=LIVE)
    node = seen["node"]
    if node is None:
        raise CheckFailed(f"the Node {node_name} was deleted: the pod garbage collector then force-deletes its Pods as "
                          "orphans, but nothing told Kubernetes that the machine is shut down for good, so nothing "
                          f"knows the volume was released — {reset} and keep the Node")
    # pkg/controller/podgc/gc_controller.go gcTerminating and the attach/detach reconciler's
    # hasOutOfServiceTaint both test the taint's key only (taints.TaintKeyExists)
    marked = any(t.get("key") == OUT_OF_SERVICE for t in node["taints"])
    if seen["pod"] is not None:
        extra = ""
        if node["unschedulable"] and not marked:
            extra = (f" {node_name} is cordoned, which only keeps new Pods from being scheduled there; it does not "
                     "end the Pods it had.")
        elif marked:
            extra = " (the pod garbage collector looks every 20 s: check again shortly)"
        else:
            near = difflib.get_close_matches(OUT_OF_SERVICE, [t.get("key") or "" for t in node["taints"]], n=1,
                                             cutoff=0.8)
            extra = (f" The taint {near[0]} on {node_name} is not one Kubernetes reads: the pod garbage collector "
                     "and the attach/detach controller look for one key, spelled exactly." if near else
                     f" Kubernetes learns what became of a node's machine from the Node object: look at {node_name} "
                     f"(`kubectl get node {node_name} -o yaml`).")
        raise CheckFailed(f"Pod {pod_name} is still Terminating on {node_name}, whose kubelet will never confirm "
                          f"it stopped, and namespace {name} deletes pods first.{extra}")
    if not marked:
        raise CheckFailed(f"Node {node_name} does not say (any more) that it is shut down for good: Kubernetes must "
                          "know it, to know that the volume is released — look at its taints")
    if seen["pod_deleted_by_podgc"] is False:
        raise CheckFailed(f"Pod {pod_name} is gone, but not because the pod garbage collector deleted it — {reset} "
                          "and let it")
    waiting = seen["gone"]["namespace"]
    if waiting is not None and waiting["deleting"] and waiting.get("held_by") == [f"persistentvolumeclaims/{claim}"]:
        # pkg/controller/namespace/deletion: a failed pass (pods remained) is retried with backoff; the
        # claim is deleted on the next pass, and the PVC protection controller then removes
        # kubernetes.io/pvc-protection, as no Pod uses it any more
        raise CheckFailed(f"Pod {pod_name} is gone; namespace {name} still exists because the namespace controller "
                          "retries a failed pass with backoff (up to a minute), and then deletes the claim, whose "
                          "kubernetes.io/pvc-protection its controller removes: check again shortly — leave the "
                          "finalizers to their controllers")
    note = judge_gone(ctx, name, seen["gone"])
    state = seen["volume"]
    if state["phase"] != "Released":
        raise CheckFailed(f"PersistentVolume {volume} is {state['phase'] or 'without a phase'}, not Released, although "
                          f"claim {claim} is gone with namespace {name}: look at the volume "
                          f"(`kubectl get pv {volume}`, `kubectl describe pv {volume}`)",
                          expected="Released", observed=state["phase"], observed_in=LIVE)
    if "kubernetes.io/pv-protection" not in state["finalizers"]:
        raise CheckFailed(f"PersistentVolume {volume} lacks kubernetes.io/pv-protection: only its controller removes "
                          "it, from a volume that is being deleted and no longer Bound")
    who = "the pod garbage collector deleted it" if seen["pod_deleted_by_podgc"] else "it is gone"
    return ctx.passed(f"{pod_name} no longer holds {name}: {who}, the claim's protection was released by its "
                      f"controller, the namespace emptied itself, and PersistentVolume {volume} is Released, "
                      "retained" + note)


def check_volume_in_use(ctx):
    return judge_volume_in_use(ctx, observe_volume_in_use(ctx))
