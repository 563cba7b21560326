"""Checks of the device-plugins lab.

Each check starts the student's plugin file as a process against a fresh node (labkit's kubelet,
labkit.devices.kubelet, serving kubelet.sock over real gRPC: labkit.devices.session) and observes
what crossed the wire and what the node and its container processes show; `judge_<name>` then
holds that observation against the exercise's statement in lab.yaml (`solved`). Nothing here is a
stored answer: the widgets, their NUMA nodes, the env and mount are the exercise's specification,
and what kubelet does with them is labkit's kubelet's doing.
"""

import random
from pathlib import Path

from labkit.exercises import LIVE, AnswerMalformed, CheckFailed

WIDGETS = {"widget-0": 0, "widget-1": 0, "widget-2": 1, "widget-3": 1}    # the exercise's devices
HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"
REGISTER_S = 3.0          # how long a plugin has to register (Python and grpc start in well under 1 s)
CHANGE_S = 3.0            # how long it has to send a changed list; both in the plugin's own time: the
                          # time its threads are busy or wait for a CPU does not count, up to 5 times as
                          # long (Session.wait_for_plugin), so a loaded machine does not make it late
SETTLE_S = 0.3            # how long the check waits, after a new list, for the list a step expects when that
                          # list was not the one sent (a plugin may send it in more than one message); a
                          # list that is already the expected one ends the wait (_settled)
LIVE_S = 1.0              # register: how long the check watches a registered plugin (its bound), from its
                          # first device list on (on a loaded machine kubelet's dial-back may take a good part
                          # of a second after Register): one that stops serving, or registers again, within
                          # 1 s of that is seen
RESTARTS = 2              # restart: kubelet restarts twice; a plugin must notice every restart
FIRST_QUIET_S = (0.15, 0.3)   # the first restart comes this long after the plugin registered, drawn at
                          # random each run: the plugin cannot know when
QUIET_MARGIN_S = (0.25, 0.4)  # each later restart comes this much later after the plugin's last
                          # registration than that registration came after the one before it: a plugin
                          # registering on a fixed timer (every P s, or once P s after the last) registers
                          # again before that restart, whatever P (see observe_restart); the margin also
                          # absorbs how much later such a plugin's next Register may arrive on a busy machine
FINAL_S = 1.0             # restart: how long the check watches after the last re-registration: as long as
                          # register's window (LIVE_S), and longer than any quiet time before it, so that a
                          # plugin that watches kubelet.sock and also registers again on a timer of up to 1 s
                          # after its last registration is seen whatever the draw (its timer fires here)
REREGISTER_GRACE_S = 0.5  # how long after a plugin ended its stream the check waits for a Register that
                          # may follow (a plugin serving anew), before it judges the plugin stopped serving
ORDINALS = ("first", "second", "third")
PENDING = "(no answer yet)"    # a Register call kubelet has not answered when the check looks


# -- observing ------------------------------------------------------------------------------------

def _plugin(ctx) -> Path:
    path = ctx.env.dir / ctx.params["file"]
    if not path.is_file():
        raise CheckFailed(f"no plugin yet: write it to\n  {path}")
    return path


def _session(ctx):
    lab = ctx.env.lab.environment_module()
    return lab.session(ctx.env, ctx.exercise.id, _plugin(ctx))


def _listed(s, resource: str, expected: dict | None = None, sick=()) -> bool:
    """Whether kubelet's device list for `resource` is the one the step expects: exactly the IDs of
    `expected` (ID -> NUMA node; the four widgets unless given), each on its NUMA node, those of
    `sick` Unhealthy and the others Healthy."""
    expected = WIDGETS if expected is None else expected
    got = {d["ID"]: d for d in s.devices(resource)}
    return set(got) == set(expected) and all(
        got[dev]["numa"] == [node] and got[dev]["health"] == (UNHEALTHY if dev in sick else HEALTHY)
        for dev, node in expected.items())


def _settled(s, resource: str, expected: dict | None = None, sick=()) -> None:
    """After a new device list: when it is not yet the list the step expects, wait SETTLE_S for the
    messages that may follow it (the step then judges the list kubelet keeps, the last message's);
    when it is, the evidence is complete and nothing is waited for."""
    s.wait(lambda: _listed(s, resource, expected, sick), SETTLE_S)


def _first_list(s, resource: str, expected: dict | None = None) -> float | None:
    """Wait for the plugin's first device list (and the messages that may complete it); kubelet's
    clock when the check saw it arrive, None when none came."""
    s.wait_for_plugin(lambda: s.lists(resource) >= 1 or any(r["error"] for r in s.registrations()), REGISTER_S)
    if not s.lists(resource):
        return None
    listed_at = s.kubelet.clock()
    _settled(s, resource, expected)
    return listed_at


def _registrations(s, start: int) -> list[dict]:
    """The Register calls that reached kubelet's `start`-th start (1: before any restart), from
    kubelet's own record (labkit.devices.kubelet Kubelet.registrations): what each asked, kubelet's
    answer, and what became of the ListAndWatch stream it opened (`end` says how one ended). `at`:
    seconds since the first of them; `served`: how long a stream the plugin ended was open;
    `in_directory`: whether the socket kubelet dials for the endpoint (labkit.devices.kubelet
    endpoint_path) is in kubelet's device-plugins directory."""
    from labkit.devices.kubelet import endpoint_path
    here = str(s.kubelet.directory)
    mine = [r for r in s.registrations() if r["kubelet"] == start]
    first = mine[0]["at"] if mine else 0.0
    return [{"resource": r["resource"], "version": r["version"], "error": r["error"] if r["answered"] else PENDING,
             "stream": r["stream"], "at": round(r["at"] - first, 2),
             "in_directory": endpoint_path(here, r["endpoint"]).rpartition("/")[0] == here,
             **({"end": r["end"]} if r["end"] else {}),
             **({"socket_missing": r["socket_missing"]} if r.get("socket_missing") else {}),
             **({"served": round(r["ended_at"] - r["at"], 2)} if r.get("ended_at") else {})}
            for r in mine]


def _registration(s, resource: str) -> dict:
    """What every check judges first: did the plugin register, and what kubelet then listed.
    `_window` brings the registrations up to the end of the check's window."""
    return {"exited": s.exited, "log": s.plugin_log(), "registrations": _registrations(s, 1),
            "devices": sorted(s.devices(resource), key=lambda d: d["ID"]), "node": s.node()}


def _window(s, obs: dict) -> dict:
    """The end of a check's window: the registrations kubelet recorded over all of it (a plugin
    that died or registered again since its first device list shows here) and the plugin's state."""
    s.streams_settled()
    obs.update({"exited": s.exited, "log": s.plugin_log(), "registrations": _registrations(s, 1)})
    return obs


def _hold(s, since: float, seconds: float) -> None:
    """Watch the plugin until `seconds` after kubelet's clock read `since` (longer while the plugin
    is busy); sooner when what is watched already fails: the plugin exits, registers again with the
    same kubelet, or a stream it registered ends."""
    start = s.kubelet.starts

    def made():
        return [r for r in s.registrations() if r["kubelet"] == start and r["error"] is None]   # not refused

    def ended_ago(grace: float) -> bool:
        # a stream the plugin ended: the plugin stopped serving, unless it registers again at once
        # (one that stops its server to serve anew and register again ends its stream first)
        return any(r["stream"] == "ended" and (s.exited is not None or s.kubelet.clock() - r["ended_at"] >= grace)
                   for r in made())
    # in the plugin's own time (Session.wait_for_plugin): on a loaded machine, a plugin that registers
    # again on a timer is not let off because its timer's turn came late
    s.wait_for_plugin(lambda: len(made()) > 1 or ended_ago(REREGISTER_GRACE_S), since + seconds - s.kubelet.clock())
    if len(made()) == 1 and not ended_ago(REREGISTER_GRACE_S) and made()[0]["stream"] == "ended":
        s.wait_for_plugin(lambda: len(made()) > 1, REREGISTER_GRACE_S)


def _registered_at(s, start: int = 1) -> float:
    """When kubelet's `start`-th start answered the first registration it accepted (kubelet's
    clock): from then on the plugin knows it is registered, and a timer it starts then runs. kubelet
    answers only after it has dialed the plugin back, which on a loaded machine takes a while."""
    accepted = [r["answered_at"] or r["at"] for r in s.registrations() if r["stream"] is not None and r["kubelet"] == start]
    return accepted[0] if accepted else s.kubelet.clock()


def _changed(s, resource: str, health: dict, sick=()) -> dict:
    """Rewrite the health file; wait for a new ListAndWatch message (and, unless it already lists
    `sick` Unhealthy and the others Healthy, its followers)."""
    before = s.lists(resource)
    s.set_health(health)
    sent = s.wait_for_plugin(lambda: s.lists(resource) > before, CHANGE_S)
    if sent:
        _settled(s, resource, sick=sick)
    return {"sent": sent, "devices": sorted(s.devices(resource), key=lambda d: d["ID"]), "node": s.node()}


# -- judging: the registration and the device list -------------------------------------------------

def _fail(message: str, expected=None, observed=None, **details):
    raise CheckFailed(message, expected, observed, observed_in=LIVE, **details)


STREAM_WORDS = {"open": "still open", "closed": "closed by kubelet's restart"}


def _judge_registered(ctx, obs: dict, stream: str = "open", when: str = "") -> None:
    """One kubelet's record of the plugin's Register calls (obs["registrations"]): the last one
    accepted, for the exercise's resource and v1beta1; exactly one accepted; its ListAndWatch stream
    `stream` at the end of the window (open; or closed, when kubelet restarted)."""
    resource = ctx.params["resource"]
    regs = obs.get("registrations") or []
    log = obs.get("log") or ""
    tail = f"\nThe end of its output (logs/):\n{log}" if log else ""
    if not regs:
        if obs.get("exited") is not None:
            _fail(f"your plugin exited (code {obs['exited']}) without a Register call reaching kubelet.sock{tail}")
        _fail(f"no Register call reached $DEVICE_PLUGIN_DIR/kubelet.sock within {REGISTER_S:g} s of your plugin's start "
              f"(time it spent busy, on a loaded machine, not counted){tail}",
              "a Register call from your plugin", "none")
    # a plugin that registers the exercise's resource and another one: the other is what is wrong
    mine = [r for r in regs if r.get("resource") == resource]
    others = sorted({str(r.get("resource")) for r in regs if r.get("resource") != resource and not r.get("error")})
    if mine and others:
        _fail(f"{when}your plugin registered {resource} and also the resource(s) {', '.join(others)}: the exercise's "
              f"plugin registers {resource} only", [resource], [resource, *others])
    last = (mine or regs)[-1]
    accepted = [r for r in regs if not r.get("error")]
    calls = accepted + [r for r in regs if r.get("error") == PENDING]
    if accepted and len(calls) > 1:
        # a plugin that registers again while kubelet still dials its first answer back (a machine
        # under load): the calls made, not the one in flight at the window's end, are the mistake
        _registered_again(when, calls)
    if last.get("error") == PENDING:
        _fail(f"your Register call has not returned: kubelet dials your endpoint back and waits for "
              f"GetDevicePluginOptions before it answers{tail}", "an accepted registration", "pending")
    if last.get("error"):
        where = (" (kubelet dials your RegisterRequest's endpoint joined to its device-plugins directory, "
                 "plugin/v1beta1/server.go Register: filepath.Join(socketDir, endpoint); nothing answered there"
                 f"{_missing_socket_note(last)})"
                 if str(last["error"]).startswith("failed to dial device plugin") else "")
        _fail(f"kubelet refused your registration: {last['error']}{where}{tail}", "an accepted registration", "refused")
    if last.get("resource") != resource:
        _fail(f"the resource your plugin registered is {last.get('resource')!r}, not the exercise's {resource}",
              resource, last.get("resource"))
    if last.get("version") != "v1beta1":
        _fail(f"your RegisterRequest names API version {last.get('version')!r}: kubelet v1.34 supports v1beta1 only",
              "v1beta1", last.get("version"))
    if not all(r.get("in_directory") for r in accepted):
        _fail(f"{when}the endpoint your plugin registered names a socket that is not in $DEVICE_PLUGIN_DIR itself (kubelet "
              "joins the endpoint to its device-plugins directory, `..` included: plugin/v1beta1/server.go Register): the "
              "exercise's plugin serves a socket of its own in that directory, the one a restarted kubelet empties of "
              "sockets (manager.go CleanupPluginDirectory)", "a socket in $DEVICE_PLUGIN_DIR", "elsewhere")
    if len(accepted) > 1:
        _registered_again(when, accepted)
    got = accepted[0].get("stream")
    if got != stream:
        if got == "ended":
            exited = f" and your plugin exited (code {obs['exited']})" if obs.get("exited") is not None else ""
            if obs.get("exited") == 0:
                # a normal end: main returned (or called exit) before kubelet's stream was served by a
                # thread that would have kept the process alive (_judge_serving tells the other outcome)
                exited += (" — it ended normally: what does your plugin's main do after Register returns? A Python "
                           "process whose main has returned stops the gRPC server it started")
            served = accepted[0].get("served")
            after = f" {served:.1f} s" if isinstance(served, (int, float)) else ""
            _fail(f"{when}your plugin stopped serving{after} after registering: the ListAndWatch stream kubelet "
                  f"opened then ended ({accepted[0].get('end') or 'no reason given'}){exited}. kubelet then marks "
                  "every device of the resource Unhealthy (manager.go PluginDisconnected) and removes the resource "
                  "5 minutes later. A plugin keeps serving and keeps the stream open for as long as the node "
                  f"runs{tail}", STREAM_WORDS[stream], "ended")
        _fail(f"{when}the ListAndWatch stream kubelet opened when your plugin registered is {got or 'not recorded'}, "
              f"not {STREAM_WORDS[stream]} at the end of the check", STREAM_WORDS[stream], got)


def _registered_again(when: str, calls: list[dict]) -> None:
    # plugin/v1beta1/handler.go connectClient: every Register dials the plugin anew, and
    # manager.go PluginConnected asks GetDevicePluginOptions and sets a new endpoint
    gap = calls[1].get("at") if isinstance(calls[1].get("at"), (int, float)) else None
    again = f" (again {gap:.1f} s after the first, kubelet not restarted)" if gap is not None else ""
    _fail(f"{when}your plugin registered {len(calls)} times with the same kubelet{again}: every Register makes "
          "kubelet dial your socket again, ask GetDevicePluginOptions and open another ListAndWatch stream "
          "(plugin/v1beta1/handler.go connectClient). Register once, and again only when kubelet.sock is "
          "created anew (a restarted kubelet), not on a timer", 1, len(calls))


def _judge_devices(devices: list, sick=(), when: str = "", expected: dict | None = None) -> None:
    """The list kubelet keeps: exactly the exercise's devices (`expected`: ID -> NUMA node; the
    four widgets unless given), their NUMA nodes, their health."""
    expected = WIDGETS if expected is None else expected
    by_id = {}
    for d in devices or []:
        by_id[d.get("ID")] = d
    missing = sorted(set(expected) - set(by_id))
    extra = sorted(str(i) for i in set(by_id) - set(expected))
    if missing or extra:
        what = "; ".join(p for p in (f"missing: {', '.join(missing)}" if missing else "",
                                     f"not a device of the exercise: {', '.join(extra)}" if extra else "") if p)
        _fail(f"{when}kubelet's device list does not hold the exercise's device IDs ({what}); kubelet forgets "
              "every device a ListAndWatch message leaves out, and capacity counts what is listed",
              sorted(expected), sorted(str(i) for i in by_id))
    for dev, node in expected.items():
        numa = by_id[dev].get("numa") or []
        if list(numa) != [node]:
            _fail(f"{when}{dev} is listed on NUMA node(s) {list(numa) or 'none (no topology)'}; the exercise puts "
                  f"it on NUMA node {node} (Device.topology.nodes)", node, list(numa))
    for dev in expected:
        want = UNHEALTHY if dev in sick else HEALTHY
        got = by_id[dev].get("health")
        if got != want:
            _fail(f"{when}{dev} is listed with health {got!r}; it should be {want} (kubelet counts a device as healthy "
                  f"only when its health is exactly \"{HEALTHY}\")", want, got)


def _judge_node(ctx, node: dict, capacity: int, allocatable: int, when: str = "") -> None:
    resource = ctx.params["resource"]
    node = node or {}
    # a resource of an earlier run stays on the Node with capacity 0 (a fresh node's kubelet zeroes
    # them: kubelet_node_status.go reconcileExtendedResource); one with devices is another plugin's
    others = sorted({r for side in ("capacity", "allocatable") for r, n in (node.get(side) or {}).items()
                     if r != resource and n})
    if others:
        _fail(f"{when}the node has another extended resource besides {resource}, with a capacity or allocatable "
              f"other than 0: {', '.join(others)}")
    got = ((node.get("capacity") or {}).get(resource), (node.get("allocatable") or {}).get(resource))
    if got != (capacity, allocatable):
        _fail(f"{when}the node's capacity of {resource} is {got[0]} and its allocatable {got[1]}; "
              f"{capacity} and {allocatable} expected", {"capacity": capacity, "allocatable": allocatable},
              {"capacity": got[0], "allocatable": got[1]})


# -- register -------------------------------------------------------------------------------------

def observe_register(ctx) -> dict:
    """The first device list and the node then; the registrations over LIVE_S from that first
    list on (a plugin that stops serving or registers again in that time is seen; the
    check stops watching as soon as one does); `last`: kubelet's device list and the node at the
    end of that watch (a later ListAndWatch message replaces the whole list)."""
    resource = ctx.params["resource"]
    with _session(ctx) as s:
        listed_at = _first_list(s, resource)
        obs = _registration(s, resource)
        if listed_at is not None:
            _hold(s, listed_at, LIVE_S)
            obs["last"] = {"devices": sorted(s.devices(resource), key=lambda d: d["ID"]), "node": s.node()}
            obs["serving"] = s.serving(resource)
        return _window(s, obs)


def _judge_serving(obs: dict) -> None:
    """At the end of the watch the plugin still answers an rpc where kubelet calls it (the next
    Allocate would): an open ListAndWatch stream alone does not show that its server still runs."""
    error = obs.get("serving", "not asked")
    if error:
        _fail(f"at the end of the check's watch your plugin no longer answers on its socket (a GetDevicePluginOptions "
              f"call there: {error}), though its ListAndWatch stream is still open: its gRPC server has stopped, so "
              "kubelet's next GetPreferredAllocation or Allocate fails and no Pod gets a widget. What does your "
              "plugin's main do after Register returns? (A Python process whose main has returned stops the server "
              "it started; a thread still serving the stream keeps it from exiting.)", "answers", "no answer")


def judge_register(ctx, obs: dict, stream: str = "open", when: str = ""):
    _judge_registered(ctx, obs, stream, when)
    _judge_devices(obs.get("devices"))
    if ctx.exercise.id == "register":
        # the list kubelet keeps is the last message's (manager.go genericDeviceUpdateCallback):
        # the widgets must still be listed, and the node still show them, when the watch ends.
        # Judged before the node as first seen: a plugin whose second message empties the list
        # may have done so before the check read the node, and the list is what it got wrong
        last = obs.get("last") or {}
        at_end = f"at the end of the check's window ({LIVE_S:g} s from your plugin's first device list on): "
        _judge_devices(last.get("devices"), when=at_end)
        _judge_node(ctx, last.get("node"), 4, 4, at_end)
    _judge_node(ctx, obs.get("node"), 4, 4)
    if ctx.exercise.id in ("register", "health"):
        # register and health watch the plugin to the end of a window, then ask it (observe_register,
        # observe_health); allocate, preferred and share call it anyway, restart serves anew
        _judge_serving(obs)
    return ctx.passed(f"your plugin registered {ctx.params['resource']}: four widgets on two NUMA nodes, capacity "
                      "and allocatable 4")


def check_register(ctx):
    return judge_register(ctx, observe_register(ctx))


# -- health ---------------------------------------------------------------------------------------

def health_phases(params) -> list[tuple[str, dict, list[str]]]:
    """What the health check writes to $DEVICE_HEALTH_FILE, in order: (phase, the file's mapping,
    the devices it makes Unhealthy). The exercise's widget breaks and heals; then two others, one
    on each NUMA node, break at once while the file names the first no more, and heal as the file
    names none: a plugin must follow the file for every device, not for one it expects."""
    broken, others = params["broken"], list(params["others"])
    return [("broken", {broken: UNHEALTHY}, [broken]), ("healed", {broken: HEALTHY}, []),
            ("others_broken", {d: UNHEALTHY for d in others}, others), ("others_healed", {}, [])]


def observe_health(ctx) -> dict:
    resource = ctx.params["resource"]
    with _session(ctx) as s:
        _first_list(s, resource)
        obs = _registration(s, resource)
        if s.lists(resource):
            for phase, health, sick in health_phases(ctx.params):
                obs[phase] = _changed(s, resource, health, sick)
                if not obs[phase]["sent"]:
                    break
            obs["serving"] = s.serving(resource)
        return _window(s, obs)


def judge_health(ctx, obs: dict):
    broken = ctx.params["broken"]
    judge_register(ctx, obs)
    for phase, health, sick in health_phases(ctx.params):
        seen = obs.get(phase) or {}
        said = (" and ".join(f"{d} {h}" for d, h in health.items()) if health else "no device") + \
            (" again" if phase == "healed" else "")
        when = f"after $DEVICE_HEALTH_FILE said {said}: "
        if not seen.get("sent"):
            _fail(f"{when}your plugin sent kubelet no new device list within {CHANGE_S:g} s (ListAndWatch must "
                  "send the whole list again whenever a device's health changes)")
        _judge_devices(seen.get("devices"), sick, when)
        _judge_node(ctx, seen.get("node"), 4, 4 - len(sick), when)
    others = " and ".join(ctx.params["others"])
    return ctx.passed(f"{broken} went Unhealthy and back, then {others} together: allocatable 3, 4, 2 and 4, "
                      "capacity 4 throughout")


def check_health(ctx):
    return judge_health(ctx, observe_health(ctx))


# -- allocate -------------------------------------------------------------------------------------

PODS = ("pod-a", "pod-b")
# devices_ids the check sends to Allocate itself before kubelet admits the Pods: sets kubelet may
# send (it takes a container's devices from the available ones in a Go set's order, manager.go
# devicesToAllocate, and sends them as UnsortedList(): allocateContainerResources), so an answer
# made from anything but the request's IDs (the widgets handed out so far, a fixed order) is seen
ALLOCATES = (("widget-3", "widget-1"), ("widget-2",))


def observe_allocate(ctx) -> dict:
    resource = ctx.params["resource"]
    with _session(ctx) as s:
        _first_list(s, resource)
        obs = _registration(s, resource)
        obs["pods"] = {}
        obs["allocates"] = []
        client = s.kubelet.clients.get(resource)
        if client is not None and s.lists(resource):
            for ids in ALLOCATES:
                seen = {"devices": list(ids)}
                try:
                    seen["envs"] = client.allocate(list(ids)).get("envs") or {}
                except Exception as exc:      # an rpc error, an answer without container_responses
                    seen["error"] = str(exc)
                obs["allocates"].append(seen)
        if s.lists(resource):
            for pod in PODS:
                admitted = s.admit(pod, resource, 2)
                admitted["container"] = s.run_container(pod) if admitted["admitted"] else None
                obs["pods"][pod] = admitted
        return _window(s, obs)


def judge_allocate(ctx, obs: dict):
    env_name, mount = ctx.params["env"], ctx.params["mount"]
    judge_register(ctx, obs)
    driver = ctx.env.dir / "widget-driver"
    want_files = {p.name: p.read_text().split("\n", 1)[0] for p in sorted(driver.iterdir()) if p.is_file()}
    want_source = [driver.stat().st_dev, driver.stat().st_ino]      # a bind mount shows the directory's own
    allocates = obs.get("allocates") or []
    if len(allocates) != len(ALLOCATES):
        _fail("not every Allocate request of the check got an answer")
    for seen in allocates:
        ids = [str(d) for d in seen.get("devices") or []]
        what = f"your Allocate answer for devices_ids {', '.join(ids)}"
        if seen.get("error"):
            _fail(f"Allocate failed for devices_ids {', '.join(ids)}: {seen['error']}")
        envs = seen.get("envs") or {}
        if env_name not in envs:
            _fail(f"{what} has no {env_name} in its envs (ContainerAllocateResponse.envs)")
        if sorted(str(envs[env_name]).split(",")) != sorted(ids):
            _fail(f"{env_name} in {what} is {envs[env_name]!r}: it must name exactly the widgets allocated in the "
                  "request, each once, comma-separated (in any order). kubelet takes a container's widgets from the available "
                  "ones in no fixed order (manager.go devicesToAllocate) and tells Allocate nothing but devices_ids: "
                  "the answer comes from the request, not from which widgets were handed out before",
                  ",".join(ids), envs[env_name])
        more = sorted(set(envs) - {env_name})
        if more:
            _fail(f"{what} puts more than {env_name} into the container's environment: {', '.join(more)}")
    pods = obs.get("pods") or {}
    for pod in PODS:
        seen = pods.get(pod) or {}
        if not seen.get("admitted"):
            _fail(f"kubelet did not admit {pod} (two widgets): {seen.get('error') or 'not tried'}")
        container = seen.get("container") or {}
        if not container.get("started"):
            if str(container.get("error") or "").startswith("CDI device injection failed"):
                # the runtime resolves each CDI device through a CDI spec on the node (containerd
                # WithCDI); this node has none, so any name in cdi_devices fails the container
                _fail(f"the container of {pod} did not start with your Allocate answer: the container runtime "
                      f"refused it ({container['error']}): a name in ContainerAllocateResponse.cdi_devices is "
                      "resolved by the runtime through a CDI spec on the node, which this node does not have; the "
                      "exercise asks for an environment variable and a mount")
            if container.get("error"):
                # the runtime stats each Mount's and DeviceSpec's host_path before it binds it
                _fail(f"the container of {pod} did not start with your Allocate answer: the container runtime "
                      f"refused it ({container['error']}): a Mount's or a DeviceSpec's host_path is a path on the "
                      "node, absolute, and must exist there")
            _fail(f"the container of {pod} did not start with your Allocate answer (see logs/)")
        devices = seen.get("devices") or []
        envs = container.get("envs") or {}
        if env_name not in envs:
            _fail(f"the process of {pod}'s container has no {env_name} in its environment (ContainerAllocateResponse.envs)")
        # kubelet sends devices_ids as a Go set's UnsortedList() (manager.go allocateContainerResources):
        # no order is kubelet's, so the IDs are judged as a set, each named once
        if sorted(str(envs[env_name]).split(",")) != sorted(devices):
            _fail(f"{env_name} in {pod}'s container is {envs[env_name]!r}, but kubelet allocated it "
                  f"{', '.join(devices)}: it must name exactly those, each once, comma-separated (in any order)",
                  ",".join(devices), envs[env_name])
        more = sorted(set(envs) - {env_name})
        if more:
            _fail(f"your Allocate answer puts more than {env_name} into the environment of {pod}'s container: "
                  f"{', '.join(more)}")
        mounts = container.get("mounts") or {}
        # kubelet hands a Mount's and a DeviceSpec's host_path to the container runtime as it is
        # (pod_devices.go deviceRunContainerOptions, kuberuntime_container.go makeMounts and
        # makeDevices): a relative one names a path in the runtime's working directory, not the
        # plugin's (labkit starts the container process in the lab directory, where a relative
        # widget-driver would be found)
        options = container.get("options") or {}
        relative = sorted(str(m.get("host_path")) for kind in ("mounts", "devices") for m in options.get(kind) or []
                          if not str(m.get("host_path") or "").startswith("/"))
        if relative:
            _fail(f"your Allocate answer for {pod}'s container gives a relative host_path: {', '.join(relative)}. kubelet "
                  "passes host_path on to the container runtime as it is (pod_devices.go deviceRunContainerOptions, "
                  "kuberuntime_container.go makeMounts), and the runtime is another process with a working directory "
                  "of its own: a path relative to your plugin's means nothing there", "an absolute host_path", relative)
        if mount not in mounts:
            _fail(f"{pod}'s container has nothing mounted at {mount} (ContainerAllocateResponse.mounts)",
                  mount, sorted(mounts))
        # DeviceSpecs (ContainerAllocateResponse.devices) are a CRI Device each, not a mount
        # (kuberuntime_container.go makeDevices); the container runtime makes the node in the
        # container, here a bind of the host's node: the widgets' own nodes are the container's to have
        specs = [d for d in (container.get("options") or {}).get("devices") or [] if d.get("container_path")]
        own = {str(ctx.env.dir / "devices" / d) for d in devices}
        foreign = sorted(f"{d['container_path']} ({d.get('host_path')})" for d in specs
                         if str(Path(d.get("host_path") or "")) not in own)
        if foreign:
            _fail(f"your Allocate answer gives {pod}'s container device nodes that are not of the widgets kubelet "
                  f"allocated to it ({', '.join(devices)}): {', '.join(foreign)}; a DeviceSpec's host_path is one of "
                  "the container's own widgets' nodes in the lab's devices/ directory")
        other = sorted(set(mounts) - {mount} - {d["container_path"] for d in specs})
        if other:
            _fail(f"your Allocate answer mounts more than {mount} into {pod}'s container: {', '.join(other)}")
        if not mounts[mount].get("read_only"):
            _fail(f"{mount} in {pod}'s container is writable: the driver directory must be mounted read-only")
        if mounts[mount].get("files") != want_files:
            _fail(f"what {pod}'s container sees at {mount} is not the lab's widget-driver directory "
                  f"(it sees {', '.join(sorted(mounts[mount].get('files') or {})) or 'no files'})")
        if mounts[mount].get("source") != want_source:
            _fail(f"what {pod}'s container sees at {mount} has the files of the lab's widget-driver directory but "
                  "is another directory (a copy: a driver update would not reach the container); the mount's "
                  "host_path must be the lab's widget-driver directory itself")
    held = [set((pods.get(p) or {}).get("devices") or []) for p in PODS]
    if held[0] & held[1]:
        _fail("kubelet gave the two Pods the same widget: your device list has fewer than four distinct devices")
    return ctx.passed(f"both containers got {env_name} with their own widgets and {mount} read-only")


def check_allocate(ctx):
    return judge_allocate(ctx, observe_allocate(ctx))


# -- preferred ------------------------------------------------------------------------------------

ALL = sorted(WIDGETS)
# (available, must_include, size): the requests the check sends to GetPreferredAllocation
REQUESTS = ((ALL, [], 2), (["widget-0", "widget-2", "widget-3"], [], 2), (ALL, ["widget-1"], 2),
            (["widget-0", "widget-1", "widget-2"], ["widget-2"], 2), (ALL, [], 3), (ALL, ["widget-0", "widget-3"], 2),
            (["widget-1", "widget-3"], [], 1), (ALL, [], 1), (ALL, ["widget-3"], 2))


def one_node_possible(available, must, size) -> bool:
    """Whether `size` devices on one NUMA node, with every must-include one, can be chosen."""
    nodes = {WIDGETS.get(d) for d in must}
    if len(nodes) > 1:
        return False
    candidates = nodes or {WIDGETS.get(d) for d in available}
    return any(sum(1 for d in available if WIDGETS.get(d) == n) >= size for n in candidates)


def answer_problem(available, must, size, answer) -> tuple[str, str] | None:
    """What is wrong with a preferred allocation, by the exercise's rules: (word, what), or None."""
    got = list(answer or [])
    if len(got) != size or len(set(got)) != len(got):
        repeats = " with repeats" if len(set(got)) != len(got) else ""
        return "allocation_size", f"has {len(got)} device ID(s){repeats}; it must have allocation_size distinct ones"
    if set(got) - set(available):
        return "not available", "names a device that is not available (a device another container holds)"
    if set(must) - set(got):
        return "must_include", "leaves out a device of must_include_deviceIDs"
    if one_node_possible(available, must, size) and len({WIDGETS.get(d) for d in got}) > 1:
        return "NUMA", "spans two NUMA nodes, though the available devices allow one NUMA node"
    return None


def _ask_preferred(client, requests) -> list[dict]:
    """GetPreferredAllocation asked directly with each (available, must_include, size) of
    `requests`: what was asked, and the plugin's answer or the rpc's error."""
    out = []
    for available, must, size in requests:
        seen = {"available": list(available), "must_include": list(must), "size": size}
        try:
            seen["answer"] = client.get_preferred_allocation(list(available), list(must), size)
        except Exception as exc:      # an rpc error, an unimplemented method
            seen["error"] = str(exc)
        out.append(seen)
    return out


def _judge_preferred_answers(obs: dict, requests, problem, *, no_option: str, asked: str, failed: str) -> None:
    """What preferred and share judge alike of GetPreferredAllocation: the option offered, every
    request of `requests` answered, and each answer kept to the exercise's rules (`problem`:
    answer_problem or share_problem). Each exercise keeps its own words: `no_option` when the
    option is not offered; `asked` names a request ({i}, {available}, {must}, {size}); `failed`
    an rpc error ({asked}, {error})."""
    if not (obs.get("options") or {}).get("get_preferred_allocation_available"):
        _fail(no_option)
    answers = obs.get("answers") or []
    if len(answers) != len(requests):
        _fail("not every GetPreferredAllocation request got an answer")
    for i, seen in enumerate(answers, start=1):
        available, must, size = seen.get("available") or [], seen.get("must_include") or [], seen.get("size")
        request = asked.format(i=i, available=", ".join(available), must=", ".join(must) or "none", size=size)
        if seen.get("error"):
            _fail(failed.format(asked=request, error=seen["error"]))
        wrong = problem(available, must, size, seen.get("answer"))
        if wrong:
            _fail(f"your answer to {request} {wrong[1]}")


def observe_preferred(ctx) -> dict:
    resource = ctx.params["resource"]
    with _session(ctx) as s:
        _first_list(s, resource)
        obs = _registration(s, resource)
        obs["options"] = s.options(resource)
        obs["answers"] = []
        obs["pod"] = None
        client = s.kubelet.clients.get(resource)
        if client is None or not s.lists(resource):
            return _window(s, obs)
        obs["answers"] = _ask_preferred(client, REQUESTS)
        admitted = s.admit("pod-a", resource, 2)
        calls = [c for c in s.kubelet.manager.calls if c["call"] == "GetPreferredAllocation"]
        obs["pod"] = {"devices": admitted["devices"], "kubelet_called": bool(calls)}
        return _window(s, obs)


def judge_preferred(ctx, obs: dict):
    judge_register(ctx, obs)
    _judge_preferred_answers(
        obs, REQUESTS, answer_problem,
        no_option=("your plugin's GetDevicePluginOptions answer does not say get_preferred_allocation_available: "
                   "kubelet never calls GetPreferredAllocation then"),
        asked="request {i} (available {available}; must_include {must}; allocation_size {size})",
        failed="GetPreferredAllocation failed for {asked}: {error}")
    pod = obs.get("pod") or {}
    if not pod.get("kubelet_called"):
        _fail("kubelet did not call GetPreferredAllocation when it admitted a Pod")
    if len({WIDGETS.get(d) for d in pod.get("devices") or []}) != 1 or len(pod.get("devices") or []) != 2:
        _fail("the Pod asking for two widgets on the empty node did not get two widgets on one NUMA node")
    return ctx.passed("every preferred allocation kept to one NUMA node where it could, and the Pod got aligned widgets")


def check_preferred(ctx):
    return judge_preferred(ctx, observe_preferred(ctx))


# -- restart --------------------------------------------------------------------------------------

def restart_quiet(previous_gap: float | None, rng) -> float:
    """How long after the plugin's last registration kubelet restarts next. The first time: a time
    drawn from FIRST_QUIET_S. Later: the gap between the plugin's last two registrations, plus a
    margin drawn from QUIET_MARGIN_S. A plugin on a fixed timer cannot pass both restarts: one that
    registers again every P s (or once, P s after the last time) either does so before the first
    restart (P shorter than that wait), or its second registration comes P s after its first, and
    its third P s after that — before the second restart, which waits longer than P; one that
    registers again only once never answers the second restart. The times are drawn anew each run,
    so no plugin can wait for a known moment; the verdict on a timer does not depend on the draw."""
    if previous_gap is None:
        return rng.uniform(*FIRST_QUIET_S)
    return previous_gap + rng.uniform(*QUIET_MARGIN_S)


def observe_restart(ctx, rng=None) -> dict:
    """The first registration and a Pod admitted; then RESTARTS kubelet restarts, each at a time
    restart_quiet picks relative to the plugin's own registrations; after each, the registration
    that answered it (CHANGE_S at most), the node and the Pod's widgets; then FINAL_S of watching
    and a second Pod. The watching stops early at anything that already fails (_hold)."""
    rng = rng or random.SystemRandom()
    resource = ctx.params["resource"]
    with _session(ctx) as s:
        _first_list(s, resource)
        obs = _registration(s, resource)
        if not s.lists(resource):
            return _window(s, obs)
        obs["held_before"] = s.admit("pod-a", resource, 2)["devices"]
        obs["restarts"] = []
        last, gap = _registered_at(s), None
        for _ in range(RESTARTS):
            _hold(s, last, restart_quiet(gap, rng))
            made = [r for r in _registrations(s, s.kubelet.starts) if r["error"] in (None, PENDING)]
            if s.exited is not None or len(made) != 1 or made[0]["stream"] != "open":
                break           # registered again before this restart, or stopped serving: judged as it is
            s.kubelet.restart()
            start, restarted = s.kubelet.starts, s.kubelet.clock()
            # kubelet's record of Register calls says which start each reached: one after this restart,
            # then the device list on the stream it opened (s.lists counts the fresh manager's), both
            # within CHANGE_S of the restart (the plugin's own time: Session.wait_for_plugin)
            def registered_again():
                return any(r["kubelet"] == start and r["stream"] is not None for r in s.registrations())
            s.wait_for_plugin(lambda: registered_again() and s.lists(resource) >= 1, CHANGE_S)
            again = registered_again()
            listed = again and s.lists(resource) >= 1
            if listed:
                _settled(s, resource)
            held = s.kubelet.manager.pod_devices.get("pod-a", {}).get("c", {}).get(resource)
            seen = {"registered_again": again, "listed": listed, "node": s.node(),
                    "held_after": list(held.devices) if held else []}
            if not again:
                seen.update(_unaccepted_register(s, start, restarted + CHANGE_S))
            obs["restarts"].append(seen)
            if not listed:
                break
            now = _registered_at(s, start)
            last, gap = now, now - last
        else:
            _hold(s, last, FINAL_S)
            if s.exited is None:
                obs["later_pod"] = s.admit("pod-b", resource, 2)["devices"]
        _window(s, obs)
        for n, seen in enumerate(obs["restarts"], start=2):
            seen["registrations"] = _registrations(s, n)
        return obs


def _missing_socket_note(record: dict) -> str:
    """When kubelet's dial gave up and no socket was at the endpoint's path: what can take a
    socket a plugin served away."""
    path = record.get("socket_missing")
    if not path:
        return ""
    if record.get("in_directory") is False:
        # the endpoint named a path outside the directory (absolute, or with ..): no plugin of the
        # exercise serves there, so what can take a socket away is beside the point
        return f"; when kubelet gave up, no socket was at {path}"
    return (f"; when kubelet gave up, no socket was at {path}. A plugin that serves there and stopped an earlier "
            "gRPC server on the same path without waiting for it: the old server removes its socket file when it "
            "has finished stopping, which can come after the new server made its own (grpc's server.stop() returns "
            "an event to wait on)")


def _unaccepted_register(s, start: int, until_clock: float) -> dict:
    """A restart not answered in time: did a Register call reach the restarted kubelet by
    `until_clock` (kubelet's clock, CHANGE_S after the restart), and what did kubelet answer the
    first one? kubelet answers only once it has dialed the plugin's socket (server.go Register,
    client.go dial: 10 s, the lab's 2 s), so the answer may come after that: it is awaited (the dial
    and GetDevicePluginOptions, each bounded by the dial timeout), and the verdict does not depend
    on how far the dial had got.
    {} when no call came in time; else `refused`: kubelet's error, or None if it accepted the call
    late or never answered."""
    def first():
        calls = [r for r in s.registrations() if r["kubelet"] == start and r["at"] <= until_clock]
        return calls[0] if calls else None
    if first() is None:
        return {}
    s.wait(lambda: first()["answered"], 2 * s.kubelet.dial_timeout + 1)
    call = first()
    return {"refused": call["error"] if call["answered"] else None,
            **({"socket_missing": call["socket_missing"]} if call.get("socket_missing") else {})}


def judge_restart(ctx, obs: dict):
    # before the first restart: one registration, its stream open until kubelet's restart closed it
    judge_register(ctx, obs, stream="closed", when="before kubelet's first restart: ")
    restarts = obs.get("restarts") or []
    for n in range(RESTARTS):
        which = ORDINALS[n]
        seen = restarts[n] if n < len(restarts) else {}
        regs = seen.get("registrations") or []
        if not seen.get("registered_again") or not regs:
            every = (" It registered again after the first restart: a plugin notices every restart, whenever it "
                     "comes — one that registers again once, or after a fixed time, misses one") if n else ""
            if seen.get("refused"):
                # its Register call reached the restarted kubelet in time, which refused it once it had
                # tried to dial the plugin back (observe_restart waited for that answer)
                dial = (": kubelet dials the socket the endpoint names, in its device-plugins directory, before it "
                        f"answers (plugin/v1beta1/server.go Register){_missing_socket_note(seen)}") \
                    if seen["refused"].startswith("failed to dial") else ""
                _fail(f"after kubelet's {which} restart (kubelet.sock made anew, your socket removed) your plugin "
                      f"called Register, and kubelet refused it: {seen['refused']} — so it did not register "
                      f"again{dial}.{every}")
            _fail(f"after kubelet's {which} restart (kubelet.sock made anew, your socket removed) your plugin did not "
                  f"register again within {CHANGE_S:g} s.{every}")
        resource = ctx.params["resource"]
        names = sorted({str(r.get("resource")) for r in regs if not r.get("error")})
        if names and resource not in names:
            # the streams kubelet opened are another resource's: nothing on them lists this one
            _fail(f"after kubelet's {which} restart your plugin registered again, but the resource it registered then "
                  f"is {', '.join(names)}, not the exercise's {resource}: a restarted kubelet knows no device of "
                  f"{resource} (capacity 0) until a plugin registers that resource again and lists its devices",
                  resource, names)
        if not seen.get("listed"):
            _fail(f"after kubelet's {which} restart your plugin registered again, but kubelet got no device list on "
                  f"the ListAndWatch stream it opened then within {CHANGE_S:g} s: a restarted kubelet knows no device of "
                  f"{ctx.params['resource']} (capacity 0) until the plugin lists them on the new stream — every "
                  "Register opens a new one (plugin/v1beta1/handler.go connectClient), and kubelet learns the devices "
                  "only from the messages of that stream (plugin/v1beta1/client.go Run)")
        last = n == RESTARTS - 1
        when = f"after kubelet's {which} restart" + ("" if last else f", before its {ORDINALS[n + 1]}") + ": "
        # after it: again exactly one registration, its stream open until the next restart, or to the end
        _judge_registered(ctx, {**obs, "registrations": regs}, "open" if last else "closed", when)
        _judge_node(ctx, seen.get("node"), 4, 4, f"after kubelet's {which} restart and your re-registration: ")
        if sorted(seen.get("held_after") or []) != sorted(obs.get("held_before") or []):
            _fail(f"the Pod admitted before the restarts does not hold its two widgets after kubelet's {which} restart "
                  "(kubelet_internal_checkpoint)")
    later = obs.get("later_pod")
    held = set(obs.get("held_before") or [])
    if later is None or len(set(later)) != 2 or set(later) - set(WIDGETS) or set(later) & held:
        _fail("a Pod admitted after the restarts did not get two widgets nobody held")
    return ctx.passed(f"your plugin registered again after each of kubelet's {RESTARTS} restarts, and only then; the "
                      "Pod kept its widgets")


def check_restart(ctx):
    return judge_restart(ctx, observe_restart(ctx))


# -- checkpoint (a prediction) ----------------------------------------------------------------------

def reconstructed_held(lab_dir: Path, case: str) -> dict[str, list[str]]:
    """The widgets each Pod holds at the end of the exercise's scenario, as labkit's reconstruction
    of kubelet's device manager plays it (labkit.devices.play: readCheckpoint on restart,
    UpdateAllocatedDevices and devicesToAllocate when the new Pod is admitted); all of a Pod's
    containers together."""
    from labkit.devices.play import final_pod_devices, load_case
    held = final_pod_devices(load_case(lab_dir / case))
    return {uid: sorted({d for c in containers.values() for ids in c.values() for d in ids})
            for uid, containers in held.items()}


def scenario_facts(lab_dir: Path, case: str) -> dict:
    """What the feedback may point at: the Pods of the checkpoint, the Pods admitted later, the
    devices listed unhealthy after the restart."""
    from labkit.devices.play import load_case
    scenario = load_case(lab_dir / case)
    data = ((scenario.get("given") or {}).get("checkpoint") or {}).get("Data") or {}
    restored = {str(e["PodUID"]) for e in data.get("PodDeviceEntries") or []}
    created = {str((s.get("pod") or {}).get("uid") or (s.get("pod") or {}).get("name"))
               for s in scenario.get("steps") or [] if s.get("op") == "create_pod"}
    sick = {str(d["id"]) for s in scenario.get("steps") or [] if s.get("op") == "list_and_watch"
            for d in s.get("devices") or [] if d.get("health", HEALTHY) != HEALTHY}
    return {"restored": restored, "created": created, "unhealthy": sick}


def _held_answer(answer) -> dict[str, list[str]]:
    if not isinstance(answer, dict) or not isinstance(answer.get("held"), dict):
        raise CheckFailed("your answer needs `held:` — a mapping from each Pod that holds widgets once next is "
                          "admitted to the list of its widgets")
    out = {}
    for pod, widgets in answer["held"].items():
        if widgets is None:
            widgets = []
        if not isinstance(widgets, list) or not all(isinstance(w, str) for w in widgets):
            raise AnswerMalformed(f"held: {pod} is not a list of widget IDs")
        if len(set(widgets)) != len(widgets):
            raise CheckFailed(f"held: {pod} in your answer names a widget twice: a Pod holds a widget once, however "
                              "many of its containers use it")
        if widgets:
            out[str(pod)] = sorted(widgets)
    return out


# what a wrong prediction is told while it can still earn its points: the same for every wrong answer
CHECKPOINT_ADVICE = ("work it out again from kubelet's rules, not by trying answers: what it restores from its "
                     "checkpoint when it starts (manager.go readCheckpoint), what an Unhealthy device changes for a "
                     "Pod that holds it, what an init container's devices are to the containers after it "
                     "(devicesToReuse), what it frees before it allocates for a new Pod (UpdateAllocatedDevices) and "
                     "which widgets that Pod can get (devicesToAllocate). Once `labkit devices play` has shown the "
                     "outcome (your answer is then kept as it is), the check names what was wrong")


def judge_checkpoint(ctx, answer, note: str = "", settled: bool | None = None):
    """The prediction against labkit's reconstruction. A well-formed wrong answer is told that it
    is wrong and where to look, but not which Pod or widget (ctx.grid_feedback: the different wrong
    answers are counted), while it can still earn its points; once `labkit devices play` has shown
    the outcome and the answer is kept (`settled`; labkit.predictions), the feedback names the Pod
    and the rule it got wrong. An answer that is not a prediction of the scenario's Pods (no
    `held:`, a widget twice, a Pod the scenario does not have) is named at once: that gives
    nothing away."""
    from labkit import predictions
    if settled is None:
        settled = predictions.kept(ctx.lab.id, ctx.exercise.id) is not None
    truth = reconstructed_held(ctx.lab.directory, ctx.params["case"])
    facts = scenario_facts(ctx.lab.directory, ctx.params["case"])
    said = _held_answer(answer)
    pods = facts["restored"] | facts["created"]
    strangers = sorted(set(said) - pods)
    if strangers:
        raise CheckFailed(f"{strangers[0]} in your answer is not a Pod of the scenario{note}")
    if not settled:
        wrong = [pod for pod in sorted(pods) if said.get(pod, []) != truth.get(pod, [])]
        if wrong:
            raise CheckFailed(ctx.grid_feedback(wrong, len(pods), "Pods' widget lists", advice=CHECKPOINT_ADVICE) + note)
    for pod in sorted(set(said) - set(truth)):
        if pod in facts["restored"]:
            raise CheckFailed(f"your answer has {pod} holding widgets once next is admitted, and it holds none then: "
                              "look at which Pods kubelet still runs after the restart, and what it does with the "
                              "allocations of the others before it allocates for a new Pod (manager.go "
                              f"UpdateAllocatedDevices){note}")
        if pod in facts["created"]:
            raise CheckFailed(f"your answer gives {pod} widgets, and kubelet rejects it: count the healthy widgets "
                              f"that no active Pod holds when it is admitted (manager.go devicesToAllocate){note}")
        raise CheckFailed(f"{pod} in your answer is not a Pod of the scenario{note}")
    for pod in sorted(set(truth) - set(said)):
        if pod in facts["created"]:
            raise CheckFailed(f"your answer has {pod} holding no widget, and kubelet admits it with one: count the "
                              "healthy widgets that no active Pod holds when it is admitted (manager.go "
                              f"UpdateAllocatedDevices, devicesToAllocate){note}")
        raise CheckFailed(f"your answer leaves out {pod}, which holds widgets once next is admitted: kubelet reads "
                          f"its checkpoint when it starts (manager.go readCheckpoint){note}")
    for pod in sorted(truth):
        if said[pod] == truth[pod]:
            continue
        if pod in facts["created"]:
            raise CheckFailed(f"the widgets of {pod} in your answer are not the ones kubelet gives it: it takes them "
                              f"from the healthy widgets no active Pod holds (manager.go devicesToAllocate){note}")
        if (set(truth[pod]) - set(said[pod])) & facts["unhealthy"]:
            raise CheckFailed(f"your answer takes a widget away from {pod}: look at what a device turning Unhealthy "
                              "changes for a running Pod that holds it, and at its entries in the checkpoint "
                              f"(`labkit devices checkpoint -f`){note}")
        raise CheckFailed(f"the widgets of {pod} in your answer are not the ones kubelet restores for it: read its "
                          "entries in the checkpoint (`labkit devices checkpoint -f`), each container's as "
                          f"well{note}")
    return ctx.passed("every Pod's widgets after kubelet's restart and the admission of next, as kubelet's device "
                      f"manager has them{note}")


def check_checkpoint(ctx):
    from labkit import predictions
    answer, note = predictions.graded_answer(ctx)
    return judge_checkpoint(ctx, answer, note)


# -- share: fractional widgets in gpu-manager's style ------------------------------------------------

SHARES = 4               # share: device IDs per widget (vcores)
VCORES = {f"{w}-vcore-{k}": w for w in sorted(WIDGETS) for k in range(SHARES)}   # labkit's ID -> widget map
VCORE_NUMA = {v: WIDGETS[w] for v, w in VCORES.items()}                           # each on its widget's NUMA node


def _vc(widget: int, *shares: int) -> list[str]:
    return [f"widget-{widget}-vcore-{k}" for k in shares]


# (available, must_include, size): the GetPreferredAllocation requests the check sends. PARTLY
# leaves widget-0 two vcores, widget-1 four, widget-2 one, widget-3 three.
PARTLY = _vc(0, 0, 1) + _vc(1, 0, 1, 2, 3) + _vc(2, 0) + _vc(3, 0, 1, 2)
SHARE_REQUESTS = ((sorted(VCORES), [], 2), (PARTLY, [], 2), (PARTLY, [], 3), (PARTLY, _vc(1, 2), 2), (PARTLY, [], 1),
                  (_vc(0, 3) + _vc(2, 1, 2) + _vc(3, 0), [], 3), (sorted(VCORES), _vc(0, 0) + _vc(3, 1), 3))
# the Allocate calls the check makes itself, with IDs the plugin would not have preferred: kubelet
# sends whatever devicesToAllocate chose (a preference it could not take, a topology-aligned set)
SHARE_ALLOCATES = (_vc(2, 1, 3), _vc(1, 0), _vc(0, 2) + _vc(3, 1, 2))
# the Pods admitted, in order, with their vcores: pod-b finds room beside pod-a; no widget has
# room for pod-f's three when it comes (16 vcores, 16 asked)
SHARE_PODS = (("pod-a", 2), ("pod-b", 2), ("pod-c", 3), ("pod-d", 4), ("pod-e", 2), ("pod-f", 3))


def widgets_of(ids) -> list[str]:
    """The widgets behind vcore IDs, each once (labkit's map; an ID not in it stands for itself)."""
    return sorted({VCORES.get(str(i), str(i)) for i in ids or []})


def fitting_widgets(available, must, size) -> dict[str, int]:
    """The widgets that can hold a whole request — `size` of the available vcores on them, every
    must_include one among them — each with its number of available vcores."""
    per_widget: dict[str, int] = {}
    for dev in available:
        if dev in VCORES:
            per_widget[VCORES[dev]] = per_widget.get(VCORES[dev], 0) + 1
    needed = {VCORES.get(d) for d in must}
    if len(needed) > 1:
        return {}
    return {w: n for w, n in per_widget.items() if n >= size and (not needed or w in needed)}


def share_problem(available, must, size, answer) -> tuple[str, str] | None:
    """What is wrong with a preferred allocation of vcores, by the exercise's rules (gpu-manager's
    share mode, pkg/algorithm/nvidia/share.go: best fit): (word, what), or None."""
    got = [str(d) for d in answer or []]
    if len(got) != size or len(set(got)) != len(got):
        repeats = " with repeats" if len(set(got)) != len(got) else ""
        return "allocation_size", f"has {len(got)} device ID(s){repeats}; it must have allocation_size distinct ones"
    if set(got) - set(available):
        return "not available", "names a vcore that is not available (one another container holds)"
    if set(must) - set(got):
        return "must_include", "leaves out a vcore of must_include_deviceIDs"
    fits = fitting_widgets(available, must, size)
    on = widgets_of(got)
    if fits and len(on) > 1:
        return "one widget", (f"spreads the request over {len(on)} widgets, though one widget has enough available "
                              "vcores for all of it")
    if fits and fits.get(on[0], 0) != min(fits.values()):
        return "fewest", (f"puts the request on a widget with {fits.get(on[0], 0)} available vcores, though a widget "
                          "with fewer has room for it: best fit takes the widget with the fewest available vcores "
                          "that can hold the request")
    return None


def observe_share(ctx) -> dict:
    """The registration and the 16 vcores; GetPreferredAllocation asked directly with
    SHARE_REQUESTS; Allocate asked directly with SHARE_ALLOCATES; then the Pods of SHARE_PODS
    admitted one after the other by kubelet (its choice, with the plugin's preference), each with
    the Allocate answer kubelet keeps for its container (what the runtime would get)."""
    resource = ctx.params["resource"]
    with _session(ctx) as s:
        _first_list(s, resource, VCORE_NUMA)
        obs = _registration(s, resource)
        obs.update(options=s.options(resource), answers=[], allocates=[], pods=[])
        client = s.kubelet.clients.get(resource)
        if client is None or not s.lists(resource):
            return _window(s, obs)
        obs["answers"] = _ask_preferred(client, SHARE_REQUESTS)
        for ids in SHARE_ALLOCATES:
            seen = {"devices": list(ids)}
            try:
                seen["envs"] = client.allocate(list(ids)).get("envs") or {}
            except Exception as exc:
                seen["error"] = str(exc)
            obs["allocates"].append(seen)
        for pod, size in SHARE_PODS:
            admitted = s.admit(pod, resource, size)
            held = s.kubelet.manager.pod_devices.get(pod, {}).get("c", {}).get(resource)
            obs["pods"].append({"name": pod, "size": size, **admitted,
                                "envs": dict((held.response or {}).get("envs") or {}) if held else {}})
        return _window(s, obs)


def _judge_share_envs(ctx, envs: dict, devices: list, what: str) -> None:
    name = ctx.params["env"]
    envs = envs or {}
    if name not in envs:
        _fail(f"your Allocate answer for {what} has no {name} in its envs (ContainerAllocateResponse.envs)")
    named = str(envs[name]).split(",")
    want = widgets_of(devices)
    if len(set(named)) != len(named):
        _fail(f"{name} in your Allocate answer for {what} is {envs[name]!r}: it names a widget more than once; "
              "a container that holds two vcores of one widget still sees that widget once", ",".join(want),
              envs[name])
    if sorted(named) != want:
        _fail(f"{name} in your Allocate answer for {what} is {envs[name]!r}, which is not the widgets behind the "
              f"vcores kubelet sent in devices_ids ({', '.join(sorted(map(str, devices)))}): name the widgets behind "
              "exactly the IDs of the request, whatever your GetPreferredAllocation answered before (kubelet does "
              "not tell Allocate which Pod, or which preference, the IDs are for)", ",".join(want), envs[name])
    more = sorted(set(envs) - {name})
    if more:
        _fail(f"your Allocate answer for {what} puts more than {name} into the environment: {', '.join(more)}")


def judge_share(ctx, obs: dict):
    resource = ctx.params["resource"]
    _judge_registered(ctx, obs)
    _judge_devices(obs.get("devices"), expected=VCORE_NUMA)
    _judge_node(ctx, obs.get("node"), len(VCORES), len(VCORES))
    _judge_preferred_answers(
        obs, SHARE_REQUESTS, share_problem,
        no_option=("your plugin's GetDevicePluginOptions answer does not say get_preferred_allocation_available: "
                   "kubelet never asks it which vcores to take, and puts a Pod's vcores wherever its own choice falls"),
        asked="GetPreferredAllocation request {i} (available {available}; must_include {must}; allocation_size {size})",
        failed="{asked} failed: {error}")
    allocates = obs.get("allocates") or []
    if len(allocates) != len(SHARE_ALLOCATES):
        _fail("not every Allocate request got an answer")
    for seen in allocates:
        ids = seen.get("devices") or []
        what = f"devices_ids {', '.join(ids)}"
        if seen.get("error"):
            _fail(f"Allocate failed for {what}: {seen['error']}")
        _judge_share_envs(ctx, seen.get("envs"), ids, what)
    pods = obs.get("pods") or []
    if [p.get("name") for p in pods] != [p for p, _n in SHARE_PODS]:
        _fail("kubelet did not admit every Pod of the check: " + ", ".join(p for p, _n in SHARE_PODS))
    free = set(VCORES)
    for seen in pods:
        pod, size, devices = seen.get("name"), seen.get("size"), [str(d) for d in seen.get("devices") or []]
        if not seen.get("admitted"):
            _fail(f"kubelet did not admit {pod} ({size} vcores): {seen.get('error') or 'not tried'}")
        if len(devices) != size or len(set(devices)) != len(devices) or set(devices) - free:
            _fail(f"{pod} did not get {size} vcores nobody else holds: kubelet's device list has fewer distinct "
                  f"free vcores than the Pods asked for ({', '.join(devices) or 'none'})")
        fits = fitting_widgets(sorted(free), [], size)
        on = widgets_of(devices)
        if fits and (len(on) > 1 or fits.get(on[0], 0) != min(fits.values())):
            _fail(f"{pod} ({size} vcores) got {', '.join(devices)} — on {', '.join(on)} — though a widget had room "
                  "for all of them: kubelet took another choice than best fit on one widget (is your "
                  "GetPreferredAllocation offered and answering with the fewest-room widget that fits?)")
        _judge_share_envs(ctx, seen.get("envs"), devices, f"{pod}'s container")
        free -= set(devices)
    first, last = pods[0], pods[-1]
    shared = widgets_of(first.get("devices"))
    split = widgets_of(last.get("devices"))
    return ctx.passed(f"16 vcores of {resource} on four widgets, packed best fit: {first['name']} and "
                      f"{pods[1]['name']} share {', '.join(shared)}; {last['name']} found no widget with room and "
                      f"spans {', '.join(split)} — nothing in kubelet keeps a Pod's vcores on one widget, or one "
                      "Pod's apart from another's")


def check_share(ctx):
    return judge_share(ctx, observe_share(ctx))


# -- near-misses of what the check observed (mutants/) ----------------------------------------------

# (generic path pattern, words the failure must name): the first that matches an edit's path wins
REGISTRATION_WORDS = [
    (r"serving", ("no longer answers on its socket",)),
    (r"registrations(\[\])?", ("Register",)), (r"registrations\[\]\.resource", ("resource",)),
    (r"registrations\[\]\.version", ("version",)), (r"registrations\[\]\.error", ("refused",)),
    (r"registrations\[\]\.stream", ("ListAndWatch",)),
    (r"(restarts\[\]\.)?registrations\[\]\.in_directory", ("not in $DEVICE_PLUGIN_DIR itself",)),
    (r"(\w+\.)?devices(\[\])?(\.ID)?", ("device IDs",)), (r"(\w+\.)?devices\[\]\.health", ("health",)),
    (r"(\w+\.)?devices\[\]\.numa.*", ("NUMA",)),
    (r"(\w+\.)?node(\.capacity.*)?", ("capacity",)), (r"(\w+\.)?node\.allocatable.*", ("allocatable",)),
]
STREAMS = ["open", "ended", "replaced", "closed"]
ORDER_ONLY = ("kubelet keeps a resource's devices in a map by ID (manager.go genericDeviceUpdateCallback): the "
              "order of a ListAndWatch message does not matter")
NO_ERROR = "a registration without an error field is one kubelet accepted, as with error null"
STALE_RESOURCE = ("another exercise's resource stays on the Node at 0 (a fresh node's kubelet zeroes it: "
                  "kubelet_node_status.go reconcileExtendedResource): listed at 0 or not listed, no other resource "
                  "has devices")


def _generic(path: str) -> str:
    import re
    return re.sub(r"\[\d+\]", "[]", path)


def observation_mutants(exercise: str, obs: dict, words: list, *, skip=(), equivalent=None, alternatives=None,
                        resource: str = "example.com/widget", socket: str = "widget.sock"):
    """Every one-step edit of the observation (labkit.mutants.tree_edits) as a Mutant judged by
    observation: `words` [(generic path regex, words)] say what the failure must name;
    `equivalent(edit)` gives the reason an edit changes nothing the exercise states (else None);
    `skip` [regex] leaves paths alone (what the check only shows: the plugin's output)."""
    import re
    from labkit.mutants import Mutant, tree_edits

    alternatives = {"registrations[].error": ['the ResourceName "widget" is invalid'],
                    "registrations[].version": ["v1alpha1", "v1"], "registrations[].stream": STREAMS,
                    "serving": ["rpc error: code = Unavailable desc = failed to connect to all addresses"],
                    **(alternatives or {})}
    phases = ("broken", "healed", "others_broken", "others_healed")      # health_phases
    for key in ("devices[].health", *(f"{p}.devices[].health" for p in (*phases, "last"))):
        alternatives.setdefault(key, [UNHEALTHY, HEALTHY, "healthy", ""])
    skipped = lambda p: any(re.fullmatch(x, _generic(p))  # noqa: E731
                            for x in ("exited", "log", r"(\w+\.)?registrations\[\]\.(end|at|served)",
                                      r"restarts\[\]\.registrations\[\]\.(end|at|served)", *skip))
    for edit in tree_edits(obs, alternatives=alternatives, skip=skipped):
        generic = _generic(edit.path)
        reason = equivalent(edit) if equivalent else None
        if reason is None and edit.op == "swap" and re.fullmatch(r"(\w+\.)?devices", generic):
            reason = ORDER_ONLY
        if reason is None and edit.op == "drop" and re.fullmatch(r"(\w+(\[\])?\.)?registrations\[\]\.error", generic):
            reason = NO_ERROR
        if reason is None and edit.op == "drop" and edit.before == 0 and \
                re.fullmatch(r"(\w+(\[\])?\.)?node\.(capacity|allocatable)\..+", generic) and \
                not generic.endswith("." + resource):
            reason = STALE_RESOURCE
        named = next((w for pattern, w in words + REGISTRATION_WORDS if re.fullmatch(pattern, generic)), None)
        if reason is None and named is None:
            raise ValueError(f"no words for a near-miss at {edit.path}")
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"observed: {edit.describe()}", names=() if reason else tuple(named),
                     equivalent=reason, observation=edit.value,
                     apply=None if reason else _live(exercise, edit, resource, socket))


# A plugin that lists what a near-miss's device list says, for applying it live: labkit's
# reference plugin (labkit.devices.plugin) given those devices.
SPEC_PLUGIN = """\
import json
import os
from pathlib import Path

from labkit.devices.plugin import ReferencePlugin

plugin = ReferencePlugin(json.loads({spec!r}), Path(os.environ["DEVICE_PLUGIN_DIR"]))
plugin.start()
plugin.run()
"""


def _live(exercise: str, edit, resource: str = "example.com/widget", socket: str = "widget.sock"):
    """apply(env) for a near-miss of the first device list that a plugin can really send (every
    device with its ID and health, at most one NUMA node each); None for the others."""
    if not edit.path.startswith("devices") or not isinstance(edit.value.get("devices"), list):
        return None
    devices = edit.value["devices"]
    # labkit's reference plugin refuses a device without an ID (labkit.devices.plugin._device): it
    # would exit before registering, which is not the near-miss
    if not all(isinstance(d, dict) and d.get("ID") not in (None, "") and "health" in d and len(d.get("numa") or []) <= 1
               for d in devices):
        return None
    spec = {"resource": resource, "socket": socket,
            "devices": [{"id": d["ID"], "health": d["health"], "numa": (d.get("numa") or [None])[0]} for d in devices]}
    source = SPEC_PLUGIN.format(spec=__import__("json").dumps(spec))

    def apply(env):
        env.lab.environment_module().write_plugin(env, exercise, source)
    return apply
