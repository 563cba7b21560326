"""Play one device-plugin case (the fidelity format: plugin events, allocation requests,
checkpoints, restarts) on a fresh reconstructed device manager and compare the outcome with the
case's `expect`."""

from __future__ import annotations

import base64
import json
import re
import tempfile
from pathlib import Path
from labkit.cases import Played
from labkit.devices import checkpoint, gpushare
from labkit.devices.manager import (Allocation, Device, DeviceError, DeviceManager, Options, admission_error,
                                    topology_hints)
from labkit.errors import ConfigError
from labkit.inputs import load_yaml


class ScriptedPlugin:
    """A device plugin that answers as the case says."""

    def __init__(self, options: dict | None = None, preferred_answer=None, responses: dict | None = None):
        self._options = Options(**(options or {}))
        self.preferred_answer = preferred_answer
        self.responses = responses or {}

    def options(self) -> Options:
        return self._options

    def get_preferred_allocation(self, available, must_include, size):
        return self.preferred_answer

    def allocate(self, device_ids):
        ids_ = sorted(device_ids)            # they come in no order (manager.unsorted_list)
        return self.responses.get(tuple(ids_), {"envs": {"DEVICES": ",".join(ids_)}})


def load_case(path: Path) -> dict:
    case = load_yaml(path)
    if not isinstance(case, dict) or "id" not in case:
        raise ConfigError(path, None, "expected a device-plugin case: a mapping with id, category, ...")
    return case


_RANGE = re.compile(r"^(\D*)(\d+)\.\.(\D*)(\d+)$")


def ids(values) -> list[str]:
    """An ID list with `Dev0..Dev99` ranges expanded."""
    out = []
    for value in values or []:
        m = _RANGE.match(str(value))
        if m and m.group(1) == m.group(3):
            out += [f"{m.group(1)}{i}" for i in range(int(m.group(2)), int(m.group(4)) + 1)]
        else:
            out.append(str(value))
    return out


def devices(spec: list) -> list[Device]:
    out = []
    for item in spec or []:
        numa = item.get("numa")
        topology = tuple(numa) if numa else None
        names = ids([item["range"]]) if "range" in item else [item["id"]]
        out += [Device(name, item.get("health", "Healthy"), topology) for name in names]
    return out


def play(case: dict, observe=None) -> Played:
    """`observe(step, dm)`, when given, sees the device manager after each step of a steps case."""
    played = Played(str(case.get("id")), str(case.get("title") or ""))
    category = case.get("category")
    if category == "allocation":
        _allocation(case, played)
    elif category == "topology-hints":
        _hints(case, played)
    elif category == "gpu-manager":
        _gpu_share(case, played)
    else:
        _steps(case, played, observe)
    return played


def _allocation(case: dict, played: Played) -> None:
    given, expect = case["given"], case.get("expect") or {}
    dm = DeviceManager(sorted({n for d in devices(given["devices"]) for n in d.numa or []}) or [0])
    resource = given["resource"]
    plugin_spec = given.get("plugin") or {}
    plugin = ScriptedPlugin({"get_preferred_allocation_available": plugin_spec.get("get_preferred_allocation_available", False)},
                            ids(plugin_spec.get("preferred_answer")) if plugin_spec.get("preferred_answer") else None)
    dm.connect(resource, plugin, plugin.options())
    dm.list_and_watch(resource, devices(given["devices"]))
    allocated = ids(given.get("allocated"))
    if allocated:
        dm.pod_devices["other-pod"] = {"init": {resource: Allocation(allocated, {})}}
    hint = given.get("hint")
    try:
        chosen = dm.devices_to_allocate("pod", "container", resource, int(case["request"]["count"]),
                                        set(ids(given.get("reusable"))), hint["mask"] if hint else None)
        error = None
    except DeviceError as exc:
        chosen, error = [], str(exc)
    chosen = chosen or []
    if "error" in expect:
        played.check("error", expect["error"], error)
    if "count" in expect:
        played.check("count", expect["count"], len(chosen))
    if "exactly" in expect:
        played.check("exactly", sorted(ids(expect["exactly"])), sorted(chosen))
    if "includes" in expect:
        played.check("includes", ids(expect["includes"]), sorted(set(chosen) & set(ids(expect["includes"]))),
                     set(ids(expect["includes"])) <= set(chosen))
    if "excludes" in expect:
        played.check("excludes", ids(expect["excludes"]), sorted(set(chosen) & set(ids(expect["excludes"]))),
                     not set(chosen) & set(ids(expect["excludes"])))
    if "subset_of" in expect:
        played.check("subset_of", "chosen within the set", sorted(chosen), set(chosen) <= set(ids(expect["subset_of"])))
    if "alignment" in expect:
        by_node: dict[str, int] = {}
        for dev_id in chosen:
            device = dm.all_devices[resource].get(dev_id)
            if device and device.has_topology:
                by_node[str(device.numa[0])] = by_node.get(str(device.numa[0]), 0) + 1
        played.check("alignment", {str(k): v for k, v in expect["alignment"].items()}, by_node)
    if "preferred_call" in expect:
        calls = [c for c in dm.calls if c["call"] == "GetPreferredAllocation"]
        want = expect["preferred_call"]
        if want in (None, "none"):
            played.check("preferred_call", "none", calls or "none")
        else:
            got = calls[0] if calls else None
            played.check("preferred_call", {"available": sorted(ids(want["available"])), "must_include": sorted(ids(want["must_include"])),
                                            "size": want["size"]},
                         # both lists reach the plugin as a set's UnsortedList (manager.unsorted_list)
                         {"available": sorted(got["available"]), "must_include": sorted(got["must_include"]),
                          "size": got["size"]} if got else None)


def _hints(case: dict, played: Played) -> None:
    given = case["given"]
    dm = DeviceManager(given.get("numa_nodes"))
    for resource, spec in (given.get("devices") or {}).items():
        dm.connect(resource, ScriptedPlugin())
        dm.list_and_watch(resource, devices(spec))
    for pod_uid, containers in (given.get("allocated") or {}).items():
        for container, resources in containers.items():
            for resource, dev_ids in resources.items():
                dm.pod_devices.setdefault(pod_uid, {}).setdefault(container, {})[resource] = Allocation(ids(dev_ids), {})
    pod = given["pod"]
    scope = given.get("scope", "container")
    got: dict = {}
    containers = pod.get("containers") or []
    for resource in (case.get("expect") or {}).get("hints") or {}:
        if scope == "pod":
            request = max(sum(int((c.get("limits") or {}).get(resource, 0)) for c in containers),
                          max([int((c.get("limits") or {}).get(resource, 0)) for c in pod.get("init_containers") or []] or [0]))
            mine = [d for c in dm.pod_devices.get(pod["uid"], {}).values() for d in (c.get(resource).devices if c.get(resource) else [])]
        else:
            container = containers[0]
            request = int((container.get("limits") or {}).get(resource, 0))
            held = dm.pod_devices.get(pod["uid"], {}).get(container["name"], {}).get(resource)
            mine = held.devices if held else []
        available = dm.healthy.get(resource, set()) - dm.allocated_devices(resource)
        hints = topology_hints(dm, resource, request, available, allocated=mine or None)
        got[resource] = hints
    for resource, want in case["expect"]["hints"].items():
        have = got.get(resource)
        normal = (lambda hs: None if hs is None else sorted((tuple(h["mask"]), bool(h["preferred"])) for h in hs))
        played.check(f"hints {resource}", normal(want), normal(have))


def _gpu_share(case: dict, played: Played) -> None:
    gpus = [gpushare.GPU(g["minor"], g["allocatable_cores"], g["allocatable_memory_bytes"], g.get("pids", 0))
            for g in case["given"]["gpus"]]
    by_minor = {g.minor: g for g in gpus}
    for i, step in enumerate(case.get("steps") or []):
        expect = step.get("expect") or {}
        if step["op"] == "evaluate_share":
            picked = [g.path for g in gpushare.evaluate_share(gpus, step["cores"], step.get("memory_bytes", 0))]
            if "picked" in expect:
                played.check(f"step {i + 1} picked", expect["picked"], picked)
        elif step["op"] == "mark_occupied":
            gpushare.mark_occupied(by_minor[step["minor"]], step["cores"], step.get("memory_bytes", 0))
            for minor, cores in (expect.get("allocatable_cores") or {}).items():
                played.check(f"step {i + 1} cores of {minor}", cores, by_minor[int(minor)].allocatable_cores)


def _steps(case: dict, played: Played, observe=None) -> None:
    given = case.get("given") or {}
    dm = DeviceManager(given.get("numa_nodes"))
    now = 0.0
    node_capacity: dict[str, int] = {}
    plugins: dict[str, ScriptedPlugin] = {}
    with tempfile.TemporaryDirectory(prefix="labkit-devices-") as tmp:
        checkpoint_file = Path(tmp) / "kubelet_internal_checkpoint"
        responses = write_given_checkpoint(given.get("checkpoint"), checkpoint_file)
        # the Pods kubelet knows as active once its sources are ready (UpdateAllocatedDevices);
        # a case without them: sources not ready, nothing freed
        active = given.get("active_pods")
        dm.active_pods = None if active is None else {str(uid) for uid in active}
        for resource, spec in (given.get("resources") or {}).items():
            plugins[resource] = ScriptedPlugin()
            dm.connect(resource, plugins[resource])
            dm.list_and_watch(resource, devices(spec))
        for i, step in enumerate(case.get("steps") or []):
            what = f"step {i + 1} ({step['op']})"
            now = float(step.get("at_s", now))
            expect = step.get("expect") or {}
            error = None
            try:
                error = _step(dm, step, now, plugins, checkpoint_file, responses, played, what, expect)
            except DeviceError as exc:
                error = str(exc)
            if step["op"] == "wait":
                now = float(step["until_s"])
            if "error" in expect:
                played.check(f"{what} error", expect["error"], error)
            if any(k in expect for k in ("capacity", "allocatable", "removed", "node_status")):
                capacity, allocatable, removed = dm.get_capacity(now)
                for r in capacity:
                    node_capacity[r] = capacity[r]
                for r in removed:
                    node_capacity[r] = 0
                for key, got in (("capacity", capacity), ("allocatable", allocatable), ("removed", removed)):
                    if key in expect:
                        played.check(f"{what} {key}", expect[key] if key != "removed" else sorted(expect[key]),
                                     got if key != "removed" else sorted(got))
                if "node_status" in expect:
                    status_alloc = {r: allocatable.get(r, 0) for r in node_capacity}
                    played.check(f"{what} node capacity", expect["node_status"].get("capacity"), dict(node_capacity))
                    played.check(f"{what} node allocatable", expect["node_status"].get("allocatable"), status_alloc)
            if observe is not None:
                observe(step, dm)
        if case.get("steps"):
            played.outcome["pod_devices"] = pod_devices(dm)       # what every Pod holds at the end


def final_pod_devices(case: dict) -> dict:
    """The case played: {pod uid: {container: {resource: [IDs]}}} after its last step."""
    return play(case).outcome.get("pod_devices", {})


def pod_devices(dm: DeviceManager) -> dict:
    """{pod uid: {container: {resource: [device IDs, sorted]}}}: what kubelet's podDevices holds."""
    return {uid: {c: {r: sorted(a.devices) for r, a in rs.items()} for c, rs in cs.items()}
            for uid, cs in dm.pod_devices.items()}


def write_given_checkpoint(spec: dict | None, path: Path) -> dict:
    """The case's logical checkpoint written as kubelet writes it (`Checksum: computed`); the
    decoded responses it carries, for the restore to hand back."""
    if not spec:
        return {}
    data = spec.get("Data") or {}
    entries, responses = [], {}
    for e in data.get("PodDeviceEntries") or []:
        response = e.get("AllocResp") or {}
        responses[(e["PodUID"], e["ContainerName"], e["ResourceName"])] = response
        entries.append({**e, "DeviceIDs": {str(k): v for k, v in (e.get("DeviceIDs") or {}).items()},
                        "AllocResp": base64.b64encode(checkpoint.encode_response(response)).decode()})
    logical = {"PodDeviceEntries": entries, "RegisteredDevices": data.get("RegisteredDevices") or {}}
    value = spec.get("Checksum")
    path.write_text(json.dumps({"Data": logical, "Checksum": checkpoint.checksum(logical) if value in (None, "computed") else value}))
    return responses


def _step(dm: DeviceManager, step: dict, now: float, plugins: dict, checkpoint_file: Path, responses: dict,
          played: Played, what: str, expect: dict):
    op = step["op"]
    if op == "register":
        plugins[step["resource"]] = ScriptedPlugin(step.get("options"))
        dm.register(step["resource"], plugins[step["resource"]], step.get("version", "v1beta1"))
    elif op == "list_and_watch":
        if step["resource"] not in dm.endpoints:      # the unit tests inject the endpoint
            plugins.setdefault(step["resource"], ScriptedPlugin())
            dm.connect(step["resource"], plugins[step["resource"]])
        dm.list_and_watch(step["resource"], devices(step.get("devices")))
    elif op == "plugin_stop":
        dm.plugin_stopped(step["resource"], now - float(step.get("stopped_seconds_ago", 0)))
    elif op == "kubelet_restart":
        fresh = DeviceManager(dm.numa_nodes)
        checkpoint.read(fresh, checkpoint_file, now, responses)
        fresh.active_pods = dm.active_pods          # kubelet's Pods outlive its restart
        dm.__dict__.update(fresh.__dict__)
        restored = expect.get("restored")
        if restored:
            pods = {uid: {c: {r: a.devices for r, a in rs.items()} for c, rs in cs.items()}
                    for uid, cs in dm.pod_devices.items()}
            if "pod_devices" in restored:
                played.check(f"{what} restored pod devices", restored["pod_devices"], pods)
            if "allocated_devices" in restored:
                played.check(f"{what} restored allocated", {r: sorted(v) for r, v in restored["allocated_devices"].items()},
                             {r: sorted(dm.allocated_devices(r)) for r in restored["allocated_devices"]})
            if "endpoints" in restored:
                played.check(f"{what} endpoints", restored["endpoints"],
                             {r: "stopped" if e.stopped_at is not None else "running" for r, e in dm.endpoints.items()})
            if "is_device_plugin_resource" in restored:
                played.check(f"{what} device-plugin resources", restored["is_device_plugin_resource"],
                             {r: dm.is_device_plugin_resource(r) for r in restored["is_device_plugin_resource"]})
    elif op == "create_pod":
        pod = {**step["pod"], "uid": step["pod"].get("uid") or step["pod"]["name"]}
        try:
            made = dm.admit_pod(pod)
            admitted, error = True, None
            # an admitted Pod runs: it is one of kubelet's active Pods from then on (kubelet.go
            # HandlePodAdditions adds it to the pod manager; GetActivePods leaves out only
            # terminated ones), so a later UpdateAllocatedDevices keeps its devices
            if dm.active_pods is not None:
                dm.active_pods.add(pod["uid"])
        except DeviceError as exc:
            dm.forget_pod(pod["uid"])
            made, admitted, error = {}, False, str(exc)
        if "admitted" in expect:
            played.check(f"{what} admitted", expect["admitted"], admitted)
        if "admission" in expect:
            played.check(f"{what} admission", expect["admission"], admission_error(error) if error else None)
        if "allocated_count" in expect:
            played.check(f"{what} allocated count", expect["allocated_count"],
                         {r: len(dm.allocated_devices(r)) for r in expect["allocated_count"]})
        if "devices" in expect:
            played.check(f"{what} devices", {c: sorted(v) for c, v in expect["devices"].items()},
                         {c: sorted(d for ids_ in got.values() for d in ids_) for c, got in made.items()})
        if "pod_devices" in expect:        # every Pod's devices after this admission
            played.check(f"{what} pod devices", expect["pod_devices"], pod_devices(dm))
        checkpoint.write(dm, checkpoint_file)
        return error
    elif op in ("wait", "get_capacity"):
        pass
    else:
        played.check(f"{what}", "an operation labkit plays", op, False)
    if op in ("list_and_watch", "plugin_stop"):
        checkpoint.write(dm, checkpoint_file)
    return None
