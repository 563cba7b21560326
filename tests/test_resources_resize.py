"""In-place Pod resize on a live resources-lab node (labkit.resources.resize): the API server's
checks (labkit.apiserver.podresize, the embedded server's too), then kubelet v1.34's handling —
Infeasible and Deferred PodResizePending conditions, cgroups rewritten in place, a RestartContainer
policy restarting the container, a deferred resize done once a Pod leaves — on real cgroups."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from labkit.labs import get_lab
from labkit.pods import PodInvalid
from labkit.resources import resize
from labkit.resources.node import Node, NodeConfig
from labkit.state import LabEnv, LabState

MI = 2 ** 20


@pytest.fixture
def node(tmp_path):
    lab = get_lab("resources")
    state = LabState(lab.id)
    state.ensure_dir()
    env = LabEnv(lab, state)
    the_node = Node(env, NodeConfig("n1", 96 * MI, 2000, eviction_hard={"memory.available": "40Mi"}))
    the_node.create()
    try:
        yield the_node
    finally:
        problems = state.ledger.cleanup()
        assert not problems


def run(node, tmp_path, name, resources, policy=None):
    container = {"name": "app", "command": ["sleep", "infinity"], "resources": resources}
    if policy:
        container["resizePolicy"] = policy
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                    "spec": {"containers": [container]}}))
    node.apply(node.load(path))
    return node.record(name)


def patch(resources: dict) -> str:
    return json.dumps({"spec": {"containers": [{"name": "app", "resources": resources}]}})


def quota_and_limit(node, rel):
    s = node.cgroups.settings(rel)
    if node.cgroups.version == "v1":
        return s["cpu.cfs_quota_us"], s["memory.limit_in_bytes"]
    quota = s["cpu.max"].split()[0]
    return (int(quota) if quota != "max" else -1), s["memory.max"]


def test_a_resize_rewrites_the_cgroups_in_place_and_reports_the_resources(node, tmp_path):
    record = run(node, tmp_path, "web", {"requests": {"cpu": "100m", "memory": "16Mi"},
                                         "limits": {"cpu": "200m", "memory": "32Mi"}})
    original = record
    view, = node.containers(record)
    lines = resize.resize(node, "web", patch({"requests": {"cpu": "150m"}, "limits": {"cpu": "400m",
                                                                                      "memory": "48Mi"}}))
    assert lines[0] == "pod/web patched"
    assert "container app's cgroup updated in place" in lines[-1]
    record = node.record("web")
    after, = node.containers(record)
    assert after.pids == view.pids                      # the same process: no restart
    assert quota_and_limit(node, after.cgroup) == (40000, 48 * MI)
    assert quota_and_limit(node, record["cgroup"]) == (40000, 48 * MI)
    assert record["containers"]["app"]["resources"] == {"requests": {"cpu": "150m", "memory": "16Mi"},
                                                        "limits": {"cpu": "400m", "memory": "48Mi"}}
    assert record["containers"]["app"]["allocatedResources"] == {"cpu": "150m", "memory": "16Mi"}
    assert record["manifest"]["metadata"]["generation"] == 2
    # nothing else of the spec changed (the lab's checks compare it with the scenario's)
    spec, was = copy.deepcopy(record["manifest"]["spec"]), copy.deepcopy(original["manifest"]["spec"])
    spec["containers"][0].pop("resources"), was["containers"][0].pop("resources")
    assert spec == was
    assert "conditions" not in record["status"] and "allocated" not in record
    assert resize.resize(node, "web", patch({"requests": {"cpu": "150m"}})) == ["pod/web patched (no change)"]


def test_the_api_servers_checks_come_first(node, tmp_path):
    run(node, tmp_path, "web", {"requests": {"cpu": "100m", "memory": "16Mi"},
                                "limits": {"cpu": "200m", "memory": "32Mi"}})
    with pytest.raises(PodInvalid) as info:
        resize.resize(node, "web", patch({"limits": {"memory": "24Mi"}}))
    assert str(info.value) == ('The Pod "web" is invalid: spec.containers[0].resources.limits[memory]: Forbidden: '
                               'memory limits cannot be decreased unless resizePolicy is RestartContainer')
    with pytest.raises(PodInvalid, match="Pod QOS Class may not change as a result of resizing"):
        resize.resize(node, "web", patch({"requests": {"cpu": "200m", "memory": "32Mi"}}))
    assert "generation" not in node.record("web")["manifest"]["metadata"]      # nothing stored


def test_a_restart_container_policy_restarts_the_container_with_its_new_limit(node, tmp_path):
    record = run(node, tmp_path, "cache", {"requests": {"memory": "16Mi"}, "limits": {"memory": "32Mi"}},
                 policy=[{"resourceName": "memory", "restartPolicy": "RestartContainer"}])
    before, = node.containers(record)
    lines = resize.resize(node, "cache", patch({"limits": {"memory": "24Mi"}}))
    assert lines[-1] == "n1: container app restarted with its new resources (resizePolicy RestartContainer)"
    record = node.record("cache")
    after, = node.containers(record)
    assert after.state == "running" and after.pids and after.pids != before.pids
    assert quota_and_limit(node, after.cgroup)[1] == 24 * MI
    assert record["containers"]["app"]["restartCount"] == 1


def test_an_infeasible_resize_stays_pending_and_changes_no_cgroup(node, tmp_path):
    record = run(node, tmp_path, "web", {"requests": {"cpu": "100m", "memory": "16Mi"},
                                         "limits": {"cpu": "200m", "memory": "32Mi"}})
    view, = node.containers(record)
    lines = resize.resize(node, "web", patch({"requests": {"memory": "100Mi"}, "limits": {"memory": "128Mi"}}))
    assert lines[-1] == (f"n1: PodResizePending Infeasible: Node didn't have enough capacity: memory, requested: "
                         f"{100 * MI}, capacity: {96 * MI}")
    record = node.record("web")
    condition, = record["status"]["conditions"]
    assert (condition["type"], condition["reason"], condition["observedGeneration"]) == (
        "PodResizePending", "Infeasible", 2)
    assert quota_and_limit(node, view.cgroup) == (20000, 32 * MI)
    assert record["manifest"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "128Mi"


def test_a_deferred_resize_is_done_once_a_pod_leaves_the_node(node, tmp_path):
    # allocatable memory: 96Mi - 40Mi = 56Mi
    run(node, tmp_path, "big", {"requests": {"memory": "32Mi"}})
    record = run(node, tmp_path, "web", {"requests": {"memory": "16Mi"}, "limits": {"memory": "20Mi"}})
    lines = resize.resize(node, "web", patch({"requests": {"memory": "30Mi"}, "limits": {"memory": "40Mi"}}))
    assert lines[-1] == (f"n1: PodResizePending Deferred: Node didn't have enough resource: memory, requested: "
                         f"{30 * MI}, used: {32 * MI}, capacity: {56 * MI}")
    view, = node.containers(record)
    assert quota_and_limit(node, view.cgroup)[1] == 20 * MI
    # the status reports what is allocated and in force, not the spec asked for
    assert resize.container_status(node.record("web"), "app") == {
        "resources": {"requests": {"memory": "16Mi"}, "limits": {"memory": "20Mi"}},
        "allocatedResources": {"memory": "16Mi"}}
    # kubelet counts the Pod at its allocation meanwhile: 16Mi, not 30Mi
    assert [str(p.containers[0].requests["memory"]) for r, p in node.active() if r["name"] == "web"] == ["16Mi"]
    node.delete("big")
    lines = resize.retry_pending(node)
    assert lines[-1] == "n1: container app's cgroup updated in place"
    record = node.record("web")
    assert quota_and_limit(node, view.cgroup)[1] == 40 * MI
    assert "conditions" not in record["status"]


def test_apply_of_changed_resources_points_to_the_resize_subresource(node, tmp_path):
    run(node, tmp_path, "web", {"requests": {"cpu": "100m"}})
    with pytest.raises(PodInvalid) as info:
        run(node, tmp_path, "web", {"requests": {"cpu": "200m"}})
    assert "`labkit resources patch web --subresource resize -p PATCH`" in str(info.value)
    assert Path(node.env.dir).is_dir()
