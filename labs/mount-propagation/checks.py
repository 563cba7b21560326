"""Checks of the mount-propagation lab. Truth comes from live mountinfo: probes mounted on one side
and looked for on the other, the tags the kernel prints, or the e2e experiment replayed on a
fresh node.

In every failure, `expected` says what the check wanted and `observed` what it saw, prefixed with
where it saw it ("your answer: ...", "on the node: ...", "in Pod x: ..."). Answer checks say which
parties are wrong and in which direction, never the right value.
"""

from labkit.errors import LabkitError
from labkit.exercises import CheckFailed
from labkit.mounts import mountinfo, observe, scenario
from labkit.mounts.node import NODE, Node
from labkit.mounts.pods import Refused, load_pods, validate

E2E_PARTIES = ("master", "slave", "private", "default")


def _pod_file(ctx, pod_name: str) -> str:
    return f"{ctx.env.dir}/pods/{pod_name}.yaml"


def _file_refusal(ctx, pod_name: str) -> str:
    """What the API server answers to the student's Pod file, or "" when it would accept it."""
    try:
        pods = load_pods(_pod_file(ctx, pod_name))
    except LabkitError as exc:
        return f"{_pod_file(ctx, pod_name)} cannot be read: {exc}"
    for pod in pods:
        try:
            validate(pod)
        except Refused as exc:
            return f"applying {_pod_file(ctx, pod_name)} is refused: {exc.message}"
    return ""


def _running(ctx, node: Node, pod_name: str, hint: str):
    """(Pod, party) of a running single-container Pod, or a failure that says what is wrong."""
    pod = node.pod(pod_name)
    if pod is None:
        refusal = _file_refusal(ctx, pod_name)
        raise CheckFailed(f"there is no Pod {pod_name!r} on the node" + (f"; {refusal}" if refusal else f": {hint}"),
                          expected=f"Pod {pod_name} running", observed="on the node: no such Pod")
    state = node.container_state(pod_name, pod.containers[0].name)
    if state["state"] != "running":
        why = state.get("reason", state["state"]) + (f": {state['message']}" if state.get("message") else "")
        raise CheckFailed(f"Pod {pod_name}'s container is not running ({why})" + (f": {hint}" if hint else ""),
                          expected="Running", observed=f"on the node: {why}")
    return pod, node.party(pod_name)


def _mount_of(pod, mount_path: str):
    for vm in pod.containers[0].volume_mounts:
        if vm.mount_path == mount_path:
            return vm, pod.volumes[vm.name]
    raise CheckFailed(f"Pod {pod.name} no longer mounts anything at {mount_path}: keep the volume and its mountPath",
                      expected=f"a volume at {mount_path}", observed=f"in Pod {pod.name}: none")


def _view(party, host_path: str) -> str:
    """Where a container sees `host_path` through one of its volumes."""
    for v in party.volumes:
        if mountinfo.is_under(host_path, v.host_path):
            return v.path + host_path[len(v.host_path.rstrip("/")):]
    raise CheckFailed(f"{party.name} has no volume that shows {host_path}")


def _tags(pid: int, path: str, holder: bool) -> str:
    mounts = mountinfo.read(pid)
    found = mountinfo.containing_mount(mounts, path) if holder else mountinfo.visible_at(mounts, path)
    return found.tags if found and found.tags else "private"


def _unapplied_edit(ctx, pod) -> str:
    """A note when the student's Pod file differs from the Pod running on the node."""
    try:
        in_file = [p for p in load_pods(_pod_file(ctx, pod.name)) if p.name == pod.name]
    except LabkitError:
        return ""
    if in_file and in_file[0] != pod:
        return (f"; your {_pod_file(ctx, pod.name)} differs from the running Pod: a running Pod's volumeMounts "
                "cannot change, so delete the Pod and apply the file again")
    return ""


def check_e2e_matrix(ctx):
    answer = ctx.answer()
    parties = ("host", *E2E_PARTIES)
    given = {}
    for party in parties:
        value = ctx.answer_field(answer, party, list)
        unknown = [m for m in value if m not in parties]
        if unknown:
            raise CheckFailed(f"{ctx.answer_path}: {party}: unknown mount(s) {unknown}; the mounts are named {', '.join(parties)}")
        given[party] = set(value)
    truth = scenario.play(scenario.load(ctx.lab.directory / ctx.params["scenario"]))
    if truth["errors"] or set(truth["visible"]) != set(parties):
        return ctx.error(f"the e2e experiment did not run cleanly on a fresh node: {truth['errors']}")
    wrong = []
    for party in parties:
        seen = set(truth["visible"][party])
        if given[party] == seen:
            continue
        if given[party] - seen:
            wrong.append(f"{party} does not see every mount you listed")
        if seen - given[party]:
            wrong.append(f"{party} sees a mount you left out")
    if not wrong:
        return ctx.passed("your matrix is what the kernel did in the replayed e2e experiment")
    return ctx.failed("the kernel disagrees: " + "; ".join(wrong) + ". Think about which parties get mount events, "
                      "and from whom", expected="what the replayed experiment shows (labkit mounts play)",
                      observed="your answer: " + "; ".join(f"{p}: [{', '.join(sorted(given[p]))}]" for p in parties))


def check_reader_sees_node_mounts(ctx):
    p = ctx.params
    node = Node(ctx.env)
    pod, party = _running(ctx, node, p["pod"], f"apply it again: labkit mounts apply -f {_pod_file(ctx, p['pod'])}")
    vm, volume = _mount_of(pod, p["mount_path"])
    if volume.path != p["host_path"]:
        raise CheckFailed(f"Pod {pod.name} must still read {p['host_path']}", expected=p["host_path"],
                          observed=f"in Pod {pod.name}: {volume.path}")
    node_pid = node.require_pid()
    down = observe.probe(node, (node_pid, p["host_path"]), {"pod": (party.pid, p["mount_path"])})["pod"]
    up = observe.probe(node, (party.pid, p["mount_path"]), {"node": (node_pid, p["host_path"])})["node"]
    tag = _tags(party.pid, p["mount_path"], holder=False)
    if not down:
        return ctx.failed(f"a tmpfs the node mounted below {p['host_path']} did not appear in {pod.name} at "
                          f"{p['mount_path']}" + _unapplied_edit(ctx, pod),
                          expected="the node's mount appears in the Pod",
                          observed=f"in Pod {pod.name}: not there; its volume mount is {tag} "
                                   f"(mountPropagation: {vm.propagation or 'unset'})")
    if up:
        return ctx.failed(f"a tmpfs mounted inside {pod.name} reached the node: the Pod can now change the node's mounts",
                          expected="mounts made in the Pod stay in the Pod",
                          observed=f"on the node: the Pod's tmpfs is there (mountPropagation: {vm.propagation}, "
                                   f"volume mount {tag})")
    return ctx.passed(f"the node's mounts reach {pod.name} ({tag}) and its own stay inside "
                      f"(mountPropagation: {vm.propagation})")


def check_csi_publishes(ctx):
    p = ctx.params
    node = Node(ctx.env)
    pod, party = _running(ctx, node, p["pod"], f"apply it: labkit mounts apply -f {_pod_file(ctx, p['pod'])}, and read the answer")
    _, observer = _running(ctx, node, p["observer"], "`labkit reset` brings it back")
    node_pid = node.require_pid()
    # made by a process of the plugin's container, with the container's capabilities
    seen = observe.probe(node, (party.pid, _view(party, p["host_path"])),
                         {NODE: (node_pid, p["host_path"]), observer.name: (observer.pid, _view(observer, p["host_path"]))},
                         capabilities=party.capabilities)
    if seen is None:
        return ctx.failed(f"the plugin cannot mount anything: mount(2) inside {pod.name} fails with EPERM, as its "
                          "container has no CAP_SYS_ADMIN", expected="a plugin that can mount (privileged)",
                          observed=f"in Pod {pod.name}: mount: Operation not permitted")
    missing = [name for name, ok in seen.items() if not ok]
    if missing:
        tag = _tags(party.pid, _view(party, p["host_path"]), holder=False)
        return ctx.failed(f"a tmpfs mounted inside {pod.name} below {p['host_path']} did not reach {' and '.join(missing)}",
                          expected=f"visible on the node and in {observer.name}",
                          observed=f"missing in {', '.join(missing)}; in Pod {pod.name} the volume mount is {tag}")
    return ctx.passed(f"mounts made inside {pod.name} reach the node and {observer.name}")


def check_private_host_path(ctx):
    p = ctx.params
    node = Node(ctx.env)
    pod = node.pod(p["pod"])
    if pod is None:
        raise CheckFailed(f"there is no Pod {p['pod']!r}: apply pods/{p['pod']}.yaml again", observed="on the node: no such Pod")
    vm, volume = _mount_of(pod, p["mount_path"])
    if volume.path != p["host_path"] or vm.propagation != "HostToContainer":
        return ctx.failed("the Pod was right: fix the node, not the Pod",
                          expected=f"{p['host_path']} at {p['mount_path']} with HostToContainer",
                          observed=f"on the node: Pod {pod.name} has {volume.path} at {vm.mount_path} with "
                                   f"{vm.propagation or 'unset'}")
    node_pid = node.require_pid()
    holder = mountinfo.containing_mount(node.mounts(node_pid), p["host_path"])
    holder_text = f"{holder.mountpoint} ({holder.tags or 'private'})" if holder else "nothing"
    if holder is None or (holder.shared is None and holder.master is None):
        return ctx.failed(f"on the node, {p['host_path']} is held by {holder_text}: the runtime needs a shared or slave mount",
                          expected="shared:N or master:N", observed=f"on the node: {holder_text}")
    _, party = _running(ctx, node, p["pod"], f"kubelet would retry it; here apply the Pod again: labkit mounts apply -f "
                                             f"{_pod_file(ctx, p['pod'])}")
    seen = observe.probe(node, (node_pid, p["host_path"]), {"pod": (party.pid, p["mount_path"])})["pod"]
    if not seen:
        return ctx.failed(f"a tmpfs the node mounted below {p['host_path']} did not reach {pod.name}",
                          expected="visible in the Pod", observed=f"on the node: {holder_text}; in Pod {pod.name}: "
                          f"not visible, volume mount {_tags(party.pid, p['mount_path'], holder=False)}")
    return ctx.passed(f"{pod.name} runs and receives the node's mounts; {p['host_path']} is held by {holder_text}")


def check_leak_cleaned(ctx):
    p = ctx.params
    node = Node(ctx.env)
    source = ctx.lab.environment_module().LEAK_SOURCE
    still = []
    for party in node.parties():
        for m in mountinfo.read(party.pid):
            if m.source == source:
                still.append(f"{party.name}:{m.mountpoint}")
    if still:
        return ctx.failed(f"the mount {p['pod']} published is still there: only an unmount on the node reaches every "
                          "namespace that has a copy", expected="gone from the node and every Pod",
                          observed="live: " + ", ".join(still))
    kubelet = mountinfo.containing_mount(node.mounts(), p["host_path"])
    if kubelet is None or kubelet.mountpoint != "/var/lib/kubelet" or kubelet.shared is None:
        seen = f"{kubelet.mountpoint} ({kubelet.tags or 'private'})" if kubelet else "nothing"
        return ctx.failed("the leaked mount is gone, but so is /var/lib/kubelet's own shared mount",
                          expected="/var/lib/kubelet shared:N", observed=f"on the node: {seen}")
    return ctx.passed("the leaked mount is gone everywhere, and /var/lib/kubelet is still shared")


def _normalized(tags: str) -> frozenset:
    return frozenset() if tags == "private" else frozenset(tags.split())


def check_peer_groups(ctx):
    p = ctx.params
    answer = ctx.answer()
    node = Node(ctx.env)
    truth = {NODE: _tags(node.require_pid(), p["host_path"], holder=True)}
    for name in E2E_PARTIES:
        _, party = _running(ctx, node, name, "`labkit reset` brings the e2e Pods back")
        truth[name] = _tags(party.pid, p["mount_path"], holder=False)
    wrong, empty = [], []
    for name, tags in truth.items():
        given = ctx.answer_field(answer, name, (str, type(None)))
        text = (given or "").strip()
        if not text:
            empty.append(name)
        elif _normalized(text) != _normalized(tags):
            wrong.append(f"{name}: you wrote {given!r}")
    if empty:
        return ctx.failed(f"{', '.join(empty)}: the value is empty; write the optional fields as mountinfo prints them, "
                          "or the word private when a mount has none",
                          expected="shared:N, master:N, both, or private", observed=f"your answer: {', '.join(empty)} empty")
    if wrong:
        return ctx.failed("not what mountinfo says for " + "; ".join(wrong),
                          expected="each party's optional fields, as in /proc/<pid>/mountinfo",
                          observed="your answer: " + "; ".join(wrong))
    return ctx.passed("you read every party's peer group and master right")
