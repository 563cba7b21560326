"""Checks of the mount-propagation lab. Truth comes from live mountinfo: probes mounted on one side
and looked for on the other, the tags the kernel prints, or the e2e experiment replayed on a
fresh node."""

from labkit.exercises import CheckFailed
from labkit.mounts import mountinfo, observe, scenario
from labkit.mounts.node import NODE, Node

E2E_PARTIES = ("master", "slave", "private", "default")


def _running(node: Node, pod_name: str, hint: str):
    """(Pod, party) of a running single-container Pod, or a failure that says what is wrong."""
    pod = node.pod(pod_name)
    if pod is None:
        raise CheckFailed(f"there is no Pod {pod_name!r} on the node: {hint}", expected=f"Pod {pod_name} running", observed="no such Pod")
    state = node.container_state(pod_name, pod.containers[0].name)
    if state["state"] != "running":
        why = state.get("reason", state["state"]) + (f": {state['message']}" if state.get("message") else "")
        raise CheckFailed(f"Pod {pod_name}'s container is not running ({why})" + (f": {hint}" if hint else ""),
                          expected="Running", observed=why)
    return pod, node.party(pod_name)


def _mount_of(pod, mount_path: str):
    for vm in pod.containers[0].volume_mounts:
        if vm.mount_path == mount_path:
            return vm, pod.volumes[vm.name]
    raise CheckFailed(f"Pod {pod.name} no longer mounts anything at {mount_path}: keep the volume and its mountPath",
                      expected=f"a volume at {mount_path}", observed="none")


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
    wrong = [p for p in parties if given[p] != set(truth["visible"][p])]
    if not wrong:
        return ctx.passed("your matrix is what the kernel did in the replayed e2e experiment", observed=truth["visible"])
    return ctx.failed(f"the kernel disagrees for {', '.join(wrong)}: think about which of them get mount events, "
                      "and from whom", expected="what the replayed experiment shows (labkit mounts play)",
                      observed={p: sorted(given[p]) for p in wrong})


def check_reader_sees_node_mounts(ctx):
    p = ctx.params
    node = Node(ctx.env)
    pod, party = _running(node, p["pod"], f"apply it again: labkit mounts apply -f {ctx.env.dir}/pods/{p['pod']}.yaml")
    vm, volume = _mount_of(pod, p["mount_path"])
    if volume.path != p["host_path"]:
        raise CheckFailed(f"Pod {pod.name} must still read {p['host_path']}", expected=p["host_path"], observed=volume.path)
    node_pid = node.require_pid()
    down = observe.probe(node, (node_pid, p["host_path"]), {"pod": (party.pid, p["mount_path"])})["pod"]
    up = observe.probe(node, (party.pid, p["mount_path"]), {"node": (node_pid, p["host_path"])})["node"]
    tag = _tags(party.pid, p["mount_path"], holder=False)
    if not down:
        return ctx.failed(f"a tmpfs the node mounted below {p['host_path']} did not appear in {pod.name} at {p['mount_path']}",
                          expected="the node's mount appears in the Pod",
                          observed=f"not there; the Pod's volume mount is {tag} (mountPropagation: {vm.propagation or 'unset'})")
    if up:
        return ctx.failed(f"a tmpfs mounted inside {pod.name} reached the node: the Pod can now change the node's mounts",
                          expected="mounts made in the Pod stay in the Pod",
                          observed=f"the node sees it (mountPropagation: {vm.propagation}, volume mount {tag})")
    return ctx.passed(f"the node's mounts reach {pod.name} ({tag}) and its own stay inside "
                      f"(mountPropagation: {vm.propagation})")


def check_csi_publishes(ctx):
    p = ctx.params
    node = Node(ctx.env)
    pod, party = _running(node, p["pod"], f"apply it: labkit mounts apply -f {ctx.env.dir}/pods/{p['pod']}.yaml, and read the answer")
    _, observer = _running(node, p["observer"], "`labkit reset` brings it back")
    node_pid = node.require_pid()
    seen = observe.probe(node, (party.pid, _view(party, p["host_path"])),
                         {NODE: (node_pid, p["host_path"]), observer.name: (observer.pid, _view(observer, p["host_path"]))})
    missing = [name for name, ok in seen.items() if not ok]
    if missing:
        tag = _tags(party.pid, _view(party, p["host_path"]), holder=False)
        return ctx.failed(f"a tmpfs mounted inside {pod.name} below {p['host_path']} did not reach {' and '.join(missing)}",
                          expected=f"visible on the node and in {observer.name}",
                          observed=f"missing in {', '.join(missing)}; the plugin's volume mount is {tag}")
    return ctx.passed(f"mounts made inside {pod.name} reach the node and {observer.name}")


def check_private_host_path(ctx):
    p = ctx.params
    node = Node(ctx.env)
    pod = node.pod(p["pod"])
    if pod is None:
        raise CheckFailed(f"there is no Pod {p['pod']!r}: apply pods/{p['pod']}.yaml again", observed="no such Pod")
    vm, volume = _mount_of(pod, p["mount_path"])
    if volume.path != p["host_path"] or vm.propagation != "HostToContainer":
        return ctx.failed("the Pod was right: fix the node, not the Pod",
                          expected=f"{p['host_path']} at {p['mount_path']} with HostToContainer",
                          observed=f"{volume.path} at {vm.mount_path} with {vm.propagation or 'unset'}")
    node_pid = node.require_pid()
    holder = mountinfo.containing_mount(node.mounts(node_pid), p["host_path"])
    holder_text = f"{holder.mountpoint} ({holder.tags or 'private'})" if holder else "nothing"
    if holder is None or (holder.shared is None and holder.master is None):
        return ctx.failed(f"on the node, {p['host_path']} is held by {holder_text}: the runtime needs a shared or slave mount",
                          expected="shared:N or master:N", observed=holder_text)
    _, party = _running(node, p["pod"], f"kubelet would retry it; here apply the Pod again: labkit mounts apply -f {ctx.env.dir}/pods/{p['pod']}.yaml")
    seen = observe.probe(node, (node_pid, p["host_path"]), {"pod": (party.pid, p["mount_path"])})["pod"]
    if not seen:
        return ctx.failed(f"a tmpfs the node mounted below {p['host_path']} did not reach {pod.name}",
                          expected="visible in the Pod", observed=f"not visible; node side {holder_text}, "
                          f"Pod side {_tags(party.pid, p['mount_path'], holder=False)}")
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
        return ctx.failed(f"the mount {p['pod']} published is still there", expected="gone from the node and every Pod",
                          observed=", ".join(still))
    kubelet = mountinfo.containing_mount(node.mounts(), p["host_path"])
    if kubelet is None or kubelet.mountpoint != "/var/lib/kubelet" or kubelet.shared is None:
        seen = f"{kubelet.mountpoint} ({kubelet.tags or 'private'})" if kubelet else "nothing"
        return ctx.failed("the leaked mount is gone, but so is /var/lib/kubelet's own shared mount",
                          expected="/var/lib/kubelet shared:N", observed=seen)
    return ctx.passed("the leaked mount is gone everywhere, and /var/lib/kubelet is still shared")


def _normalized(tags) -> frozenset:
    text = str(tags).strip()
    return frozenset() if text in ("", "private") else frozenset(text.split())


def check_peer_groups(ctx):
    p = ctx.params
    answer = ctx.answer()
    node = Node(ctx.env)
    truth = {NODE: _tags(node.require_pid(), p["host_path"], holder=True)}
    for name in E2E_PARTIES:
        _, party = _running(node, name, "`labkit reset` brings the e2e Pods back")
        truth[name] = _tags(party.pid, p["mount_path"], holder=False)
    wrong = []
    for name, tags in truth.items():
        given = ctx.answer_field(answer, name, (str, type(None)))
        if _normalized(given) != _normalized(tags):
            wrong.append(f"{name}: you wrote {given!r}")
    if wrong:
        return ctx.failed("not what mountinfo says for " + "; ".join(wrong),
                          expected="each party's optional fields, as in /proc/<pid>/mountinfo", observed=wrong)
    return ctx.passed("you read every party's peer group and master right", observed=truth)
