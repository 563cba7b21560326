"""Near-misses of node-b's repair, judged on node-b's files (observe_checkpoint): the node not
drained, or drained of all but one Pod; the broken checkpoint kept, edited again (every field of it
changed, dropped, the hand edit undone by hand); memory_manager_state changed; node-b's
kubelet-config.yaml, machine.json and probe Pod changed field by field. A checkpoint the kubelet
writes itself on the drained node, and a drained node without memory_manager_state, are proven
equivalent by the reconstruction."""

import json
import tempfile
from pathlib import Path

import yaml

from labkit.mutants import Mutant, tree_edits


def _writer(files: dict):
    def apply(env):
        node_dir = env.dir / "node-b"
        for name, text in files.items():
            path = node_dir / name
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    return apply



def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    lab = ctx.lab.environment_module()
    reference = checks.observe_checkpoint(ctx)
    with tempfile.TemporaryDirectory(prefix="numa-node-b-") as scratch:
        lab.write_node_b(Path(scratch) / "node-b")
        built = {name: (Path(scratch) / "node-b" / name).read_text() for name in checks.NODE_FILES}

    def one(name, change, names=(), equivalent=None, **files):
        observation = {**reference, **{f.replace("__", "/"): v for f, v in files.items()}}
        touched = {f.replace("__", "/"): v for f, v in files.items()}
        return Mutant(name, change, names=names, observation=observation, apply=_writer(touched), equivalent=equivalent)

    pods_key = "pods.yaml"
    broken = built["kubelet/cpu_manager_state"]
    # the drain: not done, or one Pod left bound
    yield one("not-drained", "the Pods stay bound to node-b", names=("must be drained",), **{pods_key: built[pods_key]})
    documents = [d for d in yaml.safe_load_all(built[pods_key]) if d]
    from labkit.numa.admission import Node
    from labkit.numa.config import config_from_dict
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import pod_from_dict, qos_class
    kubelet = Node(load_machine("lab-two-node"), config_from_dict(yaml.safe_load(built["kubelet-config.yaml"]), "c"))
    for doc in documents:
        pod = pod_from_dict(doc, "pods.yaml")
        text = yaml.safe_dump(doc)
        qos = qos_class(pod)
        guaranteed_cpus = any(kubelet.cpu_policy.guaranteed_cpus(pod, c) for c in pod.all_containers())
        if guaranteed_cpus:
            yield one(f"left-bound:{pod.name}", f"Pod {pod.name} stays bound", names=("must be drained", pod.name),
                      **{pods_key: text})
        else:
            yield one(f"left-bound:{pod.name}", f"Pod {pod.name} ({qos}) stays bound", **{pods_key: text},
                      equivalent=f"{pod.name} is {qos}: it holds no exclusive CPUs the deleted checkpoint could "
                                 "lose, and the reconstruction's kubelet starts and admits the probe Pod")
    # the checkpoint: kept broken, or edited by hand field by field
    yield one("checkpoint-kept", "the broken cpu_manager_state left in place", names=("does not start",),
              **{"kubelet__cpu_manager_state": broken})
    data = json.loads(broken)
    for edit in tree_edits(data, alternatives={"checksum": [0, data["checksum"] + 1]}):
        yield one(f"checkpoint:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                  f"cpu_manager_state edited by hand: {edit.describe()}", names=("node-b",),
                  **{"kubelet__cpu_manager_state": json.dumps(edit.value, separators=(",", ":"))})
        if edit.path != "checksum":     # the same hand edit, with the checksum kubelet skips (0)
            unchecked = dict(edit.value, checksum=0)
            yield one(f"checkpoint-unchecked:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                      f"cpu_manager_state edited by hand with checksum 0: {edit.describe()}", names=("node-b",),
                      **{"kubelet__cpu_manager_state": json.dumps(unchecked, separators=(",", ":"))})
    memory = json.loads(built["kubelet/memory_manager_state"])
    for edit in list(tree_edits(memory, alternatives={"checksum": [memory["checksum"] + 1]}))[:12]:
        yield one(f"memory-state:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                  f"memory_manager_state edited by hand: {edit.describe()}", names=("does not start",),
                  **{"kubelet__memory_manager_state": json.dumps(edit.value, separators=(",", ":"))})
    yield one("memory-state-deleted", "memory_manager_state deleted too", **{"kubelet__memory_manager_state": None},
              equivalent="with no Pod bound, the kubelet starts with a fresh memory_manager_state as well "
                         "(the reconstruction admits the probe Pod)")
    # the documented end state: the kubelet wrote a fresh checkpoint after its restart
    with tempfile.TemporaryDirectory(prefix="numa-fresh-") as scratch:
        node = Node(load_machine("lab-two-node"), config_from_dict(yaml.safe_load(built["kubelet-config.yaml"]), "c"),
                    Path(scratch))
        node.save()
        fresh = (Path(scratch) / "cpu_manager_state").read_text()
    yield one("fresh-checkpoint", "the kubelet's own fresh cpu_manager_state", **{"kubelet__cpu_manager_state": fresh},
              equivalent="the checkpoint the reconstruction's kubelet writes when it starts on the drained node")
    # node-b's other files, changed one field at a time
    config = yaml.safe_load(built["kubelet-config.yaml"])
    for edit in list(tree_edits(config))[:10]:
        yield one(f"config:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), f"node-b's kubelet-config.yaml: {edit.describe()}",
                  names=("kubelet-config.yaml changed",), **{"kubelet-config.yaml": yaml.safe_dump(edit.value)})
    probe = yaml.safe_load(built["probe-pod.yaml"])
    for edit in list(tree_edits(probe))[:8]:
        yield one(f"probe:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), f"node-b's probe-pod.yaml: {edit.describe()}",
                  names=("probe-pod.yaml changed",), **{"probe-pod.yaml": yaml.safe_dump(edit.value)})
    yield one("machine-changed", "node-b's machine.json rewritten", names=("machine.json changed",),
              **{"machine.json": json.dumps(json.loads(built["machine.json"]))})
