"""labkit.resources: the API server's rules for resources, kubelet's conversions, the eviction
message, and a live node on this machine's real cgroups (processes, settings, OOM kill, eviction)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from labkit.errors import ConfigError
from labkit.labs import get_lab
from labkit.resources import eviction, kmsg, kubelet, situations
from labkit.resources.node import Node, NodeConfig, load_pods_strict, quantity_string
from labkit.pods import PodInvalid, pod_from_dict, qos_class, stable_uid
from labkit.state import LabEnv, LabState
from support import wait_until


def make(spec: dict, name: str = "p", classes=None):
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec},
                         priority_classes=classes)


def test_limits_without_requests_become_requests_and_the_pod_guaranteed():
    pod = make({"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}]})
    assert {k: str(v) for k, v in pod.containers[0].requests.items()} == {"cpu": "500m", "memory": "64Mi"}
    assert qos_class(pod) == "Guaranteed"
    assert pod.manifest["status"]["qosClass"] == "Guaranteed"
    assert pod.manifest["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "64Mi"}


def test_pod_level_requests_default_from_containers_then_from_pod_limits():
    pod = make({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "200m"}}},
                               {"name": "b", "resources": {"requests": {"cpu": "300m"}}}]})
    assert {k: str(v) for k, v in pod.pod_requests.items()} == {"cpu": "500m", "memory": "1Gi"}
    assert qos_class(pod) == "Burstable"


def test_a_request_above_its_limit_is_refused_with_the_api_servers_message():
    with pytest.raises(PodInvalid) as info:
        make({"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}, "big")
    assert str(info.value) == ('The Pod "big" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
                               'must be less than or equal to cpu limit of 1')


def test_priority_comes_from_the_class_never_from_the_pod():
    assert make({"priorityClassName": "system-node-critical", "containers": [{"name": "c"}]}).priority == 2000001000
    assert make({"priorityClassName": "batch", "containers": [{"name": "c"}]}, classes={"batch": -5}).priority == -5
    with pytest.raises(PodInvalid, match="no PriorityClass with name nope was found"):
        make({"priorityClassName": "nope", "containers": [{"name": "c"}]})
    with pytest.raises(PodInvalid, match=r"the integer value of priority \(7\) must not be provided in pod spec"):
        make({"priority": 7, "containers": [{"name": "c"}]})


def test_malformed_quantity_names_the_field():
    with pytest.raises(ConfigError, match=r"spec.containers\[0\].resources.limits.memory"):
        make({"containers": [{"name": "c", "resources": {"limits": {"memory": "lots"}}}]})


def test_weight_to_request_ranges_invert_the_conversions_exactly():
    seen: dict[int, list[int]] = {}
    for m in range(0, 60000):     # every request up to 60 CPUs, through kubelet's two conversions
        seen.setdefault(kubelet.shares_to_weight(kubelet.milli_cpu_to_shares(m)), []).append(m)
    for weight, millis in seen.items():
        if max(millis) < 59000:   # ranges cut by the end of the loop are not whole
            assert kubelet.weight_to_milli_range(weight) == (min(millis), max(millis)), weight
    for shares in (2, 3, 102, 153, 256, 512, 1024):
        millis = [m for m in range(0, 2000) if kubelet.milli_cpu_to_shares(m) == shares]
        assert kubelet.shares_to_milli_range(shares) == (min(millis), max(millis))


def test_newer_runtimes_map_one_cpu_to_the_v2_default_weight():
    # opencontainers/cgroups ConvertCPUSharesToCgroupV2Value (runc >= 1.3.2), e.g. runc issue 4896's 2000 -> 170
    assert [kubelet.runc_weight_new(s) for s in (2, 1024, 2000, 262144)] == [1, 100, 170, 10000]
    assert kubelet.shares_to_weight(2000) == 77


def test_the_kernels_oom_lines_say_whose_limit_was_hit():
    lines = [
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/labkit-x-resources/n/"
        "kubepods/burstable/podu,task_memcg=/labkit-x-resources/n/kubepods/burstable/podu/c,task=python,pid=42,uid=0",
        "Memory cgroup out of memory: Killed process 42 (python) total-vm:178188kB, anon-rss:163212kB, "
        "file-rss:5476kB, shmem-rss:0kB, UID:0 pgtables:380kB oom_score_adj:954",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/other,"
        "task_memcg=/other,task=java,pid=7,uid=0",
    ]
    kill, = kmsg.oom_kills("labkit-x-resources/", lines=lines)
    assert (kill.task, kill.pid, kill.oom_score_adj, kill.limit_of) == ("python", 42, 954, "pod")


def test_the_kernels_machine_wide_oom_kills_are_kept_too():
    # mem_cgroup_print_oom_context writes ",global_oom" where no cgroup's limit was hit
    lines = [
        "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/labkit-x-"
        "resources/n/kubepods/besteffort/podu/c,task=python,pid=43,uid=0",
        "Out of memory: Killed process 43 (python) total-vm:178188kB, anon-rss:163212kB, file-rss:5476kB, "
        "shmem-rss:0kB, UID:0 pgtables:380kB oom_score_adj:1000",
    ]
    kill, = kmsg.oom_kills("labkit-x-resources/", lines=lines)
    assert (kill.task, kill.pid, kill.oom_score_adj, kill.oom_memcg, kill.limit_of) == ("python", 43, 1000, "", "machine")


def test_byte_counts_print_as_kubelet_prints_quantities():
    assert quantity_string(104857600) == "100Mi"
    assert quantity_string(59875328) == "58472Ki"
    assert quantity_string(1000) == "1k"


# -- a live node ----------------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path):
    lab = get_lab("resources")
    state = LabState(lab.id)
    state.ensure_dir()
    env = LabEnv(lab, state)
    config = NodeConfig("n1", 96 * 2 ** 20, 2000, eviction_hard={"memory.available": "40Mi"})
    the_node = Node(env, config)
    the_node.create()
    try:
        yield the_node
    finally:
        problems = state.ledger.cleanup()
        assert not problems


def apply(node, tmp_path, *pods):
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                         "spec": spec} for name, spec in pods]))
    return node.apply(node.load(path))


def test_a_pod_becomes_cgroups_and_processes_with_kubelets_settings(node, tmp_path):
    apply(node, tmp_path, ("web", {"containers": [{"name": "app", "command": ["sleep", "infinity"], "resources": {
        "requests": {"cpu": "250m", "memory": "16Mi"}, "limits": {"cpu": "500m", "memory": "32Mi"}}}]}))
    record = node.record("web")
    assert record["cgroup"].startswith("n1/kubepods/burstable/pod")
    view, = node.containers(record)
    assert view.state == "running" and view.pids
    settings = node.cgroups.settings(view.cgroup)
    if node.cgroups.version == "v1":
        assert (settings["cpu.shares"], settings["cpu.cfs_quota_us"], settings["cpu.cfs_period_us"],
                settings["memory.limit_in_bytes"]) == (256, 50000, 100000, 32 * 2 ** 20)
    else:
        assert (settings["cpu.weight"], settings["cpu.max"], settings["memory.max"]) == (10, "50000 100000", 32 * 2 ** 20)
    # the process runs inside the container's cgroup in every hierarchy
    own = Path(f"/proc/{view.pids[0]}/cgroup").read_text()
    assert f"/labkit-{node.env.prefix}-resources/{view.cgroup}" in own
    # kubepods/burstable's shares follow the Pod's request (setCPUCgroupConfig)
    burstable = node.cgroups.settings("n1/kubepods/burstable")
    assert burstable.get("cpu.shares", burstable.get("cpu.weight")) == (256 if node.cgroups.version == "v1" else 10)
    node.delete("web")
    assert not node.cgroups.exists(record["cgroup"])


def test_the_kernel_oom_kills_a_container_at_its_limit_and_it_shows_as_oomkilled(node, tmp_path):
    apply(node, tmp_path, ("hog", {"containers": [{"name": "eat", "command": ["workload", "alloc", "--to", "48Mi"],
                                                    "resources": {"limits": {"memory": "24Mi"}}}]}))
    record = node.record("hog")
    assert wait_until(lambda: node.containers(record)[0].reason == "OOMKilled", timeout=10)
    view, = node.containers(record)
    assert view.exit_code == 137 and not view.pids
    # one container: its limit and its Pod's are the same, and the kernel counts the hit where the
    # charge failed (v1 failcnt at the container, v2 memory.events.local "oom" at the Pod here)
    assert node.cgroups.memory(view.cgroup).limit_hit + node.cgroups.memory(record["cgroup"]).limit_hit > 0
    if os.access("/dev/kmsg", os.R_OK):    # the kernel's log says so too
        # one container, so the Pod's limit equals it: the kernel reports whichever counter failed
        assert any(k.task_memcg.endswith(view.cgroup) and k.limit_of in ("container", "pod")
                   for k in kmsg.oom_kills(f"/{view.cgroup}"))


def test_eviction_ranks_and_evicts_with_kubelets_message(node, tmp_path):
    apply(node, tmp_path,
          ("greedy", {"containers": [{"name": "g", "command": ["workload", "alloc", "--to", "56Mi"],
                                      "resources": {"requests": {"memory": "8Mi"}}}]}),
          ("modest", {"containers": [{"name": "m", "command": ["workload", "alloc", "--to", "8Mi"],
                                      "resources": {"requests": {"memory": "32Mi"}}}]}))
    assert wait_until(lambda: node.memory_available()[0] < 40 * 2 ** 20, timeout=10)
    time.sleep(0.2)
    passes = eviction.run(node, max_passes=3)
    first = passes[0]
    assert [c.pod.name for c in first.ranking] == ["greedy", "modest"]
    assert first.evicted == "greedy"
    assert first.message.startswith("The node was low on resource: memory. Threshold quantity: 40Mi, available: ")
    assert "Container g was using " in first.message and "request is 8Mi, has larger consumption of memory. " in first.message
    status = node.record("greedy")["status"]
    assert (status["phase"], status["reason"], status["conditions"][0]["reason"]) == \
        ("Failed", "Evicted", "TerminationByKubelet")
    assert node.record("modest")["status"]["phase"] == "Running"
    assert (node.dir / "eviction.json").exists()


# -- pod-level resources and sidecars (v1.34) -----------------------------------------------------

def test_pod_level_requests_below_the_containers_aggregate_are_refused_as_the_api_server_does(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fry"}, "spec": {
        "resources": {"requests": {"cpu": "1", "memory": "576Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}},
                       {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "2Gi"},
                                                   "limits": {"cpu": "2"}}}]}}))
    with pytest.raises(PodInvalid) as info:
        load_pods_strict(path, "n1")
    # validation.go validatePodResourceConsistency
    assert info.value.problem == (
        'The Pod "fry" is invalid: [spec.resources.requests[cpu]: Invalid value: "1": must be greater than or equal '
        'to aggregate container requests of 1500m, spec.resources.requests[memory]: Invalid value: "576Mi": must be '
        'greater than or equal to aggregate container requests of 6Gi, spec.resources.containers[1][cpu].limits: '
        'Invalid value: "2": must be less than or equal to pod limits of 1]')


def test_the_pod_level_aggregate_counts_an_init_container_with_the_sidecars_before_it(tmp_path):
    spec = {"resources": {"requests": {"memory": "300Mi"}},
            "initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"memory": "100Mi"}}},
                               {"name": "setup", "resources": {"requests": {"memory": "250Mi"}}}],
            "containers": [{"name": "app", "resources": {"requests": {"memory": "100Mi"}}}]}
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}))
    with pytest.raises(PodInvalid, match=r'requests\[memory\]: Invalid value: "300Mi": must be greater than or equal '
                                         r'to aggregate container requests of 350Mi'):
        load_pods_strict(path, "n1")


def test_oom_score_adj_shares_what_the_pod_requests_beyond_the_aggregate_not_the_sum():
    # policy.go GetContainerOOMScoreAdjust + helpers.go remainingPodMemReqPerContainer: 1000Mi pod
    # request, aggregate max(100+200 app, 600 init) = 600Mi, 400Mi left over 3 containers
    pod = make({"resources": {"requests": {"memory": "1000Mi"}},
                "initContainers": [{"name": "init", "resources": {"requests": {"memory": "600Mi"}}}],
                "containers": [{"name": "a", "resources": {"requests": {"memory": "100Mi"}, "limits": {"memory": "1Gi"}}},
                               {"name": "b", "resources": {"requests": {"memory": "200Mi"}}}]})
    capacity = 4000 * 2 ** 20
    share = (1000 - 600) * 2 ** 20 // 3
    for name, own in (("a", 100), ("b", 200), ("init", 600)):
        container = next(c for c in pod.all_containers() if c.name == name)
        expected = 1000 - 1000 * (own * 2 ** 20 + share) // capacity
        assert kubelet.oom_score_adj(pod, container, capacity) == expected, name


def test_a_sidecar_with_limits_before_an_init_container_without_keeps_the_pod_cgroups_limits():
    # AggregateContainerLimits hands ResourceConfigForPod's ContainerFn the init container's limits
    # plus those of the sidecars before it: here 500m / 64Mi, never zero
    limits = {"cpu": "500m", "memory": "64Mi"}
    pod = make({"initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                    "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": limits}},
                                   {"name": "setup"}],
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}, "limits": limits}}]})
    assert qos_class(pod) == "Burstable"
    settings = kubelet.pod_cgroup(pod)
    assert (settings.cpu_quota, settings.cpu_period, settings.memory_limit) == (100000, 100000, 128 * 2 ** 20)
    # without the sidecar before it, the init container's missing limits leave the pod unlimited
    pod = make({"initContainers": [{"name": "setup"}, {"name": "proxy", "restartPolicy": "Always",
                                                       "resources": {"limits": limits}}],
                "containers": [{"name": "app", "resources": {"limits": limits}}]})
    settings = kubelet.pod_cgroup(pod)
    assert (settings.cpu_quota, settings.memory_limit) == (None, None)


def test_a_sidecar_runs_before_the_init_containers_declared_after_it(node, tmp_path):
    sidecar_cgroup = f"{node.cgroups.unique_dirs('n1/kubepods')[0]}/burstable/pod{stable_uid('default', 'mesh')}/proxy"
    apply(node, tmp_path, ("mesh", {
        "initContainers": [{"name": "proxy", "restartPolicy": "Always", "command": ["sleep", "infinity"],
                            "resources": {"requests": {"memory": "8Mi"}}},
                           # succeeds only while the sidecar declared before it is running
                           {"name": "wait-for-proxy", "command": ["sh", "-c", f"grep -q . {sidecar_cgroup}/cgroup.procs"]}],
        "containers": [{"name": "app", "command": ["sleep", "infinity"]}]}))
    record = node.record("mesh")
    assert record["status"]["phase"] == "Running", record["status"]
    views = {v.name: v for v in node.containers(record)}
    assert views["wait-for-proxy"].state == "completed" and views["wait-for-proxy"].exit_code == 0
    assert views["proxy"].state == "running" and views["app"].state == "running"


# -- swap: kubelet's NoSwap (v1.34 default) -------------------------------------------------------

def test_containers_get_no_swap_where_the_swap_controller_exists(node, tmp_path):
    apply(node, tmp_path, ("capped", {"containers": [
        {"name": "limited", "command": ["sleep", "infinity"], "resources": {"limits": {"memory": "32Mi"}}},
        {"name": "free", "command": ["sleep", "infinity"], "resources": {"requests": {"memory": "8Mi"}}}]}))
    record = node.record("capped")
    limited = node.cgroups.settings(record["containers"]["limited"]["cgroup"])
    free = node.cgroups.settings(record["containers"]["free"]["cgroup"])
    swap_files = {"v1": "memory.memsw.limit_in_bytes", "v2": "memory.swap.max"}[node.cgroups.version]
    controller = (node.cgroups.paths(record["containers"]["limited"]["cgroup"])["memory"] / swap_files).exists()
    if not controller:      # swapControllerAvailable() false: kubelet configures no swap
        assert swap_files not in limited and swap_files not in free
    elif node.cgroups.version == "v1":
        # ConfigureNoSwap: memory+swap limited to the memory limit; without a memory limit, none
        assert limited["memory.memsw.limit_in_bytes"] == 32 * 2 ** 20
        assert free["memory.memsw.limit_in_bytes"] is None
    else:
        assert limited["memory.swap.max"] == 0 and free["memory.swap.max"] == 0


def test_no_swap_is_written_as_runc_writes_it_on_cgroup_v2(tmp_path):
    from labkit.resources.cgroupfs import LabCgroups

    groups = object.__new__(LabCgroups)
    groups.version, groups.roots = "v2", {"cpu": tmp_path, "memory": tmp_path}
    container = tmp_path / "n1" / "c"
    container.mkdir(parents=True)
    for name, text in (("cpu.weight", "100"), ("cpu.max", "max 100000"), ("memory.max", "max"),
                       ("memory.swap.max", "max")):
        (container / name).write_text(text)
    pod = make({"containers": [{"name": "c", "resources": {"limits": {"memory": "32Mi"}}}]})
    groups.apply("n1/c", kubelet.container_cgroup(pod, pod.containers[0]), oom_group=True)
    assert (container / "memory.swap.max").read_text() == "0"
    assert (container / "memory.max").read_text() == str(32 * 2 ** 20)
    assert groups.settings("n1/c")["memory.swap.max"] == 0
    # a kernel without the swap controller has no memory.swap.max: nothing is written
    (container / "memory.swap.max").unlink()
    groups.apply("n1/c", kubelet.container_cgroup(pod, pod.containers[0]))
    assert not (container / "memory.swap.max").exists() and "memory.swap.max" not in groups.settings("n1/c")


def test_the_doctor_says_what_swap_does_to_the_resources_lab(tmp_path, monkeypatch):
    from labkit import doctor

    swaps = tmp_path / "swaps"
    monkeypatch.setattr(doctor, "SWAPS", str(swaps))
    memory = ("v1", tmp_path / "memory")
    memory[1].mkdir()
    swaps.write_text("Filename\tType\tSize\tUsed\tPriority\n")
    assert doctor._swap_note(memory) == (False, "no swap active: a container at its memory limit is OOM-killed once "
                                                "the kernel cannot reclaim its cache")
    swaps.write_text("Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048572 0 -2\n")
    warn, detail = doctor._swap_note(memory)       # no memory.memsw.* files: no swap controller
    assert warn and "cannot keep containers out of swap" in detail and "oom exercise may find no kill" in detail
    (memory[1] / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
    warn, detail = doctor._swap_note(memory)
    assert not warn and "keeps containers out of swap" in detail


# -- the eviction manager's memory: unresolved thresholds, MemoryPressure, admission -------------

class FakeNode:
    """What eviction.synchronize reads of a node, with memory.available set by the test."""

    def __init__(self, directory, pods):
        self.dir = directory
        self.name = "n1"
        self.config = NodeConfig("n1", 512 * 2 ** 20, 2000, eviction_hard={"memory.available": "100Mi"},
                                 eviction_minimum_reclaim={"memory.available": "250Mi"})
        self.available = 0
        self.pods = {p.name: p for p in pods}
        self.evicted = []

    def memory_available(self):
        return self.available, self.config.memory_capacity - self.available

    def active(self):
        return [({"name": n}, p) for n, p in self.pods.items() if n not in self.evicted]

    def pod_working_set(self, record):
        return 64 * 2 ** 20

    def container_working_set(self, record, container):
        return 64 * 2 ** 20

    def evict(self, name, message):
        self.evicted.append(name)


def test_evict_withholds_a_ranking_that_places_one_look_alike_beside_another_pod(tmp_path, monkeypatch):
    """Before the eviction-order answer, `labkit resources evict` ranks no Pod shaped as one of
    the exercise's (situations.eviction_shape: its priority and whether it requests memory, what
    rankMemoryPressure reads, whatever the amounts) beside another Pod: one look-alike at a time
    beside a Pod of the student's choice would assemble the order. A look-alike alone on its node,
    and Pods of other shapes, are ranked."""
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from labkit.resources import cli

    classes = {"low-priority": -10, "high-priority": 1000000}
    # crawler with another request (32Mi in the scenario), and two Pods no exercise Pod is shaped as:
    # the exercise's high-priority Pod requests no memory, its low-priority one does
    crawler = make({"priorityClassName": "low-priority",
                    "containers": [{"name": "c", "resources": {"requests": {"memory": "1Mi"}}}]}, "mine", classes)
    yardstick = make({"priorityClassName": "high-priority",
                      "containers": [{"name": "c", "resources": {"requests": {"memory": "8Mi", "cpu": "10m"}}}]},
                     "yardstick", classes)
    other = make({"priorityClassName": "low-priority",
                  "containers": [{"name": "c", "resources": {"requests": {"cpu": "5m"}}}]}, "other", classes)
    lab = get_lab("resources")
    assert situations.eviction_pods_among(lab, [yardstick, other]) == set()
    assert situations.eviction_pods_among(lab, [crawler]) == {"mine"}
    monkeypatch.setattr(cli, "_env", lambda: SimpleNamespace(lab=get_lab("resources")))

    def evict(*pods):
        fake = FakeNode(tmp_path, list(pods))
        fake.available = 400 * 2 ** 20
        monkeypatch.setattr(cli, "node", lambda env, name: fake)
        return CliRunner().invoke(cli.app, ["evict", "--node", "n1"])
    refused = evict(crawler, yardstick)
    assert refused.exit_code != 0 and "withheld: exercise eviction-order" in str(refused.exception), refused.output
    assert "mine" in str(refused.exception)
    for shown in (evict(crawler), evict(yardstick, other)):
        assert shown.exit_code == 0 and "no threshold met" in shown.output, (shown.output, shown.exception)


def test_a_threshold_stays_met_until_the_minimum_reclaim_from_one_evict_run_to_the_next(tmp_path):
    pods = [make({"containers": [{"name": "c"}]}, name) for name in ("a", "b", "c")]
    fake = FakeNode(tmp_path, pods)
    fake.available = 90 * 2 ** 20                  # below the 100Mi threshold: evict one
    assert eviction.synchronize(fake).evicted == "a"
    fake.available = 200 * 2 ** 20                 # above the threshold, short of 100Mi + 250Mi
    second = eviction.synchronize(fake)            # a later `labkit resources evict` run
    assert second.evicted == "b"
    fake.available = 400 * 2 ** 20                 # resolved
    assert eviction.synchronize(fake).evicted is None
    assert eviction.synchronize(fake).evicted is None and fake.evicted == ["a", "b"]


def test_under_memory_pressure_kubelet_rejects_besteffort_pods(node, tmp_path):
    from labkit.resources import pressure

    assert pressure.condition(node.dir)["status"] == "False"
    pressure.observe(node.dir, available=10 * 2 ** 20, threshold=40 * 2 ** 20, min_reclaim=0)
    assert pressure.condition(node.dir) == {"type": "MemoryPressure", "status": "True",
                                            "reason": "KubeletHasInsufficientMemory",
                                            "message": "kubelet has insufficient memory available"}
    outcome = dict(apply(node, tmp_path,
                         ("idle", {"containers": [{"name": "c", "command": ["sleep", "infinity"]}]}),
                         ("modest", {"containers": [{"name": "c", "command": ["sleep", "infinity"],
                                                     "resources": {"requests": {"memory": "8Mi"}}}]}),
                         ("tolerant", {"tolerations": [{"key": "node.kubernetes.io/memory-pressure",
                                                        "operator": "Exists", "effect": "NoSchedule"}],
                                       "containers": [{"name": "c", "command": ["sleep", "infinity"]}]})))
    assert outcome["idle"] == "rejected: Evicted: The node had condition: [MemoryPressure]. "
    status = node.record("idle")["status"]
    assert (status["phase"], status["reason"], status["message"]) == \
        ("Failed", "Evicted", "The node had condition: [MemoryPressure]. ")
    assert outcome["modest"].startswith("running") and outcome["tolerant"].startswith("running")
    # the condition lasts evictionPressureTransitionPeriod (5m) after it was last observed
    later = pressure.load(node.dir)["pressure_last_observed"] + pressure.PRESSURE_TRANSITION_PERIOD
    assert pressure.memory_pressure(node.dir, now=later - 1) and not pressure.memory_pressure(node.dir, now=later)


def test_convert_shows_the_open_range_at_the_top_and_refuses_shares_kubelet_never_writes():
    from typer.testing import CliRunner

    from labkit.resources.cli import app

    runner = CliRunner()
    top = runner.invoke(app, ["convert", "--shares", "262144"])
    assert "cpu.shares 262144 <- cpu requests 256000m and above" in top.output, top.output
    assert "cpu requests 256000m and above" in runner.invoke(app, ["convert", "--weight", "10000"]).output
    assert "cpu requests 98m..98m" in runner.invoke(app, ["convert", "--shares", "100"]).output
    refused = runner.invoke(app, ["convert", "--shares", "300000"])
    assert refused.exit_code != 0 and "outside 2..262144" in str(refused.exception) + refused.output


def test_convert_forward_withholds_the_requests_that_give_the_weight_pods_value_until_an_answer_is_recorded():
    """`convert --cpu` over the requests around the weight Pod's would find its range one request
    at a time: those that land on its value, or on a weight next to it, are withheld until the
    answer is written, and the first one shown afterwards keeps the answer as it was then."""
    import os
    from pathlib import Path

    from typer.testing import CliRunner

    from labkit import predictions
    from labkit.resources.cli import app

    runner = CliRunner()
    shares, weight = situations_weight()
    lands = [m for m in range(1, 2000) if kubelet.shares_to_weight(kubelet.milli_cpu_to_shares(m)) == weight]
    for milli in (lands[0], lands[-1], 250):
        withheld = runner.invoke(app, ["convert", "--cpu", f"{milli}m"])
        assert withheld.exit_code != 0 and "withheld: exercise weight of lab resources" in str(withheld.exception), \
            withheld.output
        assert "cpu.weight" not in withheld.output
    # the requests next to them are withheld too: the edges of the refusals are not the answer's
    for milli in (lands[0] - 1, lands[-1] + 1):
        assert "withheld: exercise weight" in str(runner.invoke(app, ["convert", "--cpu", f"{milli}m"]).exception)
    below = [m for m in range(1, 2000) if kubelet.shares_to_weight(kubelet.milli_cpu_to_shares(m)) == weight - 1]
    above = [m for m in range(1, 2000) if kubelet.shares_to_weight(kubelet.milli_cpu_to_shares(m)) == weight + 1]
    for milli in (below[0] - 1, above[-1] + 1):
        shown = runner.invoke(app, ["convert", "--cpu", f"{milli}m"])
        assert shown.exit_code == 0 and "cpu.weight" in shown.output and f"cpu.weight {weight} " not in shown.output
    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "weight.yaml").write_text("cgroup_value: 10\nmin_millicores: 240\nmax_millicores: 260\n")
    shown = runner.invoke(app, ["convert", "--cpu", "250m"])
    assert f"cpu.shares {shares} -> cpu.weight {weight} " in shown.output, shown.output
    assert predictions.kept("resources", "weight").text == "cgroup_value: 10\nmin_millicores: 240\nmax_millicores: 260\n"


def test_plan_uses_the_memory_capacity_of_the_node_the_pod_names():
    from typer.testing import CliRunner

    from labkit.resources.cli import app

    import json as _json
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pod.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"}, "spec": {
            "nodeName": "node-2", "containers": [{"name": "c", "resources": {"requests": {"memory": "32Mi"}}}]}}))
        planned = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json"])
        out, = _json.loads(planned.output)
        # node-2 has 320Mi: 1000 - 1000 * 32Mi / 320Mi = 900 (with 2Gi it would be 985)
        assert (out["node"], out["memory_capacity"], out["containers"]["c"]["oom_score_adj"]) == \
            ("node-2", 320 * 2 ** 20, 900)
        given = CliRunner().invoke(app, ["plan", "-f", str(path), "-o", "json", "--memory-capacity", "2Gi"])
        assert _json.loads(given.output)[0]["containers"]["c"]["oom_score_adj"] == 985


def test_apply_reads_every_document_and_reports_each_refused_one(tmp_path):
    from labkit.resources.node import load_documents

    docs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": request}, "limits": {"cpu": "1"}}}]}}
            for name, request in (("first", "2"), ("good", "500m"), ("third", "3"))]
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    errors = []
    pods = load_documents(path, "node-1", {}, errors)
    assert [p.name for p in pods] == ["good"]
    assert len(errors) == 2 and 'The Pod "first" is invalid' in errors[0] and 'The Pod "third" is invalid' in errors[1]


def test_delete_finds_the_pod_on_the_node_it_is_on(monkeypatch):
    from typer.testing import CliRunner

    from labkit.resources import cli

    class Held:
        def __init__(self, name, pods):
            self.name, self.pods, self.deleted = name, pods, []

        def record(self, pod):
            return {"name": pod} if pod in self.pods else None

        def records(self):      # a deferred resize is tried again after a delete: none here
            return []

        def delete(self, pod):
            if pod not in self.pods:
                raise cli.LabkitError(f'pods "{pod}" not found on {self.name}')
            self.deleted.append(pod)

    held = {"node-1": Held("node-1", ["web"]), "node-2": Held("node-2", ["cache"]), "node-3": Held("node-3", [])}
    monkeypatch.setattr(cli, "_env", lambda: None)
    monkeypatch.setattr(cli, "nodes", lambda env: held)
    result = CliRunner().invoke(cli.app, ["delete", "cache"])
    assert result.exit_code == 0 and held["node-2"].deleted == ["cache"], result.output
    assert 'pod "cache" deleted' in result.output


def test_plan_withholds_the_qos_pods_whatever_their_names_and_workloads(tmp_path):
    """A copy of the qos exercise's Pods with every Pod and container renamed and other commands
    is classified and scored as the originals are, and so is one with other amounts of the same
    requests and limits (whichever class they give): `plan` withholds them until the qos answer is
    written, and still shows a Pod that requests or limits other resources."""
    from typer.testing import CliRunner

    from labkit.resources.cli import app

    docs = [d for d in yaml.safe_load_all(Path("labs/resources/scenarios/node-1.yaml").read_text()) if d]
    qos = [d for d in docs if d["metadata"]["name"] in ("web", "queue", "batch", "api", "migrate")]
    for d in qos:
        d["metadata"]["name"] += "-copy"
        for c in d["spec"].get("initContainers", []) + d["spec"]["containers"]:
            c["name"] += "-x"
            c["command"] = ["sleep", "3600"]
    other = yaml.safe_load("apiVersion: v1\nkind: Pod\nmetadata: {name: other}\nspec:\n  containers:\n"
                           "    - name: c\n      resources: {limits: {memory: 257Mi}}\n")
    # the qos Pods with other amounts: queue's limits changed (still Guaranteed), web's request
    # raised to its limit (Guaranteed where web is Burstable), migrate's app one MiB more
    amounts = yaml.safe_load_all(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: queue-amounts}\nspec:\n  containers:\n"
        "    - name: c\n      resources: {limits: {cpu: 100m, memory: 257Mi}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web-amounts}\nspec:\n  containers:\n"
        "    - name: c\n      resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {cpu: 500m, memory: 256Mi}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: migrate-amounts}\nspec:\n  initContainers: [{name: i}]\n"
        "  containers:\n    - name: c\n      resources: {limits: {cpu: 100m, memory: 65Mi}}\n")
    (tmp_path / "copy.yaml").write_text(yaml.safe_dump_all(qos + list(amounts) + [other]))
    planned = CliRunner().invoke(app, ["plan", "-f", str(tmp_path / "copy.yaml")])
    assert "withheld: exercise qos" in planned.output, planned.output
    shown = {line.split()[0] for line in planned.output.splitlines() if line.startswith("pod/")}
    assert shown == {"pod/other"}, planned.output


def test_plan_withholds_requests_that_land_on_the_weight_pods_value():
    """`plan` converts a Pod's requests forward as `convert --cpu` does: a Pod whose pod cgroup gets
    the weight Pod's cpu.shares or cpu.weight, or a weight next to it, is withheld until the weight
    answer is written; the weight Pod itself shows the value the exercise asks to read."""
    import tempfile

    from typer.testing import CliRunner

    from labkit.resources.cli import app

    _shares, weight = situations_weight()

    def giving(w):
        return [m for m in range(1, 2000) if kubelet.shares_to_weight(kubelet.milli_cpu_to_shares(m)) == w]
    lands = giving(weight)
    # the weights next to it are withheld too: else the edges of the refusals were the answer
    below, above = giving(weight - 1), giving(weight + 1)
    pods = [f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p{m}}}\nspec:\n  containers:\n    - name: c\n"
            f"      resources: {{requests: {{cpu: {m}m}}}}\n"
            for m in (below[0] - 1, below[0], lands[0] - 1, lands[0], 250, lands[-1], lands[-1] + 1, above[-1],
                      above[-1] + 1)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write("---\n".join(pods))
        f.flush()
        planned = CliRunner().invoke(app, ["plan", "-f", f.name])
    assert "withheld: exercise weight" in planned.output, planned.output
    shown = {line.split()[0] for line in planned.output.splitlines() if line.startswith("pod/")}
    assert shown == {f"pod/p{below[0] - 1}", f"pod/p{above[-1] + 1}"}, planned.output
    # convert likewise: forward, one millicore at a time, the refusals do not end at the answer's edges
    for m in (lands[0] - 1, lands[0], lands[-1], lands[-1] + 1):
        assert "withheld: exercise weight" in str(CliRunner().invoke(app, ["convert", "--cpu", f"{m}m"]).exception)
    for w in (weight - 1, weight + 1):
        assert "withheld: exercise weight" in str(CliRunner().invoke(app, ["convert", "--weight", str(w)]).exception)
    assert "cpu.weight" in CliRunner().invoke(app, ["convert", "--weight", str(weight + 2)]).output
    mystery = CliRunner().invoke(app, ["plan", "-f", "labs/resources/scenarios/node-1.yaml"])
    assert "pod/mystery" in mystery.output and "exercise weight" not in mystery.output
    # a container whose own request lands there shows the conversion in its container cgroup,
    # though the Pod as a whole requests more
    inside = (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: inside}}\nspec:\n  containers:\n"
              f"    - name: worker\n      resources: {{requests: {{cpu: {lands[0]}m}}}}\n"
              f"    - name: helper\n      resources: {{requests: {{cpu: 100m}}}}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(inside)
        f.flush()
        planned = CliRunner().invoke(app, ["plan", "-f", f.name])
    assert "withheld: exercise weight" in planned.output and "pod/inside" not in planned.output, planned.output


def situations_weight():
    return situations.weight_values(get_lab("resources"))


def test_a_half_written_prediction_is_not_kept_and_the_tools_say_what_it_lacks(tmp_path, monkeypatch):
    """A tool keeps the answer as it is when it first shows the outcome: an answer file that its
    check could only refuse (a Pod, a key or a value missing) is not yet a prediction. `plan`,
    `evict` and `convert` go on withholding, say what is missing (never what is right) and keep
    nothing; once the answer is whole, they show the outcome and keep it."""
    import os
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from labkit import predictions
    from labkit.resources import cli

    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    answers.mkdir(parents=True, exist_ok=True)
    runner = CliRunner()
    scenario = "labs/resources/scenarios/node-1.yaml"

    whole_qos = ("qos: {web: Burstable, queue: Burstable, batch: Burstable, api: Burstable, migrate: Burstable}\n"
                 "oom_score_adj: {web/app: 1, queue/broker: 1, batch/job: 1, api/server: 1, api/log-shipper: 1, "
                 "migrate/app: 1}\n")
    for half, lacks in (("qos: {web: Burstable}\n", "it has no mapping oom_score_adj"),
                        (whole_qos.replace(", migrate: Burstable", ""), "qos of migrate is missing"),
                        (whole_qos.replace("api/log-shipper: 1, ", ""), "oom_score_adj of api/log-shipper is missing"),
                        (whole_qos.replace("queue/broker: 1", "queue/broker: high"), "queue/broker is missing or not"),
                        (whole_qos.replace("Burstable}", "burstable}"), "qos of migrate is missing or not one of"),
                        (whole_qos.replace("migrate/app: 1}", "migrate/app: 1, migrate/schema: 1}"),
                         "oom_score_adj names migrate/schema"),
                        ("qos: [web]\n", "it has no mapping qos")):
        (answers / "qos.yaml").write_text(half)
        planned = runner.invoke(cli.app, ["plan", "-f", scenario])
        assert "withheld: exercise qos" in planned.output and "not a whole prediction yet" in planned.output, planned.output
        assert lacks in planned.output, (half, planned.output)
        assert "pod/batch (" not in planned.output and predictions.kept("resources", "qos") is None
    (answers / "qos.yaml").write_text(whole_qos)
    planned = runner.invoke(cli.app, ["plan", "-f", scenario])
    assert "pod/batch (" in planned.output and "withheld: exercise qos" not in planned.output, planned.output
    assert predictions.kept("resources", "qos").text == whole_qos

    for half in ("order: [crawler, analytics, logs, reports]\n", "order: crawler\n",
                 "order: [crawler, analytics, logs, reports, payments, checkout, crawler]\n",
                 "order: [crawler, analytics, logs, reports, payments, Checkout]\n"):
        (answers / "eviction-order.yaml").write_text(half)
        monkeypatch.setattr(cli, "_env", lambda: SimpleNamespace(lab=get_lab("resources")))
        docs = [d for d in yaml.safe_load_all(Path("labs/resources/scenarios/pressure.yaml").read_text()) if d]
        classes = {"low-priority": -10, "high-priority": 1000000}
        fake = FakeNode(tmp_path, [pod_from_dict(d, priority_classes=classes) for d in docs])
        fake.available = 400 * 2 ** 20
        monkeypatch.setattr(cli, "node", lambda env, name: fake)
        refused = runner.invoke(cli.app, ["evict", "--node", "node-3"])
        assert refused.exit_code != 0 and "withheld: exercise eviction-order" in str(refused.exception), refused.output
        assert "order must list each of the 6 Pods" in str(refused.exception)
        assert predictions.kept("resources", "eviction-order") is None

    for half in ("cgroup_value: 10\nmin_millicores: 240\n", "cgroup_value: 10\nmin_millicores: 240\nmax_millicores: 2.5\n"):
        (answers / "weight.yaml").write_text(half)
        refused = runner.invoke(cli.app, ["convert", "--cpu", "250m"])
        assert "withheld: exercise weight" in str(refused.exception) and "max_millicores is missing" in str(refused.exception)
        assert predictions.kept("resources", "weight") is None


def test_get_withholds_the_cgroup_values_of_pods_whose_requests_land_on_the_weight_pods_value():
    """A Pod applied with a request of one's choosing, and `get` read back, converts forward as
    `convert --cpu` does, one request at a time: a Pod's cgroup with the weight Pod's cpu.shares or
    cpu.weight, or a weight next to it, shows neither until the weight answer is written. The weight
    Pod's own pod cgroup shows its value (the exercise asks to read it); other values show."""
    import os
    from types import SimpleNamespace

    from labkit import predictions
    from labkit.resources import cli

    lab = get_lab("resources")
    env = SimpleNamespace(lab=lab)
    shares, weight = situations_weight()
    own = lab.exercise("weight").params

    def row(name, node, pod_shares, container_shares):
        return {"name": name, "node": node, "cgroup_settings": {"cpu.shares": pod_shares, "cpu.cfs_quota_us": -1},
                "containers": [{"name": "c", "cgroup_settings": {"cpu.shares": container_shares}}]}
    probe, near, far = row("probe", "node-3", shares, shares), row("near", "node-3", 2, shares + 1), \
        row("far", "node-3", 4 * shares, 4 * shares)
    mystery = row(own["pod"], own["node"], shares, 2)
    v2 = {"name": "v2", "node": "node-3", "cgroup_settings": {"cpu.weight": weight}, "containers": []}
    note = cli._withhold_weight(env, [probe, near, far, mystery, v2])
    assert "withheld: exercise weight" in note and "near, probe, v2" in note, note
    assert probe["cgroup_settings"]["cpu.shares"] == cli.WITHHELD and probe["containers"][0]["cgroup_settings"][
        "cpu.shares"] == cli.WITHHELD
    assert near["cgroup_settings"]["cpu.shares"] == 2 and near["containers"][0]["cgroup_settings"]["cpu.shares"] == cli.WITHHELD
    assert v2["cgroup_settings"]["cpu.weight"] == cli.WITHHELD
    assert far["cgroup_settings"]["cpu.shares"] == 4 * shares and mystery["cgroup_settings"]["cpu.shares"] == shares
    assert predictions.kept("resources", "weight") is None
    # the weight Pod resized in place to a request next to its own (a newcomer's 151m, then 149m,
    # read back with `get`, then put back): its pod cgroup showed those values, and the answer
    # written from them passed
    for resized in (shares + 1, shares - 2):
        mystery = row(own["pod"], own["node"], resized, 2)
        note = cli._withhold_weight(env, [mystery])
        assert mystery["cgroup_settings"]["cpu.shares"] == cli.WITHHELD and own["pod"] in note, note
    assert predictions.kept("resources", "weight") is None

    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "weight.yaml").write_text("cgroup_value: 1\nmin_millicores: 1\nmax_millicores: 2\n")
    probe = row("probe", "node-3", shares, shares)
    assert cli._withhold_weight(env, [probe]) == "" and probe["cgroup_settings"]["cpu.shares"] == shares
    assert predictions.kept("resources", "weight").tool == "labkit resources get"


def test_another_labs_tool_withholds_the_qos_class_of_a_pod_shaped_as_one_of_the_qos_exercise(tmp_path):
    """`labkit numa admit -f scenarios/node-1.yaml` printed every qos Pod's class (web (Burstable),
    queue (Guaranteed), ...) with no qos answer written; `labkit numa run` would run them in the
    cgroups their classes name. Both ask labkit.resources.situations.qos_gate while the resources
    lab was started."""
    import os

    from labkit import paths, predictions
    from labkit.resources.situations import qos_gate, qos_pods

    from tests.support import labkit

    lab = get_lab("resources")
    web = qos_pods(lab)["web"]
    assert qos_gate("labkit numa admit")(web) is None            # the resources lab never started here
    (paths.state_root() / "resources").mkdir(parents=True, exist_ok=True)
    told = qos_gate("labkit numa admit")(web)
    assert told and "withheld: exercise qos of lab resources" in told and "Burstable" not in told, told
    shown = labkit("numa", "admit", "-f", str(lab.directory / "scenarios" / "node-1.yaml"), "--machine",
                   "single-socket-ht", check=0).stdout
    assert "default/web: the QoS class of Pod web" in shown and "Guaranteed" not in shown, shown
    assert predictions.kept("resources", "qos") is None
    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "resources"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "qos.yaml").write_text(
        "qos: {web: Burstable, queue: Burstable, batch: BestEffort, api: Burstable, migrate: Burstable}\n"
        "oom_score_adj: {web/app: 1, queue/broker: 1, batch/job: 1, api/server: 1, api/log-shipper: 1, "
        "migrate/app: 1}\n")
    assert qos_gate("labkit numa admit")(web) is None
    assert predictions.kept("resources", "qos").tool == "labkit numa admit"


@pytest.mark.parametrize("text,problem", [
    ("cgroup_value: 256\nmin_millicores: 250m\nmax_millicores: '250m'\n", None),
    ("cgroup_value: 256\nmin_millicores: 250\nmax_millicores: 250\n", None),
    ("cgroup_value: 256\nmin_millicores: 0.25\nmax_millicores: 250\n", "min_millicores is missing or not a number"),
    ("cgroup_value: 256m\nmin_millicores: 250\nmax_millicores: 250\n", "cgroup_value is missing or not a whole"),
])
def test_a_weight_answer_in_millicores_as_a_pod_writes_them_is_a_whole_prediction(text, problem):
    # the answer file may give the requests as 250 or 250m (the check reads both); written as 250m,
    # `convert` said it was "not a whole prediction yet (min_millicores is missing or not a whole
    # number)" and kept withholding
    found = situations.prediction_problem(get_lab("resources"), "weight", text)
    assert (found is None) if problem is None else (found is not None and found.startswith(problem)), found
