"""What a restarted kubelet keeps from its checkpoint (labkit/devices/manager.py
update_allocated_devices after manager.go UpdateAllocatedDevices, played by labkit/devices/play.py),
and which cases the device-plugins lab's checkpoint exercise withholds (labkit/devices/withhold.py)."""

from __future__ import annotations

import copy
import json

import yaml

from labkit.devices.manager import Allocation, Device, DeviceManager
from labkit.devices.play import final_pod_devices, load_case, play
from labkit.devices.withhold import restores_exercise, situation
from support import REPO, labkit

SCENARIO = REPO / "labs" / "device-plugins" / "scenarios" / "restart.yaml"
WIDGET = "example.com/widget"


def held(case) -> dict:
    return {uid: sorted({d for c in cs.values() for ids in c.values() for d in ids})
            for uid, cs in final_pod_devices(case).items()}


def test_running_pods_keep_their_checkpointed_devices_and_an_ended_pods_are_freed():
    assert held(load_case(SCENARIO)) == {"train": ["widget-0", "widget-1"], "prep": ["widget-3"],
                                         "next": ["widget-2"]}


def test_before_the_sources_are_ready_nothing_is_freed():
    case = load_case(SCENARIO)
    del case["given"]["active_pods"]
    played = play(case)
    assert held(case) == {"train": ["widget-0", "widget-1"], "infer": ["widget-2"], "prep": ["widget-3"]}
    assert played.outcome["pod_devices"]["infer"] == {"server": {WIDGET: ["widget-2"]}}


def test_the_pod_being_admitted_is_not_dropped():
    dm = DeviceManager([0])
    plugin = type("P", (), {"allocate": lambda self, ids: {}, "options": lambda self: None})()
    dm.connect(WIDGET, plugin)
    dm.list_and_watch(WIDGET, [Device("a"), Device("b")])
    dm.pod_devices["gone"] = {"c": {WIDGET: Allocation(["a"], {})}}
    dm.active_pods = set()
    made = dm.admit_pod({"uid": "new", "initContainers": [{"name": "i", "limits": {WIDGET: 1}}],
                         "containers": [{"name": "c", "limits": {WIDGET: 2}}]})
    assert "gone" not in dm.pod_devices and sorted(made["c"][WIDGET]) == ["a", "b"]
    dm.active_pods = None
    dm.pod_devices["stale"] = {"c": {WIDGET: Allocation(["a"], {})}}
    dm.update_allocated_devices()
    assert "stale" in dm.pod_devices


def test_the_situation_ignores_names_times_and_answers_not_devices():
    case = load_case(SCENARIO)
    renamed = json.loads(json.dumps(case).replace('"train"', '"job-7"').replace('"fetch"', '"init-0"'))
    for step in renamed["steps"]:
        step["at_s"] = step.get("at_s", 0) + 30
    assert situation(renamed) == situation(case)
    other = copy.deepcopy(case)
    other["steps"][2]["devices"][1]["health"] = "Healthy"
    assert situation(other) != situation(case)
    fewer = copy.deepcopy(case)
    fewer["given"]["active_pods"] = ["train", "prep", "infer"]
    assert situation(fewer) != situation(case)


def test_a_copy_with_the_devices_and_the_resource_renamed_is_the_same_situation(tmp_path):
    # `sed s/widget/gizmo/` on the scenario: every widget and the resource renamed, the story the
    # same; `labkit devices play` withholds it as it withholds the scenario
    case = load_case(SCENARIO)
    gizmos = json.loads(json.dumps(case).replace("widget", "gizmo"))
    assert "widget" not in json.dumps(gizmos)
    assert situation(gizmos) == situation(case)
    assert restores_exercise(gizmos, case)
    copy_file = tmp_path / "gizmos.yaml"
    copy_file.write_text(yaml.safe_dump(gizmos))
    refused = labkit("devices", "play", "-f", str(copy_file), check=2)
    assert "exercise checkpoint" in refused.stderr
    # the widgets renamed in another order are another naming of the same devices too
    swapped = json.loads(json.dumps(case).replace("widget-0", "w-a").replace("widget-1", "w-b")
                         .replace("widget-2", "w-c").replace("widget-3", "w-d"))
    assert situation(swapped) == situation(case) and restores_exercise(swapped, case)


def test_play_withholds_a_renamed_copy_and_plays_another_story(tmp_path):
    # `labkit devices play` on a copy of the exercise's scenario with other names: withheld until a
    # prediction is written; a story whose restart brings back other allocations (train held one
    # widget) is another situation: played
    case = load_case(SCENARIO)
    renamed = json.loads(json.dumps(case).replace('"infer"', '"batch-9"'))
    copy_file = tmp_path / "copy.yaml"
    copy_file.write_text(yaml.safe_dump(renamed))
    refused = labkit("devices", "play", "-f", str(copy_file), check=2)
    assert "exercise checkpoint" in refused.stderr and "checkpoint.yaml" in refused.stderr
    other = copy.deepcopy(case)
    other["given"]["checkpoint"]["Data"]["PodDeviceEntries"][0]["DeviceIDs"] = {"0": ["widget-0"]}
    other_file = tmp_path / "other.yaml"
    other_file.write_text(yaml.safe_dump(other))
    played = labkit("devices", "play", "-f", str(other_file), check=0)
    assert "PLAYED device-plugins-restart" in played.stdout and "pod next container c" in played.stdout
    as_json = json.loads(labkit("devices", "play", "-f", str(other_file), "-o", "json", check=0).stdout)
    assert as_json[0]["outcome"]["pod_devices"]["train"] == {"main": {WIDGET: ["widget-0"]}}


def test_a_case_restoring_the_exercises_pods_is_the_exercise_whatever_else_it_does():
    # what a restart restores answers most of the exercise (which Pods keep what): a copy with
    # another id and more NUMA nodes, a Pod added after next, next asking for two, widget-1 healthy
    # again, the checkpoint's entries in another order — each restores the exercise's Pods as they are
    case = load_case(SCENARIO)
    variants = []
    more_numa = copy.deepcopy(case)
    more_numa["id"], more_numa["given"]["numa_nodes"] = "mine", [0, 1, 2]
    variants.append(more_numa)
    another_pod = copy.deepcopy(case)
    another_pod["steps"].append({"op": "create_pod", "at_s": 6,
                                 "pod": {"name": "other", "containers": [{"name": "c", "limits": {WIDGET: 1}}]}})
    variants.append(another_pod)
    asks_two = copy.deepcopy(case)
    asks_two["steps"][3]["pod"]["containers"][0]["limits"][WIDGET] = 2
    variants.append(asks_two)
    healthy = copy.deepcopy(case)
    healthy["steps"][2]["devices"][1]["health"] = "Healthy"
    variants.append(healthy)
    reordered = copy.deepcopy(case)
    reordered["given"]["checkpoint"]["Data"]["PodDeviceEntries"].reverse()
    variants.append(reordered)
    # infer, which ended while kubelet was down, taken out of the checkpoint: the outcome is then
    # every Pod's widgets as the exercise's answer has them
    without_ended = copy.deepcopy(case)
    without_ended["given"]["checkpoint"]["Data"]["PodDeviceEntries"] = [
        e for e in case["given"]["checkpoint"]["Data"]["PodDeviceEntries"] if e["PodUID"] != "infer"]
    variants.append(without_ended)
    for variant in variants:
        assert situation(variant) != situation(case) or variant is reordered
        assert restores_exercise(variant, case), variant["id"]
    # another restart: train held one widget; or kubelet's Pod sources not ready (nothing active)
    fewer = copy.deepcopy(case)
    fewer["given"]["checkpoint"]["Data"]["PodDeviceEntries"][0]["DeviceIDs"] = {"0": ["widget-0"]}
    unready = copy.deepcopy(case)
    del unready["given"]["active_pods"]
    assert not restores_exercise(fewer, case) and not restores_exercise(unready, case)


def test_a_pod_admitted_earlier_in_the_case_keeps_its_devices():
    # next, admitted with the last free healthy widget, is active from then on: a Pod admitted
    # after it finds no widget (UpdateAllocatedDevices drops only Pods neither active nor admitted)
    case = load_case(SCENARIO)
    case["steps"].append({"op": "create_pod", "at_s": 6,
                          "pod": {"name": "other", "containers": [{"name": "c", "limits": {WIDGET: 1}}]}})
    assert held(case) == {"train": ["widget-0", "widget-1"], "prep": ["widget-3"], "next": ["widget-2"]}
