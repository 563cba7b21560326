"""Checks of the mount-propagation lab. Truth comes from live mountinfo (probes mounted on one side
and looked for on every other, at one and at two levels below the shared directory; the fields
the kernel prints), or from the e2e experiment replayed on a fresh node.

Exercises that change the lab are checked as `judge_<name>(ctx, observe_<name>(ctx))`: observe
reads the live lab (the Pod as it runs, the student's Pod file, the node's mount table, the
probes' results), judge decides on that alone, so labkit.mutants can judge near-misses of the
reference solution whose observation labkit.mounts.model predicts. A judge checks the whole
`solved:` statement of lab.yaml, the parts that must not change first: the workload (the Pod's
containers, commands, images, volumes and mount paths, compared with the shipped Pod), its
privileges, the rest of the node.

In every failure, `expected` says what the check wanted and `observed` what it saw. Answer checks
say neither which parts of a prediction are wrong nor how many (CheckContext.grid_feedback) and
never print the right value.
"""

from __future__ import annotations

import copy
import errno
import functools
import re
import time

import yaml

from labkit.errors import LabkitError
from labkit.exercises import LIVE, AnswerMalformed, CheckFailed
from labkit.mounts import mountinfo, observe, scenario
from labkit.mounts.node import NODE, Node
from labkit.mounts.pods import Pod, Refused, load_pods, parse_pod, validate

E2E_PARTIES = ("master", "slave", "private", "default")
MATRIX_PARTIES = ("host", *E2E_PARTIES)
PLACES = observe.PROBE_PLACES
# What each Pod-fixing exercise lets change in the Pod object (spec_changes paths). The API
# server's refusal of the plugin (pkg/apis/core/validation/validation.go, validateMountPropagation:
# "Bidirectional mount propagation is available only to privileged containers") asks for the
# container's securityContext.privileged and nothing else.
READER_MAY_CHANGE = {"spec.containers[].volumeMounts[].mountPropagation", "spec.containers[].volumeMounts[].readOnly"}
CSI_MAY_CHANGE = {"spec.containers[].securityContext.privileged"}


def without_ignored_capabilities(source: dict) -> dict:
    """The Pod object `source` without the securityContext.capabilities of its privileged
    containers: the runtime gives a privileged container every capability whatever that field
    lists (k8s.io/cri-api pkg/apis/runtime/v1/api.proto, LinuxContainerSecurityContext.privileged:
    "All capabilities are added", capabilities "MAY have no effect"; containerd's CRI plugin
    applies WithPrivileged and reads add and drop only for unprivileged containers;
    labkit.mounts.pods.capabilities does the same), so it changes nothing the container can do."""
    out = copy.deepcopy(source)
    for c in _containers(out):
        context = c.get("securityContext")
        if isinstance(context, dict) and context.get("privileged") is True:
            context.pop("capabilities", None)
    return out


def _lab(ctx):
    return ctx.lab.environment_module()


def _settled(observe_fn):
    """An observation made again when a container's process went away while it was being made
    (its /proc entry vanished: the container had just exited); the next one sees it exited."""
    @functools.wraps(observe_fn)
    def observe_again(ctx):
        for attempt in range(3):
            try:
                return observe_fn(ctx)
            except (FileNotFoundError, ProcessLookupError) as exc:
                problem = exc
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ESRCH, errno.ENOENT):
                    raise
                problem = exc
            time.sleep(0.2)
        raise LabkitError(f"the lab's processes kept exiting while the check looked at them ({problem}); check again")
    return observe_again


# -- what is observed of a Pod -------------------------------------------------------------------


def _file_view(ctx, name: str) -> dict:
    """The student's Pod file as `labkit mounts apply` reads it: its Pods, or why it is refused."""
    path = f"{ctx.env.dir}/pods/{name}.yaml"
    try:
        pods = load_pods(path, strict=True)
    except LabkitError as exc:
        return {"path": path, "pods": None, "error": str(exc)}
    error = None
    for pod in pods:
        try:
            validate(pod)
        except Refused as exc:
            error = error or f"applying it is refused: {exc.message}"
    return {"path": path, "pods": [p.source for p in pods], "error": error}


def _pod_observation(ctx, node: Node, name: str) -> dict:
    record = node.pod_record(name)
    pod = node.pod(name) if record else None
    return {"file": _file_view(ctx, name), "pod": record["spec"] if record else None,
            "states": {c.name: node.container_state(name, c.name) for c in pod.containers} if pod else {}}


def _view_of(volumes, host_path: str) -> str | None:
    """Where a container sees `host_path` through one of its volumes (the deepest one)."""
    best = None
    for v in volumes:
        if mountinfo.is_under(host_path, v.host_path) and (best is None or len(v.host_path) > len(best.host_path)):
            best = v
    return None if best is None else best.path + host_path[len(best.host_path.rstrip("/")):]


def _tags(pid: int, path: str, holder: bool) -> str:
    """The optional fields of the mount at `path` (holder: of the mount a process reaches `path`
    through, the topmost of the deepest mount point above it)."""
    mounts = mountinfo.read(pid)
    if holder:
        found = None
        for m in mounts:
            if mountinfo.is_under(path, m.mountpoint) and (found is None or len(m.mountpoint) >= len(found.mountpoint)):
                found = m
    else:
        found = mountinfo.visible_at(mounts, path)
    return found.tags if found else ""


def _fields_shown(ctx) -> bool:
    """Whether a message may show propagation fields of the node's /var/lib/kubelet peer group and
    of private volume mounts: only once peer-groups, which asks to read them, has passed."""
    from labkit.mounts import withhold

    return withhold.READING in ctx.env.state.credit


def _node_fields(ctx, tags: str | None) -> str:
    """The node's /var/lib/kubelet fields as a message shows them (see _fields_shown)."""
    if _fields_shown(ctx):
        return tags or "private"
    return "(its fields are withheld until peer-groups passes: read them in the node's /proc/self/mountinfo)"


def _volume_fields(ctx, tags: str) -> str:
    """A Pod's volume mount's optional fields as a message of another exercise may show them. Once
    peer-groups has passed: `volume mount master:1`. Before, they are withheld, as `labkit mounts
    matrix` and `graph` withhold them (labkit.mounts.withhold): the node's /var/lib/kubelet peer
    group they name, and `private` for None or unset, are what peer-groups asks to read from
    mountinfo. Then the message says where to read them instead."""
    if _fields_shown(ctx):
        return f"volume mount {tags or 'private'}"
    return "its volume mount's fields withheld until peer-groups passes: read them in its /proc/<pid>/mountinfo"


def _others(node: Node, host_path: str, but: str) -> dict:
    """name -> (pid, where it sees host_path) for the node and every running container, except `but`."""
    out = {}
    for party in node.parties():
        if party.pod == but:
            continue
        view = host_path if party.name == NODE else _view_of(party.volumes, host_path)
        if view is not None:
            out[party.name] = (party.pid, view)
    return out


# -- what is judged of a Pod ---------------------------------------------------------------------


def _pod(ctx, observation, name: str, how: str) -> Pod:
    """The Pod as it runs on the node, or a failure saying why there is none."""
    source = observation["pod"]
    file = observation["file"]
    if source is None:
        why = (f"; your {file['path']} is not accepted: {file['error']}" if file["error"] else
               f"; your {file['path']} holds no Pod {name}" if file["pods"] is not None
               and name not in [(p.get("metadata") or {}).get("name") for p in file["pods"]] else f": {how}")
        raise CheckFailed(f"there is no Pod {name!r} on the node" + why, expected=f"Pod {name} running",
                          observed="on the node: no such Pod", observed_in=LIVE)
    return parse_pod(source, f"the running Pod {name}")


def _containers(source: dict) -> list[dict]:
    return [c for c in ((source.get("spec") or {}).get("containers") or []) if isinstance(c, dict)]


def workload_change(pod: Pod, source: dict, shipped: Pod, shipped_source: dict, allowed: set[str]) -> str | None:
    """The first way the running Pod differs from the shipped one in what the exercise does not
    let change, as a sentence naming the field; None when it differs only in `allowed` fields
    (mountPropagation, readOnly, privileged, capabilities)."""
    names = [c.name for c in pod.containers]
    if names != [c.name for c in shipped.containers]:
        return f"its containers are {', '.join(names)}, not the shipped {', '.join(c.name for c in shipped.containers)} (containers)"
    images = [c.get("image") for c in _containers(source)]
    for c, s, image, shipped_image in zip(pod.containers, shipped.containers, images,
                                          [c.get("image") for c in _containers(shipped_source)]):
        if image != shipped_image:
            return f"container {c.name} runs image {image or 'none'}, not the shipped one (image)"
        if (c.command, c.working_dir) != (s.command, s.working_dir):
            return f"container {c.name} runs another command than the shipped one (command)"
        mounts = [(vm.name, vm.mount_path) for vm in c.volume_mounts]
        if mounts != [(vm.name, vm.mount_path) for vm in s.volume_mounts]:
            return (f"container {c.name} mounts {', '.join(f'{n} at {p}' for n, p in mounts) or 'nothing'}, not the "
                    "shipped volume at the shipped mountPath (volumeMounts: name, mountPath)")
        for vm, svm in zip(c.volume_mounts, s.volume_mounts):
            if "mountPropagation" not in allowed and vm.propagation != svm.propagation:
                return (f"container {c.name} mounts {vm.mount_path} with mountPropagation "
                        f"{vm.propagation or 'unset'}, not as shipped (mountPropagation)")
            if "readOnly" not in allowed and vm.read_only != svm.read_only:
                return f"container {c.name} mounts {vm.mount_path} {'read-only' if vm.read_only else 'read-write'}, not as shipped (readOnly)"
    volumes = {n: (v.path, v.type) for n, v in pod.volumes.items()}
    shipped_volumes = {n: (v.path, v.type) for n, v in shipped.volumes.items()}
    if volumes != shipped_volumes:
        return ("its volumes are not the shipped ones: " + ", ".join(f"{n}: hostPath {p}" + (f" type {t}" if t else "")
                                                                      for n, (p, t) in volumes.items()) + " (volumes: hostPath path, type)")
    return None


def _meaningful(value):
    """`value` without what the API server would default away: unset, false, empty fields (a 0 is a
    value: `runAsUser: 0` asks for root)."""
    if isinstance(value, dict):
        kept = {k: _meaningful(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if not (v is None or v is False or v in ("", {}, []))}
    if isinstance(value, list):
        return [_meaningful(v) for v in value]
    return value


def spec_changes(source: dict, shipped_source: dict, allowed: set[str]) -> list[str]:
    """Every field path in which the Pod object `source` differs from the shipped one (the whole
    object: metadata, pod-level spec such as hostPID or hostNetwork, every container), but for
    those `allowed` (paths with the list indices left out, e.g.
    spec.containers[].securityContext.privileged). Unset, false and empty count as the same."""
    out = []

    def walk(now, was, path):
        if isinstance(now, dict) and was is None or isinstance(was, dict) and now is None:
            now, was = now or {}, was or {}
        if isinstance(now, dict) and isinstance(was, dict):
            for key in sorted(set(now) | set(was), key=str):
                walk(now.get(key), was.get(key), f"{path}.{key}" if path else str(key))
        elif isinstance(now, list) and isinstance(was, list) and len(now) == len(was):
            for i, (a, b) in enumerate(zip(now, was)):
                walk(a, b, f"{path}[{i}]")
        elif now != was and _INDEX.sub("[]", path) not in allowed:
            out.append(path)

    walk(_meaningful(source), _meaningful(shipped_source), "")
    return out


_INDEX = re.compile(r"\[\d+\]")


def _fields(paths: list[str]) -> str:
    shown = ", ".join(paths[:6]) + (f" and {len(paths) - 6} more" if len(paths) > 6 else "")
    return shown + (" is" if len(paths) == 1 else " are")


def _require_only(ctx, pod: Pod, source: dict, allowed: set[str], what: str) -> None:
    """The whole running Pod object against the shipped one: a failure naming the fields that
    changed beyond `allowed` (never their shipped values)."""
    changed = spec_changes(source, _lab(ctx).shipped_pods()[pod.name].source, allowed)
    if changed:
        raise CheckFailed(f"Pod {pod.name}: {_fields(changed)} not as shipped. {what}",
                          expected=f"Pod {pod.name} as shipped, but for what the exercise asks",
                          observed=f"on the node: Pod {pod.name} changed in {', '.join(changed)}", observed_in=LIVE)


def privilege_change(pod: Pod, shipped: Pod, allowed: set[str]) -> str | None:
    """How the running Pod's containers got privileges the shipped ones did not have (or lost
    them), unless `allowed` lets that field change."""
    for c, s in zip(pod.containers, shipped.containers):
        if "privileged" not in allowed and c.privileged != s.privileged:
            return (f"container {c.name} is {'now' if c.privileged else 'no longer'} privileged (securityContext.privileged): "
                    "least privilege, it must not get more than it had")
        if "capabilities" not in allowed and not c.privileged:
            # what the process gets (labkit.mounts.pods.capabilities: containerd's default set changed
            # by add and drop), not how it is written: dropping more is less privilege, not more
            from labkit.mounts import kernel
            from labkit.mounts.pods import capabilities
            everything = kernel.capability_mask(kernel.CAPABILITIES)
            gained = capabilities(c, everything) & ~capabilities(s, everything)
            if gained:
                return (f"container {c.name} gets {len(kernel.capability_names(gained))} capabilit"
                        f"{'y' if len(kernel.capability_names(gained)) == 1 else 'ies'} it did not have "
                        "(securityContext.capabilities): least privilege, it must not get more than it had")
    return None


def _require_least_privilege(ctx, pod: Pod, allowed: set[str]) -> None:
    change = privilege_change(pod, _lab(ctx).shipped_pods()[pod.name], allowed)
    if change:
        raise CheckFailed(f"Pod {pod.name}: {change}", expected=f"Pod {pod.name} with the privileges it was shipped with",
                          observed=f"on the node: Pod {pod.name} changed", observed_in=LIVE)


def _require_workload(ctx, observation, pod: Pod, allowed: set[str], what: str) -> None:
    shipped = _lab(ctx).shipped_pods()[pod.name]
    change = workload_change(pod, observation["pod"], shipped, shipped.source, allowed)
    if change:
        raise CheckFailed(f"Pod {pod.name}: {change}. {what}", expected=f"Pod {pod.name} as shipped, but for what the "
                          "exercise asks", observed=f"on the node: Pod {pod.name} changed", observed_in=LIVE)


def _require_running(ctx, observation, pod: Pod, how: str) -> None:
    for c in pod.containers:
        state = observation["states"].get(c.name) or {"state": "waiting"}
        if state["state"] != "running":
            why = state.get("reason", state["state"]) + (f": {state['message']}" if state.get("message") else "")
            raise CheckFailed(f"Pod {pod.name}'s container {c.name} is not running ({why})" + (f": {how}" if how else ""),
                              expected="Running", observed=f"on the node: {why}", observed_in=LIVE)


def _unapplied_edit(observation, pod: Pod) -> str:
    """A note when the student's Pod file differs from the Pod running on the node."""
    file = observation["file"]
    for source in file["pods"] or []:
        try:
            in_file = parse_pod(source, file["path"])
        except LabkitError:
            continue
        if in_file.name == pod.name and in_file != pod:
            return (f"; your {file['path']} differs from the running Pod: a running Pod's volumeMounts cannot change, "
                    "so delete the Pod and apply the file again")
    return ""


def _mode(pod: Pod, mount_path: str) -> str:
    for vm in pod.containers[0].volume_mounts:
        if vm.mount_path == mount_path:
            return vm.propagation or "unset"
    return "unset"


# -- a: predict the e2e matrix ----------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _replayed(path: str, text: str) -> dict:
    return scenario.play(scenario.load(path))


def e2e_truth(ctx) -> dict:
    """What each party of the replayed e2e experiment sees: {party: [mounts]} (labkit's
    reconstruction, on a fresh node of its own)."""
    path = ctx.lab.directory / ctx.params["scenario"]
    truth = _replayed(str(path), path.read_text())
    if truth["errors"] or set(truth["visible"]) != set(MATRIX_PARTIES):
        raise LabkitError(f"the e2e experiment did not run cleanly on a fresh node: {truth['errors']}")
    return {party: sorted(truth["visible"][party]) for party in MATRIX_PARTIES}


def check_e2e_matrix(ctx):
    from labkit.mounts import withhold

    answer = ctx.answer()
    note = ""
    locked = withhold.recorded_prediction(ctx.lab.id)
    if locked is not None:
        current = ctx.answer_path.read_text()
        if locked["text"] != current:
            answer = yaml.safe_load(locked["text"])
            note = (" (graded: the prediction you had written when labkit first showed this experiment's outcome; "
                    "later changes to your answer file do not count)")
    if not isinstance(answer, dict):
        raise AnswerMalformed(f"it should be a YAML mapping from each party to the mounts it sees{note}\n  {ctx.answer_path}")
    tried = withhold.trial_before(ctx.lab.id, ctx.answer_path)
    if tried is not None:
        return ctx.failed(f"{tried['what']} at {tried['time']} UTC, before any prediction was written, and your "
                          "prediction was written after that: that command ran the e2e experiment by hand in the live "
                          "lab, and a prediction made after watching is not one, so it earns no points. A reset does "
                          "not change that (labkit keeps when it was); work the matrix out from who sends mount "
                          f"events to whom (`labkit hint {ctx.lab.id} {ctx.exercise.id}`)",
                          expected="a prediction written before the experiment was run in the lab",
                          observed=f"answer written after {tried['what']}", observed_in=LIVE)
    extra = sorted(str(k) for k in answer if k not in MATRIX_PARTIES)
    if extra:
        raise AnswerMalformed(f"{ctx.answer_path}: unknown key(s) {', '.join(extra)}: the parties are "
                          f"{', '.join(MATRIX_PARTIES)}{note}")
    given = {}
    for party in MATRIX_PARTIES:
        value = ctx.answer_field(answer, party, list)
        unknown = [str(m) for m in value if m not in MATRIX_PARTIES]
        if unknown:
            raise AnswerMalformed(f"{ctx.answer_path}: {party}: unknown mount(s) {', '.join(unknown)}; the mounts are "
                              f"named {', '.join(MATRIX_PARTIES)}{note}")
        given[party] = set(value)
    try:
        truth = e2e_truth(ctx)
    except LabkitError as exc:
        return ctx.error(str(exc))
    wrong = [f"{party} / {mount}" for party in MATRIX_PARTIES for mount in MATRIX_PARTIES
             if (mount in given[party]) != (mount in truth[party])]
    if not wrong:
        return ctx.passed("your matrix is what the kernel did in the replayed e2e experiment" + note)
    # the grid's default advice (observe each case in the live lab) would show the outcome, and the
    # prediction graded would be the one written then: work it out, or compare once it is kept
    if locked is None:
        advice = ("work each party out again from who sends mount events to whom (peers and slaves; `labkit hint "
                  f"{ctx.lab.id} {ctx.exercise.id}`). The prediction you have written when a labkit tool first shows "
                  "this experiment's outcome is the one graded")
    else:
        advice = (f"this prediction was kept when labkit first showed the experiment's outcome; `labkit mounts play -f "
                  f"{ctx.lab.directory / ctx.params['scenario']}` shows what the kernel did")
    return ctx.failed(ctx.grid_feedback(wrong, len(MATRIX_PARTIES) ** 2, "cells (does this party see that mount)",
                                        advice=advice) + note,
                      expected="what the replayed experiment shows, party by party",
                      observed={p: sorted(given[p]) for p in MATRIX_PARTIES},
                      right_answer=truth)


# -- b: the reader receives the node's mounts --------------------------------------------------------


@_settled
def observe_reader_sees_node_mounts(ctx) -> dict:
    p = ctx.params
    node = Node(ctx.env)
    node_pid = node.require_pid()
    obs = _pod_observation(ctx, node, p["pod"])
    obs.update(tags={NODE: _tags(node_pid, p["host_path"], holder=True)}, down=None, up=None)
    running = {party.pod: party for party in node.parties() if party.pod == p["pod"]}
    party = running.get(p["pod"])
    view = _view_of(party.volumes, p["host_path"]) if party else None
    if view is None:
        return obs
    others = _others(node, p["host_path"], but=p["pod"])
    obs["tags"].update({name: _tags(pid, path, holder=True) for name, (pid, path) in others.items()})
    obs["tags"]["pod"] = _tags(party.pid, view, holder=False)
    obs["down"] = [seen["pod"] for seen in observe.probe_below(node, (node_pid, p["host_path"]), {"pod": (party.pid, view)})]
    obs["up"] = observe.probe_below(node, (party.pid, view), others, prepare=(node_pid, p["host_path"]))
    return obs


def judge_reader_sees_node_mounts(ctx, observation) -> object:
    p = ctx.params
    pod = _pod(ctx, observation, p["pod"], f"apply it again: labkit mounts apply -f {observation['file']['path']}")
    _require_workload(ctx, observation, pod, {"mountPropagation", "readOnly"},
                      "Change only how its volume mount propagates")
    _require_running(ctx, observation, pod, f"apply it again: labkit mounts apply -f {observation['file']['path']}")
    mode, fields = _mode(pod, p["mount_path"]), _volume_fields(ctx, observation["tags"].get("pod"))
    missing = [PLACES[i] for i, seen in enumerate(observation["down"] or [False]) if not seen]
    if missing:
        return ctx.failed(f"a tmpfs the node mounted {missing[0]} {p['host_path']} did not appear in {pod.name} at "
                          f"{p['mount_path']} (mountPropagation: {mode}, {fields})" + _unapplied_edit(observation, pod),
                          expected="the node's mounts appear in the Pod",
                          observed=f"in Pod {pod.name}: not there (mountPropagation: {mode}, {fields})")
    reached = sorted({name for seen in observation["up"] or [] for name, ok in seen.items() if ok})
    if reached:
        shown = ["the node" if name == NODE else name for name in reached]
        return ctx.failed(f"a tmpfs mounted inside {pod.name} at {p['mount_path']} reached {' and '.join(shown)} "
                          f"(mountPropagation: {mode}): the Pod can now change the node's mounts",
                          expected="mounts made in the Pod stay in the Pod",
                          observed=f"on {reached[0]}: the Pod's tmpfs is there (mountPropagation: {mode}, {fields})")
    _require_least_privilege(ctx, pod, {"readOnly"})
    _require_only(ctx, pod, observation["pod"], READER_MAY_CHANGE,
                  "Change only how its volume mount propagates (or make it read-only): no other field of the Pod, "
                  "and no privilege it did not have")
    return ctx.passed(f"the node's mounts reach {pod.name} ({fields}), one and two levels down, and its own stay inside "
                      f"(mountPropagation: {mode})")


def check_reader_sees_node_mounts(ctx):
    return judge_reader_sees_node_mounts(ctx, observe_reader_sees_node_mounts(ctx))


# -- c: the CSI plugin publishes ---------------------------------------------------------------------


@_settled
def observe_csi_publishes(ctx) -> dict:
    p = ctx.params
    node = Node(ctx.env)
    node_pid = node.require_pid()
    obs = _pod_observation(ctx, node, p["pod"])
    observer = node.container_state(p["observer"], p["observer"]) if node.pod(p["observer"]) else {"state": "deleted"}
    obs.update(observer=observer["state"], tags={NODE: _tags(node_pid, p["host_path"], holder=True)}, publish=None,
               can_mount=None)
    party = next((x for x in node.parties() if x.pod == p["pod"]), None)
    view = _view_of(party.volumes, p["host_path"]) if party else None
    if view is None:
        return obs
    others = _others(node, p["host_path"], but=p["pod"])
    obs["tags"].update({name: _tags(pid, path, holder=True) for name, (pid, path) in others.items()})
    obs["tags"]["pod"] = _tags(party.pid, view, holder=False)
    # made by a process of the plugin's container, with the container's capabilities
    seen = observe.probe_below(node, (party.pid, view), others, capabilities=party.capabilities,
                               prepare=(node_pid, p["host_path"]))
    obs["can_mount"] = seen is not None
    obs["publish"] = seen
    return obs


def judge_csi_publishes(ctx, observation):
    p = ctx.params
    pod = _pod(ctx, observation, p["pod"], f"apply it: labkit mounts apply -f {observation['file']['path']}, and read the answer")
    _require_workload(ctx, observation, pod, {"privileged", "capabilities", "mountPropagation"},
                      "The plugin itself stays as its author wrote it; change only what the API server asks for")
    _require_running(ctx, observation, pod, f"apply it again: labkit mounts apply -f {observation['file']['path']}")
    if observation["observer"] != "running":
        raise CheckFailed(f"Pod {p['observer']} is not running ({observation['observer']}): it is one of the Pods that must "
                          f"see the plugin's mounts; `labkit reset {ctx.lab.id} {ctx.exercise.id}` brings it back",
                          expected=f"{p['observer']} running", observed=f"on the node: {observation['observer']}",
                          observed_in=LIVE)
    fields = _volume_fields(ctx, observation["tags"].get("pod"))
    if not observation["can_mount"]:
        return ctx.failed(f"the plugin cannot mount anything: mount(2) inside {pod.name} fails with EPERM, as its "
                          f"container has no CAP_SYS_ADMIN (privileged: {str(pod.containers[0].privileged).lower()})",
                          expected="a plugin that can mount",
                          observed=f"in Pod {pod.name}: mount: Operation not permitted")
    for i, seen in enumerate(observation["publish"]):
        missing = [name for name in (NODE, p["observer"]) if not seen.get(name)]
        missing += sorted(name for name, ok in seen.items() if name not in missing and name not in (NODE, p["observer"])
                          and not ok and observation["tags"].get(name))
        if missing:
            mode = _mode(pod, _view_mount(pod, p["host_path"]))
            return ctx.failed(f"a tmpfs mounted inside {pod.name} {PLACES[i]} {p['host_path']} did not reach "
                              f"{' and '.join('the node' if m == NODE else m for m in missing)} (mountPropagation: {mode})",
                              expected=f"visible on the node and in {p['observer']}",
                              observed=f"missing in {', '.join(missing)}; in Pod {pod.name}: mountPropagation: {mode}, "
                                       f"{fields}")
    # judged by what the plugin can do: capabilities listed under privileged are ignored by the runtime
    _require_only(ctx, pod, without_ignored_capabilities(observation["pod"]), CSI_MAY_CHANGE,
                  "The plugin stays as its author wrote it: change only the field the API server's refusal names")
    return ctx.passed(f"mounts made inside {pod.name}, one and two levels below {p['host_path']}, reach the node and "
                      f"{p['observer']}")


def _view_mount(pod: Pod, host_path: str) -> str:
    for vm in pod.containers[0].volume_mounts:
        if mountinfo.is_under(host_path, pod.volumes[vm.name].path):
            return vm.mount_path
    return ""


def check_csi_publishes(ctx):
    return judge_csi_publishes(ctx, observe_csi_publishes(ctx))


# -- d: the node's private host path ----------------------------------------------------------------


@_settled
def observe_private_host_path(ctx) -> dict:
    p = ctx.params
    node = Node(ctx.env)
    node_pid = node.require_pid()
    obs = _pod_observation(ctx, node, p["pod"])
    obs.update(node=[[m.mountpoint, m.source, m.propagation, m.tags, m.root, m.device] for m in node.mounts(node_pid)],
               tags={}, down=None)
    party = next((x for x in node.parties() if x.pod == p["pod"]), None)
    view = _view_of(party.volumes, p["host_path"]) if party else None
    if view is None:
        return obs
    obs["tags"]["pod"] = _tags(party.pid, view, holder=False)
    obs["down"] = [seen["pod"] for seen in observe.probe_below(node, (node_pid, p["host_path"]), {"pod": (party.pid, view)})]
    return obs


def node_scope_change(built: list, now: list, host_path: str, kubelet_dir: str) -> str | None:
    """How the node's mount table went beyond `host_path`: a mount it had at build time gone or
    with another propagation; a new mount elsewhere than at or below `host_path` (below kubelet's
    directory, where Pods publish theirs, a new filesystem is theirs and not counted); or the
    node's own files mounted somewhere new, which shows them to every Pod that sees that place
    (a bind keeps its filesystem's major:minor in mountinfo: rows [mount point, source,
    propagation, tags, root, device])."""
    table = {}
    for mountpoint, source, propagation, *_ in now:
        table[(mountpoint, source)] = propagation      # the topmost of stacked ones last
    for mountpoint, source, propagation, *_ in built:
        if mountinfo.is_under(mountpoint, host_path) or (mountinfo.is_under(mountpoint, kubelet_dir)
                                                          and mountpoint != kubelet_dir):
            continue
        if (mountpoint, source) not in table:
            return f"the node's mount at {mountpoint} is gone"
        if table[(mountpoint, source)] != propagation:
            return f"the node's {mountpoint} is now {table[(mountpoint, source)]}, not {propagation} as the node was built"
    known = {(row[0], row[1], row[4]) for row in built}
    node_files = {_filesystem(row) for row in built}
    for row in now:
        mountpoint, source, root = row[0], row[1], row[4]
        if (mountpoint, source, root) in known:
            continue
        if _filesystem(row) in node_files:
            shown = "the directory itself" if mountpoint == root else f"the node's {root}"
            if mountinfo.is_under(mountpoint, host_path) and mountinfo.is_under(root, host_path):
                continue          # binds within the host path show nothing the Pod would not see there
            if mountpoint == host_path:
                continue          # what shows at the host path itself is judged apart (its own directory)
            if mountinfo.is_under(mountpoint, host_path):
                return f"the node's {root} is now also mounted at {mountpoint}: the Pod that reads {host_path} sees it"
            return (f"the node's files are now also mounted at {mountpoint} ({shown}, a bind): every Pod that sees "
                    f"{mountpoint} sees them")
        if mountinfo.is_under(mountpoint, host_path) or (mountinfo.is_under(mountpoint, kubelet_dir)
                                                         and mountpoint != kubelet_dir):
            continue
        return f"the node has a new mount at {mountpoint}"
    return None


def _filesystem(row) -> str:
    """Which filesystem a row of the node's table shows: its major:minor (rows recorded without it:
    the source)."""
    return row[5] if len(row) > 5 and row[5] else f"source {row[1]}"


def judge_private_host_path(ctx, observation):
    p = ctx.params
    lab = _lab(ctx)
    pod = _pod(ctx, observation, p["pod"], f"apply it again: labkit mounts apply -f {observation['file']['path']}")
    shipped = lab.shipped_pods()[pod.name]
    change = workload_change(pod, observation["pod"], shipped, shipped.source, set()) or privilege_change(pod, shipped, set())
    changed = spec_changes(observation["pod"], shipped.source, set())
    if changed and not change:
        change = f"{_fields(changed)} not as shipped"
    if change:
        return ctx.failed(f"the Pod was right: fix the node, not the Pod. Pod {pod.name}: {change}",
                          expected=f"Pod {pod.name} as shipped: {p['host_path']} at {p['mount_path']} with HostToContainer",
                          observed=f"on the node: Pod {pod.name} changed")
    scope = node_scope_change(lab.built(ctx.env)["node"], observation["node"], p["host_path"], lab.KUBELET_DIR)
    if scope:
        return ctx.failed(f"{scope}: change the node only at {p['host_path']}, the directory the Pod needs",
                          expected=f"the node as built, but for {p['host_path']}", observed=f"on the node: {scope}")
    mounts = [mountinfo.Mount(i, 0, "", root, mp, "", "", src, "", optional=tuple(tags.split()),
                              shared=_field(tags, "shared"), master=_field(tags, "master"))
              for i, (mp, src, _prop, tags, root, *_) in enumerate(observation["node"])]
    holder = mountinfo.containing_mount(mounts, p["host_path"])
    holder_text = f"{holder.mountpoint} ({holder.tags or 'private'})" if holder else "nothing"
    on_it = mountinfo.visible_at(mounts, p["host_path"])
    if on_it is not None and on_it.root.rstrip("/") != p["host_path"].rstrip("/"):
        return ctx.failed(f"on the node, the mount at {p['host_path']} is not {p['host_path']}'s own directory (its root "
                          f"in mountinfo is {on_it.root}): the Pod would no longer see the node's files there",
                          expected=f"{p['host_path']} showing its own directory", observed=f"on the node: {on_it.root} "
                          f"mounted at {p['host_path']}")
    if holder is None or (holder.shared is None and holder.master is None):
        return ctx.failed(f"on the node, {p['host_path']} is held by {holder_text}: the runtime needs a shared or slave mount",
                          expected="shared:N or master:N", observed=f"on the node: {holder_text}")
    _require_running(ctx, observation, pod, f"kubelet would retry it; here apply the Pod again: labkit mounts apply -f "
                                            f"{observation['file']['path']}")
    missing = [PLACES[i] for i, seen in enumerate(observation["down"] or [False]) if not seen]
    if missing:
        # the container's volume mount is a copy made when it started (runc's rbind): a slave of the
        # group that held the host path then; started before the node's fix (while another mount held
        # it shared), it is not a slave of the group that holds it now, and no later change reaches it
        pod_tags = (observation["tags"].get("pod") or "").split()
        group = holder.shared if holder.shared is not None else holder.master
        before = "" if f"master:{group}" in pod_tags or f"shared:{group}" in pod_tags else (
            f": its volume mount ({' '.join(pod_tags) or 'private'}) is not a slave of the mount that holds "
            f"{p['host_path']} now — the container started before the node's fix, and a container's mounts are "
            f"copied when it starts; apply the Pod again (labkit mounts delete {pod.name}, then labkit mounts apply "
            f"-f {observation['file']['path']})")
        return ctx.failed(f"a tmpfs the node mounted {missing[0]} {p['host_path']} did not reach {pod.name}{before}",
                          expected="visible in the Pod", observed=f"on the node: {holder_text}; in Pod {pod.name}: "
                          f"not visible, volume mount {observation['tags'].get('pod') or 'private'}")
    return ctx.passed(f"{pod.name} runs and receives the node's mounts; {p['host_path']} is held by {holder_text}, and the "
                      "rest of the node is as it was built")


def _field(tags: str, name: str) -> int | None:
    for item in tags.split():
        key, _, value = item.partition(":")
        if key == name and value.isdigit():
            return int(value)
    return None


def check_private_host_path(ctx):
    return judge_private_host_path(ctx, observe_private_host_path(ctx))


# -- e: the leaked mount -----------------------------------------------------------------------------


@_settled
def observe_leak_cleaned(ctx) -> dict:
    node = Node(ctx.env)
    node.require_pid()
    parties = node.parties()
    return {"parties": {party.name: [[m.mountpoint, m.source, m.tags, m.device] for m in mountinfo.read(party.pid)]
                        for party in parties},
            "pids": {party.name: party.pid for party in parties}}


def judge_leak_cleaned(ctx, observation):
    p = ctx.params
    lab = _lab(ctx)
    built = lab.built(ctx.env)
    parties = observation["parties"]
    # the leaked filesystem itself: its device with its source, as the lab recorded it when it
    # leaked (lab.leaked_copies), and those of the filesystems leaked before a reset of this
    # exercise leaked a new one (lab.every_leak); any copy of one anywhere (a bind of it too)
    # shares both, while a tmpfs someone else mounts has a device of its own, whatever its source says
    leak = lab.every_leak(built)

    def leaked(source, device):
        return (device, source) in leak if leak else source == lab.LEAK_SOURCE
    still = [f"{name}:{row[0]}" for name, mounts in parties.items() for row in mounts
             if leaked(row[1], row[3] if len(row) > 3 else None)]
    if still:
        return ctx.failed(f"the mount {p['pod']} published is still there ({', '.join(still[:3])}"
                          f"{', ...' if len(still) > 3 else ''}): only an unmount on the node reaches every "
                          "namespace that has a copy, and a copy made of it is the same filesystem", expected="gone from the node and every Pod",
                          observed="live: " + ", ".join(still))
    gone = [name for name in built["leak_holders"] if name not in parties]
    if gone:
        return ctx.failed(f"{' and '.join(gone)} no longer runs: it had a copy of the leaked mount, and stopping a Pod is "
                          "not cleaning up (its mount namespace is gone, the node's mount would not be)",
                          expected="the Pods that ran still run", observed=f"on the node: {', '.join(gone)} not running")
    node = {(mp, source): tags for mp, source, tags, *_ in parties.get(NODE, [])}
    kubelet = node.get((lab.KUBELET_DIR, next((s for mp, s, *_ in built["node"] if mp == lab.KUBELET_DIR), "")))
    shown = _node_fields(ctx, kubelet)
    if kubelet is None or "shared:" not in kubelet:
        return ctx.failed(f"the leaked mount is gone, but so is {lab.KUBELET_DIR}'s own shared mount",
                          expected=f"{lab.KUBELET_DIR} shared:N",
                          observed=f"on the node: {'no mount there' if kubelet is None else f'{lab.KUBELET_DIR} {shown}'}")
    lost = [mp for mp, source, *_ in built["node"] if (mp, source) not in node]
    if lost:
        return ctx.failed(f"the leaked mount is gone, and so is the node's mount at {lost[0]}: unmount only the leak",
                          expected="every other mount of the node as it was", observed=f"on the node: {lost[0]} gone")
    # "as it is": the peer group the Pods were started in, not only a shared flag (a mount made
    # private and shared again is in a new group, and the Pods' copies no longer hear from it)
    cut = lab.relation_losses(built, parties, observation.get("pids") or {}, fields=_fields_shown(ctx))
    if cut:
        # the withheld text is in parentheses already; the fields themselves are put in them here
        said = shown if shown.startswith("(") else f"({shown})"
        return ctx.failed(f"the leaked mount is gone, but the node's {lab.KUBELET_DIR} {said} is no longer in the "
                          f"peer group its Pods' volume mounts are peers or slaves of: {', '.join(cut)}. Mounts the node "
                          "makes there no longer reach them; compare the shared:/master: numbers in each party's "
                          "mountinfo", expected=f"{lab.KUBELET_DIR} in the peer group the Pods were started with",
                          observed=f"on the node: {lab.KUBELET_DIR} {shown}; " + "; ".join(cut))
    relations = sum(len(rows) for rows in (built.get("relations") or {}).values())
    if not relations:       # a lab built before its relations were recorded
        return ctx.passed(f"the leaked mount is gone everywhere; {lab.KUBELET_DIR} is still shared and the node's other "
                          "mounts are there")
    return ctx.passed(f"the leaked mount is gone everywhere; {lab.KUBELET_DIR} is still the node's shared mount, in the "
                      f"peer group the Pods' {relations} volume mounts below it are peers or slaves of, and the node's "
                      "other mounts are there")


def check_leak_cleaned(ctx):
    return judge_leak_cleaned(ctx, observe_leak_cleaned(ctx))


# -- f: peer groups ---------------------------------------------------------------------------------


def _is_field(item: str) -> bool:
    name, _, number = item.partition(":")
    return item == "unbindable" or (name in ("shared", "master", "propagate_from") and number.isdigit())


def _normalized(tags: str) -> frozenset:
    return frozenset() if tags.strip() == "private" else frozenset(tags.split())


def _require_kubelet_as_built(ctx, node: Node, lab, host_path: str, mount_path: str) -> None:
    """The situation peer-groups asks about: the node's /var/lib/kubelet as kubelet's MakeRShared
    left it (one shared mount of its own), in the peer group the e2e Pods' volume mounts were made
    from (lab.relation_losses). Made private, or private and shared again (a new group), it is
    another lab, whose fields the answer would read; so is a mount made on the e2e volume itself
    (on the node's host path, or on a Pod's mount path), which hides it. The message names neither
    fields nor which Pods were peers or slaves: that is what the exercise asks to read."""
    parties = {party.name: [[m.mountpoint, m.source, m.tags] for m in mountinfo.read(party.pid)]
               for party in node.parties() if party.name in (NODE, *E2E_PARTIES)}
    pids = {party.name: party.pid for party in node.parties()}
    # which parties hold a cover is not said: where a mount made there reached is what
    # predict-e2e-matrix asks to predict and peer-groups to read
    covered = any(m.mountpoint == host_path for m in mountinfo.read(pids[NODE])) or any(
        sum(row[0] == mount_path for row in parties[name]) > 1 for name in E2E_PARTIES if name in parties)
    if covered:
        raise CheckFailed(f"a mount now covers the e2e volume (on the node at {host_path}, or in a Pod at {mount_path}): "
                          "the fields there are not those of the volume the lab built, which the exercise asks about; "
                          f"`labkit reset {ctx.lab.id} {ctx.exercise.id}` unmounts it (your answer file stays)",
                          expected="the e2e volume as the lab built it, nothing mounted on it",
                          observed="a mount on the e2e volume", observed_in=LIVE)
    if lab.kubelet_is_shared(node) and not lab.relation_losses(lab.built(ctx.env), parties, pids, fields=False):
        return
    raise CheckFailed(f"the node's {lab.KUBELET_DIR} is no longer the mount the lab built (kubelet's MakeRShared: "
                      "bound onto itself, made rshared) in the peer group the e2e Pods' volume mounts were made from: "
                      "the exercise asks about the lab as built, not as an experiment left it; "
                      f"`labkit reset {ctx.lab.id} {ctx.exercise.id}` makes it so again (your answer file stays)",
                      expected=f"the node's {lab.KUBELET_DIR} as the lab built it",
                      observed=f"on the node: {lab.KUBELET_DIR} changed", observed_in=LIVE)


def check_peer_groups(ctx):
    p = ctx.params
    answer = ctx.answer()
    node = Node(ctx.env)
    lab = _lab(ctx)
    shipped = lab.shipped_pods()
    truth = {NODE: _tags(node.require_pid(), p["host_path"], holder=True) or "private"}
    for name in E2E_PARTIES:
        pod = node.pod(name)
        if pod is None or pod != shipped[name]:
            raise CheckFailed(f"the Pod {name} is {'gone' if pod is None else 'not the one the lab built'}: the exercise asks "
                              f"about the e2e Pods as built; `labkit reset {ctx.lab.id} {ctx.exercise.id}` brings them back",
                              expected=f"Pod {name} as built", observed=f"on the node: Pod {name} "
                              f"{'gone' if pod is None else 'changed'}", observed_in=LIVE)
        state = node.container_state(name, pod.containers[0].name)
        if state["state"] != "running":
            raise CheckFailed(f"Pod {name}'s container is not running: `labkit reset {ctx.lab.id} {ctx.exercise.id}` brings "
                              "the e2e Pods back", expected="Running", observed=f"on the node: {state['state']}", observed_in=LIVE)
        truth[name] = _tags(node.party(name).pid, p["mount_path"], holder=False) or "private"
    _require_kubelet_as_built(ctx, node, lab, p["host_path"], p["mount_path"])
    if isinstance(answer, dict):
        extra = sorted(str(k) for k in answer if k not in truth)
        if extra:
            raise AnswerMalformed(f"{ctx.answer_path}: unknown key(s) {', '.join(extra)}: write node, "
                              f"{', '.join(E2E_PARTIES)}")
    wrong, empty, malformed, written = [], [], [], {}
    for name in truth:
        given = ctx.answer_field(answer, name, (str, type(None)))
        text = written[name] = " ".join((given or "").split())
        if not text:
            empty.append(name)
        elif text != "private" and not all(_is_field(item) for item in text.split()):
            malformed.append(name)
        elif _normalized(text) != _normalized(truth[name]):
            wrong.append(name)
    if empty:
        return ctx.failed(f"{', '.join(empty)}: the value is empty; write the optional fields as mountinfo prints them, "
                          "or the word private when a mount has none",
                          expected="shared:N, master:N, both, or private", observed={name: "(empty)" for name in empty})
    if malformed:
        return ctx.failed(f"{', '.join(malformed)}: not written as mountinfo's optional fields (shared:N, master:N) or the "
                          "word private", expected="shared:N, master:N, both, or private",
                          observed={name: written[name] for name in malformed})
    if wrong:
        # neither counted nor named (CheckContext.grid_feedback): with three likely values per
        # party, either would let trying stand in for reading
        message = ctx.grid_feedback(wrong, len(truth), "values", noun="findings",
                                    advice="read each party's line in its own /proc/<pid>/mountinfo")
        # observed: the fields your answer gives, party by party (the node's are the right answer)
        return ctx.failed(message, expected="each party's optional fields, as in /proc/<pid>/mountinfo",
                          observed=written, right_answer=truth)
    return ctx.passed("you read every party's peer group and master right")
