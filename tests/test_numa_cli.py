"""`labkit numa admit | merge | take` through the real CLI."""

from __future__ import annotations

import json

import yaml
from support import labkit

KUBELET = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
           "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,8", "topologyManagerPolicy": "single-numa-node",
           "memoryManagerPolicy": "Static", "systemReserved": {"memory": "924Mi"},
           "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}
PODS = [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
     "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "2", "memory": "1Gi", "example.com/gpu": "1"}}}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two-gpus"},
     "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "2", "memory": "1Gi", "example.com/gpu": "2"}}}]}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "batch"},
     "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]}},
]


def write(tmp_path):
    (tmp_path / "kubelet.yaml").write_text(yaml.safe_dump(KUBELET))
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(PODS))
    return str(tmp_path / "pods.yaml"), str(tmp_path / "kubelet.yaml")


def test_admit_json_then_again_from_the_checkpoints(tmp_path):
    pods, cfg = write(tmp_path)
    args = ["numa", "admit", "-f", pods, "--machine", "lab-two-node", "--config", cfg, "--state", str(tmp_path / "state")]
    out = json.loads(labkit(*args, "-o", "json", check=0).stdout)
    web, two, batch = out["pods"]
    assert (web["qos"], web["admitted"], web["containers"][0]["cpus"], web["containers"][0]["memory_nodes"]) == \
           ("Guaranteed", True, [1, 9], [0])
    assert web["containers"][0]["best_hint"] == {"mask": [0], "preferred": True}
    assert web["containers"][0]["hints"]["example.com/gpu"] == [{"mask": [0], "preferred": True},
                                                               {"mask": [1], "preferred": True},
                                                               {"mask": [0, 1], "preferred": False}]
    assert (two["admitted"], two["reason"]) == (False, "TopologyAffinityError")
    assert (batch["qos"], batch["containers"][0]["exclusive"]) == ("Burstable", False)
    assert out["reserved_cpus"] == [0, 8] and batch["containers"][0]["cpus"] == out["shared_pool"]
    state = json.loads((tmp_path / "state" / "cpu_manager_state").read_text())
    assert state["entries"] == {web["uid"]: {"app": "1,9"}}
    # a second run starts from the checkpoint: the first Pod keeps its CPUs
    text = labkit(*args, check=0).stdout
    assert "default/web (Guaranteed): admitted" in text and "cpus: 1,9 (exclusive); memory NUMA nodes: 0" in text
    assert "default/two-gpus (Guaranteed): rejected: TopologyAffinityError" in text


def test_admit_refuses_a_corrupted_checkpoint_in_one_line(tmp_path):
    pods, cfg = write(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "cpu_manager_state").write_text('{"policyName":"static","defaultCpuSet":"0-15","checksum":1}')
    result = labkit("numa", "admit", "-f", pods, "--machine", "lab-two-node", "--config", cfg, "--state", str(state), check=2)
    assert result.stderr.count("\n") == 1 and "checkpoint is corrupted" in result.stderr and "Traceback" not in result.stderr


def test_admit_reports_a_bad_machine_file_with_file_and_field(tmp_path):
    machine = tmp_path / "m.json"
    machine.write_text(json.dumps({"num_cores": 2, "num_sockets": 1, "topology": []}))
    pods, cfg = write(tmp_path)
    result = labkit("numa", "admit", "-f", pods, "--machine", str(machine), check=2)
    assert result.stderr.strip() == f"labkit: {machine}: topology: expected a non-empty list of NUMA nodes"


def test_merge_json_and_explained(tmp_path):
    hints = tmp_path / "hints.json"
    hints.write_text(json.dumps({
        "numaNodes": [0, 1], "policy": "restricted",
        "providers": [{"cpu": [{"mask": [0], "preferred": True}, {"mask": [1], "preferred": True},
                               {"mask": [0, 1], "preferred": False}]},
                      {"example.com/gpu": [{"mask": [0, 1], "preferred": True}]}, None, {"memory": None}]}))
    out = json.loads(labkit("numa", "merge", "-f", str(hints), "-o", "json", check=0).stdout)
    assert out == {"hint": {"mask": [0, 1], "preferred": False}, "admit": False}
    text = labkit("numa", "merge", "-f", str(hints), check=0).stdout
    assert "policy restricted: best hint {0,1}; reject (TopologyAffinityError)" in text
    assert "cross product: 3 permutation(s)" in text and "BestNonPreferredAffinityCount = 2" in text


def test_merge_input_errors_name_the_field(tmp_path):
    hints = tmp_path / "hints.json"
    hints.write_text(json.dumps({"numaNodes": [0, 1], "providers": [{"cpu": [{"mask": "0"}]}]}))
    result = labkit("numa", "merge", "-f", str(hints), check=2)
    assert result.stderr.startswith(f"labkit: {hints}: providers[0].cpu[0]: expected")
    hints.write_text(json.dumps({"numaNodes": [0, 1], "policyOptions": {"prefer-closest-numa-nodes": "true"}, "providers": []}))
    assert "distances" in labkit("numa", "merge", "-f", str(hints), check=2).stderr


def test_take_packed_distributed_and_errors():
    assert labkit("numa", "take", "--machine", "single-socket-ht", "--available", "1,3,5,6,7", "--count", "1",
                  check=0).stdout.strip() == "6"
    out = json.loads(labkit("numa", "take", "--machine", "dual-socket-multi-numa-ht", "--count", "26", "--distribute",
                            "-o", "json", check=0).stdout)
    assert out["cpuset"] == "0-6,10-16,40-45,50-55" and out["error"] is None
    failed = labkit("numa", "take", "--machine", "single-socket-ht", "--available", "0,2,4,6", "--count", "5", check=1)
    assert failed.stdout.strip() == "error: not enough cpus available to satisfy request: requested=5, available=4"


def test_admit_running_releases_drained_pods_and_take_and_merge_follow_kubelet(tmp_path):
    pods, cfg = write(tmp_path)
    state = str(tmp_path / "state")
    labkit("numa", "admit", "-f", pods, "--machine", "lab-two-node", "--config", cfg, "--state", state, check=0)
    (tmp_path / "probe.yaml").write_text(yaml.safe_dump(PODS[0] | {"metadata": {"name": "probe"}}))
    (tmp_path / "drained.yaml").write_text("# no Pod is bound to the node any more\n")
    args = ["numa", "admit", "-f", str(tmp_path / "probe.yaml"), "--machine", "lab-two-node", "--config", cfg,
            "--state", state]
    kept = json.loads(labkit(*args, "-o", "json", check=0).stdout)
    assert kept["released_pods"] == []                   # without --running every Pod still counts
    drained = labkit(*args, "--running", str(tmp_path / "drained.yaml"), check=0).stdout
    assert "removeStaleState: released what the checkpoints held for 1 Pod(s)" in drained   # web; the others held nothing
    memory = json.loads((tmp_path / "state" / "memory_manager_state").read_text())
    assert len(memory["entries"]) == 1                   # only the probe's memory is held now
    assert "--running goes with --state" in labkit("numa", "admit", "-f", pods, "--machine", "lab-two-node",
                                                   "--running", pods, check=2).stderr
    # take: the topology hint's NUMA node first (allocateCPUs), as the static-cpus exercise needs
    hinted = labkit("numa", "take", "--machine", "dual-socket-ht", "--available", "1-11", "--count", "2", "--hint", "1")
    assert hinted.stdout.strip() == "1,7"
    unhinted = labkit("numa", "take", "--machine", "dual-socket-ht", "--available", "1-11", "--count", "2")
    assert unhinted.stdout.strip() == "2,8"
    assert "do not exist" in labkit("numa", "take", "--machine", "dual-socket-ht", "--count", "1", "--hint", "7", check=2).stderr
    # merge --policy overrides the file's policy
    hints = str(tmp_path / "hints.json")
    (tmp_path / "hints.json").write_text(json.dumps({"numaNodes": [0, 1], "policy": "best-effort", "providers": [
        {"cpu": [{"mask": [0, 1], "preferred": False}]}]}))
    assert json.loads(labkit("numa", "merge", "-f", hints, "-o", "json", check=0).stdout)["admit"] is True
    assert json.loads(labkit("numa", "merge", "-f", hints, "--policy", "restricted", "-o", "json", check=0).stdout)["admit"] is False
    assert "expected one of" in labkit("numa", "merge", "-f", hints, "--policy", "strict", check=2).stderr


def test_admit_refuses_unknown_and_duplicate_fields_in_kubectls_words(tmp_path):
    """A misspelt `limit:` would otherwise be dropped and the Pod judged BestEffort for no reason the
    student can see: kube-apiserver v1.34 under kubectl's default fieldValidation=Strict refuses it."""
    _pods, cfg = write(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers:\n    - name: app\n"
                   "      image: x\n      resources:\n        limit: {cpu: \"2\", memory: 1Gi}\n      image: y\n")
    for args in (["numa", "admit", "-f", str(bad), "--machine", "lab-two-node", "--config", cfg],
                 ["numa", "admit", "-f", _pods, "--machine", "lab-two-node", "--config", cfg, "--state",
                  str(tmp_path / "state"), "--running", str(bad)]):
        out = labkit(*args, check=2)
        assert out.stderr.strip() == (
            f'labkit: Error from server (BadRequest): error when creating "{bad}": Pod in version "v1" cannot be '
            'handled as a Pod: strict decoding error: unknown field "spec.containers[0].resources.limit", '
            'duplicate field "spec.containers[0].image"')


def test_tools_withhold_a_prediction_exercises_outcome_until_its_answer_is_checked(tmp_path):
    """While the numa lab runs (status phase up), admit/show/merge/take keep the outcome of the
    exercises' own situations to themselves until the exercise's check has seen a complete answer;
    a renamed copy of an exercise's Pod is still that Pod. Other input is never withheld."""
    import os
    from pathlib import Path

    from labkit.numa import withhold

    lab_state = Path(os.environ["LABKIT_STATE_DIR"]) / "numa"
    lab_state.mkdir(parents=True)
    (lab_state / "status.json").write_text(json.dumps({"phase": "up"}))
    scenarios = "labs/numa/scenarios"
    renamed = [dict(d, metadata={"name": f"mine-{i}"}) for i, d in
               enumerate(yaml.safe_load_all(open(f"{scenarios}/qos-pods.yaml"))) if d]
    (tmp_path / "renamed.yaml").write_text(yaml.safe_dump_all(renamed))
    pods, cfg = write(tmp_path)

    def admit(path):
        return json.loads(labkit("numa", "admit", "-f", path, "--machine", "lab-two-node", "--config", cfg, "-o", "json",
                                 check=0).stdout)

    # a copy with other amounts that do not change the class is the exercise's Pods too
    changed = [yaml.safe_load(yaml.safe_dump(d).replace("256Mi", "300Mi").replace("512Mi", "600Mi")) for d in renamed]
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump_all(changed))
    for path in (f"{scenarios}/qos-pods.yaml", str(tmp_path / "renamed.yaml"), str(tmp_path / "changed.yaml")):
        out = admit(path)
        assert len(out["pods"]) == 6 and all("withheld until you record your answer to exercise qos" in p["withheld"]
                                             for p in out["pods"])
        # hints, CPUs and memory nodes tell Guaranteed from the rest: withheld too, and the pool they leave
        assert not any("admitted" in p or "containers" in p for p in out["pods"]) and "exercise qos" in out["shared_pool"]
        text = labkit("numa", "admit", "-f", path, "--machine", "lab-two-node", "--config", cfg, check=0).stdout
        assert not any(word in text for word in ("Guaranteed", "Burstable", "BestEffort"))
    other = tmp_path / "other.yaml"         # a class no Pod of the exercise has: shown
    other.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "o"}, "spec": {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}))
    assert [p["qos"] for p in admit(str(other))["pods"]] == ["Burstable"]

    class Env:      # what the checks hand to withhold.record once a complete answer was checked
        dir = lab_state
    # the other exercises' Pods are Guaranteed, as qos's web and cache are: withheld until qos is answered
    hints = labkit("numa", "admit", "-f", f"{scenarios}/hints-running.yaml", "--machine", "lab-two-node", "--config",
                   f"{scenarios}/kubelet-config.yaml", check=0).stdout
    assert "exercise qos" in hints and "hints:" not in hints
    shown = labkit("numa", "show", "--machine", "lab-two-node", "-f", f"{scenarios}/qos-pods.yaml", "--config",
                   f"{scenarios}/kubelet-config.yaml", check=0)       # which Pods get NUMA memory: Guaranteed ones
    assert "exercise qos: the picture leaves them out" in shown.stderr and "web" not in shown.stdout
    withhold.record(Env, "qos")
    # cpu-hints: the running Pods and the question in one file, renamed, with memory no CPU decision looks at
    docs = [d for f in ("hints-running.yaml", "hints-pod.yaml") for d in yaml.safe_load_all(open(f"{scenarios}/{f}")) if d]
    docs[-1]["metadata"]["name"] = "zz"
    docs[-1]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "2Gi"
    (tmp_path / "hints.yaml").write_text(yaml.safe_dump_all(docs))
    out = json.loads(labkit("numa", "admit", "-f", str(tmp_path / "hints.yaml"), "--machine", "lab-two-node", "--config",
                            f"{scenarios}/kubelet-config.yaml", "-o", "json", check=0).stdout)
    assert "exercise cpu-hints" in out["pods"][-1]["withheld"] and "withheld" not in out["pods"][0]
    frontend = out["pods"][2]["containers"][0]      # the shared pool it shows would tell what zz took
    assert not frontend["exclusive"] and "exercise cpu-hints" in frontend["cpus"]
    # static-cpus: memory amounts changed (no Memory Manager there)
    static = yaml.safe_dump_all([d for d in yaml.safe_load_all(open(f"{scenarios}/static-pods.yaml")) if d])
    (tmp_path / "static.yaml").write_text(static.replace("memory: 1Gi", "memory: 1025Mi").replace("memory: 2Gi", "memory: 2049Mi"))
    out = json.loads(labkit("numa", "admit", "-f", str(tmp_path / "static.yaml"), "--machine", "dual-socket-ht", "--config",
                            f"{scenarios}/kubelet-static.yaml", "-o", "json", check=0).stdout)
    assert "exercise static-cpus" in out["pods"][0]["withheld"] and "exercise static-cpus" in out["shared_pool"]
    # the reserved CPUs are shown: they are the node as kubelet sets it up with the configuration,
    # before any Pod (what `labkit numa show --config` draws and the exercise's first hint says),
    # not where the Pods land; and they are true: policy_static.go takes them by topology
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    reserved = Node(load_machine("dual-socket-ht"), load_config(Path(f"{scenarios}/kubelet-static.yaml"))).reserved_cpus()
    assert out["reserved_cpus"] == sorted(reserved) == [0]
    text = labkit("numa", "admit", "-f", str(tmp_path / "static.yaml"), "--machine", "dual-socket-ht", "--config",
                  f"{scenarios}/kubelet-static.yaml", check=0).stdout
    [pool] = [line for line in text.splitlines() if line.startswith("shared pool: ")]
    assert pool.startswith("shared pool: withheld until you record your answer to exercise static-cpus")
    assert pool.endswith("; reserved CPUs: 0")
    # merge: the same providers in another order, another description
    feeder = json.load(open(f"{scenarios}/merge-feeder.json"))
    feeder.update(description="mine", providers=feeder["providers"][::-1])
    (tmp_path / "t.json").write_text(json.dumps(feeder))
    merged = json.loads(labkit("numa", "merge", "-f", str(tmp_path / "t.json"), "--policy", "restricted", "-o", "json",
                               check=0).stdout)
    assert list(merged) == ["withheld"]
    shown = labkit("numa", "show", "--machine", "lab-two-node", "-f", f"{scenarios}/memory-pods.yaml", "--config",
                   f"{scenarios}/kubelet-memory.yaml", check=0)
    assert "exercise memory: the picture leaves them out" in shown.stderr and "withheld" in shown.stderr
    assert "orders" not in shown.stdout and "memory: allocatable 5Gi, taken 0, free 5Gi" in shown.stdout
    merged = json.loads(labkit("numa", "merge", "-f", f"{scenarios}/merge-feeder.json", "-o", "json", check=0).stdout)
    assert list(merged) == ["withheld"] and "hints of exercise merge" in merged["withheld"]
    took = labkit("numa", "take", "--machine", "dual-socket-ht", "--count", "2", check=0)
    assert took.stdout.startswith("dual-socket-ht is the machine of exercise static-cpus") and "withheld" in took.stdout
    assert labkit("numa", "take", "--machine", "lab-two-node", "--count", "2", check=0).stdout.strip() == "0,8"

    for exercise in ("merge", "static-cpus", "memory"):
        withhold.record(Env, exercise)
    assert [p["qos"] for p in admit(f"{scenarios}/qos-pods.yaml")["pods"]] == \
           ["Guaranteed", "BestEffort", "Guaranteed", "Burstable", "Burstable", "BestEffort"]
    assert json.loads(labkit("numa", "merge", "-f", f"{scenarios}/merge-feeder.json", "-o", "json", check=0).stdout)["admit"]
    assert labkit("numa", "take", "--machine", "dual-socket-ht", "--count", "2", check=0).stdout.strip()
    shown = labkit("numa", "show", "--machine", "lab-two-node", "-f", f"{scenarios}/memory-pods.yaml",
                   "--config", f"{scenarios}/kubelet-memory.yaml", check=0)
    assert "withheld" not in shown.stderr and "memory: allocatable 5Gi, taken 5Gi, free 0" in shown.stdout
