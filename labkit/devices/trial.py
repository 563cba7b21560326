"""`labkit devices try`: one plugin run against a fresh node (labkit.devices.session), step by
step, as a list of steps each saying what was done and what kubelet then showed.

Each step waits for what it is about, bounded, and no longer: the first device list on the stream
kubelet opened (or kubelet's refusal of the Register call, then the plugin's exit); after a
change of the health file a new list, then the one with the broken device's new health; after
kubelet's restart a registration, then a list, then the list the plugin had before the restart
(a plugin that sends a list in several messages gets SETTLE_S for the rest of it). A plugin that
exits ends every wait (Session.wait)."""

from __future__ import annotations

import json

REGISTER_S, CHANGE_S, SETTLE_S = 3.0, 3.0, 0.3


def _devices(s, resource):
    return sorted(s.devices(resource), key=lambda d: d["ID"])


def _step(what: str, **shown) -> dict:
    return {"step": what, **shown}


def _kept(devices: list[dict]) -> list[tuple]:
    """What of a device list a step compares: each device's ID, health and NUMA nodes."""
    return sorted((d["ID"], d["health"], tuple(d["numa"])) for d in devices)


def run(session, resource: str, *, broken: str | None = None, pod: int = 0, restart: bool = False) -> list[dict]:
    steps = []
    with session as s:
        s.wait_for_plugin(lambda: s.lists(resource) >= 1 or any(r["error"] for r in s.registrations()), REGISTER_S)
        if not s.lists(resource):
            # refused (or nothing yet): a plugin whose Register failed usually ends; show its exit
            s.wait(lambda: s.exited is not None, SETTLE_S)
        steps.append(_step("plugin started", registrations=s.registrations_shown(), options=s.options(resource),
                           devices=_devices(s, resource), node=s.node(), exited=s.exited, log=s.plugin_log()))
        if not s.lists(resource):
            return steps
        if broken:
            for health in ("Unhealthy", "Healthy"):
                before = s.lists(resource)
                s.set_health({broken: health})
                sent = s.wait_for_plugin(lambda: s.lists(resource) > before, CHANGE_S)
                if sent:        # the list that says so (a plugin may send it in more than one message)
                    s.wait(lambda: any(d["ID"] == broken and d["health"] == health for d in s.devices(resource)),
                           SETTLE_S)
                steps.append(_step(f"health file: {broken}: {health}", new_list=sent, devices=_devices(s, resource),
                                   node=s.node()))
        if pod:
            start = len(s.kubelet.manager.calls)
            admitted = s.admit("pod-a", resource, pod)
            calls = [c for c in s.kubelet.manager.calls[start:] if c["call"] != "ListAndWatch"]
            seen = s.run_container("pod-a") if admitted["admitted"] else None
            steps.append(_step(f"Pod pod-a asks for {pod}", admitted=admitted, calls=calls, container=seen))
        if restart:
            count, listed_before = len(s.registrations()), _kept(s.devices(resource))
            s.kubelet.restart()
            steps.append(_step("kubelet restarted", node=s.node(), files=sorted(p.name for p in s.kubelet.directory.iterdir())))
            # a registration with the restarted kubelet, then a device list on the stream it opened
            again = s.wait_for_plugin(lambda: len(s.registrations()) > count, CHANGE_S)
            listed = again and s.wait_for_plugin(lambda: s.lists(resource) >= 1, CHANGE_S)
            if listed:          # the plugin's list as it was before the restart, if it sends that
                s.wait(lambda: _kept(s.devices(resource)) == listed_before, SETTLE_S)
            held = {uid: {c: {r: a.devices for r, a in rs.items()} for c, rs in cs.items()}
                    for uid, cs in s.kubelet.manager.pod_devices.items()}
            steps.append(_step("after the restart", registered_again=again, listed_again=listed,
                               registrations=s.registrations_shown(count),
                               node=s.node(), pod_devices=held, events=s.kubelet.events[-3:]))
    return steps


def _flat(value) -> str:
    """A value on one line: nested mappings and lists as JSON."""
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _line(key: str, value) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return f"  {key}:\n" + "".join(f"    - {', '.join(f'{k}={_flat(v)}' for k, v in item.items())}\n"
                                       for item in value)
    if isinstance(value, dict):
        return f"  {key}: {', '.join(f'{k}={_flat(v)}' for k, v in value.items()) or '(none)'}\n"
    if isinstance(value, str) and "\n" in value:
        return f"  {key}:\n" + "".join(f"    | {line}\n" for line in value.splitlines())
    return f"  {key}: {value}\n"


def render(steps: list[dict]) -> str:
    out = []
    for step in steps:
        out.append(f"== {step['step']}\n")
        for key, value in step.items():
            if key == "step" or value in (None, "", []):
                continue
            if key == "node":
                value = {f"capacity {r}": n for r, n in value["capacity"].items()} | \
                        {f"allocatable {r}": n for r, n in value["allocatable"].items()}
            out.append(_line(key, value))
    return "".join(out)
