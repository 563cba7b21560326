"""The resources lab: three kubelet nodes whose Pods are real processes in real cgroups.

Lab directory (env.dir):
  nodes/<node>/node.json        the node's configuration (from nodes.yaml)
  nodes/<node>/pods/<pod>.json  its Pods: the stored (defaulted) object, status, containers
  nodes/<node>/eviction.json    what `labkit resources evict` did there
  nodes/<node>/eviction-manager.json  what the eviction manager keeps between runs (thresholds
                                not yet resolved, when MemoryPressure was last observed)
  scenarios/                    the Pods of the exercises, to read, copy and apply again
  kept/<time>/                  scenario files the student had edited, kept when the whole lab
                                was rebuilt (`labkit reset resources`)
  predictions/                  predictions kept when a tool showed their outcome (labkit.predictions;
                                not in the ledger: every reset keeps them, as it keeps passes)
The cgroups are under the lab's own subtree (labkit.resources.cgroupfs): on cgroup v1 in the cpu,
cpuacct and memory hierarchies, on v2 in one tree.
"""

import os
import shutil
from pathlib import Path

from labkit.crashpoints import crash_point
from labkit.inputs import load_yaml
from labkit.quantity import Quantity
from labkit.resources import cgroupfs
from labkit.resources.node import Node, NodeConfig

HERE = Path(__file__).resolve().parent


def node_configs() -> list[tuple[NodeConfig, str | None]]:
    """(configuration, Pods to start) for each node of nodes.yaml."""
    data = load_yaml(HERE / "nodes.yaml")
    cpus = len(os.sched_getaffinity(0)) * 1000
    out = []
    for item in data["nodes"]:
        config = NodeConfig(item["name"], Quantity.parse(item["memoryCapacity"]).value_int(), cpus,
                            eviction_hard=dict(item.get("evictionHard") or {}),
                            eviction_minimum_reclaim=dict(item.get("evictionMinimumReclaim") or {}),
                            priority_classes=dict(data.get("priorityClasses") or {}))
        out.append((config, item.get("pods")))
    return out


def _record(env, name: str) -> Path:
    path = Path(env.dir) / name
    env.ledger.record("path", path=str(path))
    return path


def up(env):
    cgroupfs.version()    # a clear error when cpu and memory controllers are missing
    shutil.copytree(HERE / "scenarios", _record(env, "scenarios"))
    _record(env, "nodes")
    crash_point("resources:scenarios")
    started = []
    for config, pods in node_configs():
        node = Node(env, config)
        node.create()
        crash_point("resources:node")
        if pods:
            node.apply(node.load(Path(env.dir) / pods), wait=False)
        started.append(node)
    for node in started:     # every container process in its cgroups before `labkit run` returns
        node.wait_started()


# -- resets: one exercise's part, and what a reset would revert ------------------------------------

# Each exercise's part of the lab: (node, scenario file, the Pods it concerns; None: every Pod of
# the file, and the node holds nothing else).
PARTS = {
    "qos": ("node-1", "node-1.yaml", ("web", "queue", "batch", "api", "migrate")),
    "throttled": ("node-1", "node-1.yaml", ("frontend",)),
    "oom": ("node-1", "node-1.yaml", ("shop",)),
    "noisy-neighbour": ("node-2", "node-2.yaml", None),
    "eviction-order": ("node-3", "pressure.yaml", None),
    "weight": ("node-1", "node-1.yaml", ("mystery",)),
}
BUILT_WITH = {"node-1.yaml", "node-2.yaml"}      # the scenario files `labkit run` starts (nodes.yaml)
# node-1's Pods that no exercise changes: every node-1 exercise requires them as built, so its
# reset also runs those the student changed or deleted as built again.
SHARED = {"node-1": ("web", "queue", "batch", "api", "migrate", "mystery")}


def _original_pods(node, file: str, names) -> list:
    """The exercise's Pods as the lab ships them (labs/resources/scenarios, never the student's copy)."""
    return [p for p in node.load(HERE / "scenarios" / file) if names is None or p.name in names]


def _part(env, exercise_id: str):
    from labkit.resources.node import lab_nodes
    node_name, file, names = PARTS[exercise_id]
    node = lab_nodes(env).get(node_name)
    if node is None:
        raise RuntimeError(f"node {node_name} is missing")
    return node, file, names


def reset_exercise(env, exercise_id):
    """The exercise's Pods as the lab built them, run afresh from the lab's own scenario files
    (the student's copies under scenarios/ stay as they are); the Pods the student added on a
    node the exercise owns (node-2, node-3) go, node-3 is empty again and forgets its evictions;
    node-1's Pods that no exercise changes (SHARED) run as built again if the student changed them.
    A prediction kept when a tool showed its outcome stays kept (labkit.predictions: the rule of
    every lab's resets)."""
    from labkit.resources import pressure

    node, file, names = _part(env, exercise_id)
    if names is not None:
        names = tuple(names) + tuple(n for n in _changed_shared(node) if n not in names)
    ours = [r["name"] for r in node.records()]
    if names is not None:
        ours = [n for n in ours if n in names]
    for name in ours:
        node.delete(name)
    if exercise_id == "eviction-order":
        (node.dir / "eviction.json").unlink(missing_ok=True)
    # the rebuilt node's eviction manager starts afresh: no threshold still unresolved, no
    # MemoryPressure that would reject the exercise's BestEffort Pods (labkit.resources.pressure)
    (node.dir / pressure.STATE_FILE).unlink(missing_ok=True)
    if file in BUILT_WITH:
        node.apply(_original_pods(node, file, names))


def _changed_shared(node) -> list[str]:
    """node's Pods that no exercise changes and that differ from the lab's (or are gone)."""
    shared = SHARED.get(node.name, ())
    if not shared:
        return []
    originals = {p.name: p for p in _original_pods(node, "node-1.yaml", shared)}
    out = []
    for name, original in originals.items():
        record = node.record(name)
        if record is None or record["manifest"].get("spec") != original.manifest.get("spec"):
            out.append(name)
    return out


def _part_pods(env, exercise_id: str):
    """The exercise's part: its node, the Pods the lab built there (name -> original), and each
    stored Pod of the part with its original (None: one the student ran)."""
    node, file, names = _part(env, exercise_id)
    if names is not None:
        names = tuple(names) + tuple(n for n in _changed_shared(node) if n not in names)
    originals = {p.name: p for p in _original_pods(node, file, names)} if file in BUILT_WITH else {}
    stored = [(record, originals.get(record["name"])) for record in node.records()
              if names is None or record["name"] in names]
    return node, originals, stored


def _changed_pods(env, exercise_id: str) -> list[str]:
    node, originals, stored = _part_pods(env, exercise_id)
    out = []
    for record, original in stored:
        name = record["name"]
        if original is None:
            out.append(f"Pod {name} you ran on {node.name} (a reset deletes it; a copy goes to {_saved_dir()})")
        elif record["manifest"].get("spec") != original.manifest.get("spec"):
            out.append(f"your changes to Pod {name} on {node.name} (a reset runs it as the lab built it; a copy of "
                       f"yours goes to {_saved_dir()})")
    for name in sorted(set(originals) - {r["name"] for r in node.records()}):
        out.append(f"Pod {name} you deleted from {node.name} (a reset runs it again)")
    if exercise_id == "eviction-order" and (node.dir / "eviction.json").exists():
        out.append(f"the evictions you watched on {node.name}")
    return out


def _reverted_pods(env, exercise_id: str) -> list[dict]:
    """The stored Pods a reset of the exercise deletes or runs as built again because the student
    ran, changed or resized them (`_changed_pods`' Pods that are still there)."""
    _, _, stored = _part_pods(env, exercise_id)
    return [record["manifest"] for record, original in stored
            if original is None or record["manifest"].get("spec") != original.manifest.get("spec")]


def _saved_dir() -> Path:
    from labkit import paths
    return paths.answers_root() / "resources" / "saved"


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Before a reset reverts them: the Pods the student ran, changed or resized in place on the
    exercise's part (every part for the whole lab), as YAML `labkit resources apply -f` takes back,
    in saved/ of the answers directory. A resize (`labkit resources patch --subresource resize`) is
    in no file of the student's: without this copy a reset would lose it."""
    import time

    import yaml

    exercises = [exercise_id] if exercise_id is not None else list(PARTS)
    pods, seen = [], set()
    for ex in exercises:
        for manifest in _reverted_pods(env, ex):
            key = ((manifest.get("spec") or {}).get("nodeName"), manifest["metadata"]["name"])
            if key in seen:
                continue
            seen.add(key)
            metadata = {k: v for k, v in manifest["metadata"].items() if k in ("name", "namespace", "labels",
                                                                                 "annotations")}
            spec = {k: v for k, v in manifest["spec"].items() if k != "priority"}   # set by Priority admission
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    if not pods:
        return []
    directory = _saved_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{exercise_id or 'lab'}-{time.strftime('%Y%m%d-%H%M%S')}.yaml"
    path.write_text(yaml.safe_dump_all(pods, sort_keys=False))
    return [f"your Pods as they run now ({', '.join(p['metadata']['name'] for p in pods)}): {path} "
            "(`labkit resources apply -f` runs them again)"]


def _edited_scenarios(env) -> list[Path]:
    mine = Path(env.dir) / "scenarios"
    if not mine.is_dir():
        return []
    out = []
    for path in sorted(mine.rglob("*")):
        if not path.is_file():
            continue
        original = HERE / "scenarios" / path.relative_to(mine)
        if not original.is_file() or original.read_bytes() != path.read_bytes():
            out.append(path)
    return out


def student_work(env, exercise_id):
    """What a reset would revert of the student's work: the exercise's Pods changed, deleted or
    added (a one-exercise reset touches nothing else). The whole lab's rebuild also puts the
    original scenario files back: the student's edited or added ones are copied to kept/<time>/
    first (they survive the rebuild there) and listed with where they are."""
    import time

    exercises = [exercise_id] if exercise_id is not None else list(PARTS)
    out = []
    for ex in exercises:
        out += [item for item in _changed_pods(env, ex) if item not in out]
    if exercise_id is None:
        edited = _edited_scenarios(env)
        if edited:
            kept = Path(env.dir) / "kept" / time.strftime("%Y%m%d-%H%M%S")
            mine = Path(env.dir) / "scenarios"
            for path in edited:
                rel = path.relative_to(mine)
                same = [k for k in sorted((Path(env.dir) / "kept").glob(f"*/{rel}")) if k.read_bytes() == path.read_bytes()]
                target = same[-1] if same else kept / rel
                if not same:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
                out.append(f"scenarios/{path.relative_to(mine)} you edited (the rebuild puts the lab's copy back; "
                           f"yours is kept as {target})")
    return out


def is_up(env):
    return all(Node(env, config).exists() for config, _pods in node_configs())


def access(env):
    return (
        "## Your lab\n\n"
        f"`cd {env.dir}` — `scenarios/` holds the exercises' Pods.\n\n"
        "* `labkit resources nodes` — the nodes, their memory budget and `memory.available`\n"
        "* `labkit resources get [--node N] [-o json]` — Pods, QoS, containers, cgroup settings next to the spec\n"
        "* `labkit resources top [--node N] [--watch]` — live CPU, throttling, memory, OOM kills\n"
        "* `labkit resources apply -f FILE`, `labkit resources delete POD [--node N]`\n"
        "* `labkit resources oom-kills` — the kernel's log of OOM kills in the lab's cgroups\n"
        "* `labkit resources evict --node N` — kubelet's eviction manager, now\n"
        "* `labkit resources plan -f FILE`, `labkit resources convert --cpu 300m` — kubelet's numbers, offline\n"
    )


# -- steps the reference solutions and the common wrong ones share --------------------------------

def scenario_pod(env, file: str, name: str) -> dict:
    """A Pod manifest of one of the lab's scenario files (the student's copy in the lab directory)."""
    import yaml
    for doc in yaml.safe_load_all((Path(env.dir) / "scenarios" / file).read_text()):
        if doc and doc["metadata"]["name"] == name:
            return doc
    raise KeyError(name)


def replace_pod(env, node_name: str, manifest: dict) -> None:
    """What a student does: delete the Pod, write the changed manifest, apply it."""
    import tempfile

    import yaml
    from labkit.resources.node import lab_nodes

    node = lab_nodes(env)[node_name]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(yaml.safe_dump(manifest))
        f.flush()
        pods = node.load(f.name)          # the API server's defaulting and validation first
    if node.record(manifest["metadata"]["name"]) is not None:
        node.delete(manifest["metadata"]["name"])
    node.apply(pods)


def wait_settled(env, node_name: str, pod: str, timeout: float = 60.0) -> None:
    """Until every container of the Pod holds the memory its workload allocates, or has stopped."""
    import time
    from labkit.resources.node import lab_nodes
    from labkit.resources.workload import memory_target

    node = lab_nodes(env)[node_name]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = node.record(pod)
        if record is None or record["status"]["phase"] != "Running":
            return
        specs = {c.name: c for c in node.pod(record).all_containers()}
        pending = False
        for view in node.containers(record):
            if not view.pids or not node.cgroups.exists(view.cgroup):
                continue
            memory = node.cgroups.memory(view.cgroup)
            target = memory_target(specs[view.name].command, memory.limit)
            pending = pending or (target is not None and memory.working_set < target)
        if not pending:
            return
        time.sleep(0.05)
