"""The NUMA lab's environment: this host as a kubelet node, plus the simulated node-b.

Lab directory (env.dir):
  machine.json, kubelet-config.yaml, kubelet/, pods/   the live node (labkit.numa.livenode)
  scenarios/                                            the exercises' Pods, configurations, hints
  node-b/                                               a simulated node whose cpu_manager_state was
                                                        edited by hand (exercise checkpoint)
  diagrams/lab-two-node.svg                             the machine of the lesson
"""

import json
import shutil
from pathlib import Path

from labkit import cgroups
from labkit.errors import LabkitError
from labkit.numa import diagram, runtime
from labkit.numa.cpuset import format_cpus
from labkit.numa.discover import discover
from labkit.crashpoints import crash_point
from labkit.numa.livenode import LiveNode

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
NODE_B = "node-b"
EXAMPLE_MACHINE = "lab-two-node"

LIVE_CONFIG = """\
# The live node's kubelet (this machine). Static CPU Manager: exclusive CPUs for Guaranteed
# containers with whole CPUs. kubelet refuses the static policy without a CPU reservation, and
# never hands reserved CPUs out exclusively (they stay in the shared pool): reserving CPU {reserved}
# leaves {allocatable} for exclusive use.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cpuManagerPolicy: static
reservedSystemCPUs: "{reserved}"
topologyManagerPolicy: best-effort
topologyManagerScope: container
memoryManagerPolicy: Static
systemReserved:
  memory: 412Mi          # + evictionHard memory.available 100Mi = the 512Mi of reservedMemory
reservedMemory:
  - numaNode: {memory_node}
    limits: {{memory: 512Mi}}
"""


def live_config(machine: dict) -> str:
    cpus = sorted(t for node in machine["topology"] for core in node["cores"] for t in core["thread_ids"])
    if len(cpus) < 2:
        raise LabkitError(f"this machine has {len(cpus)} CPU: the lab needs at least 2 (one reserved for the "
                          "system, one to hand out exclusively)")
    memory_node = next(node["node_id"] for node in machine["topology"] if node["memory"] > 0)
    return LIVE_CONFIG.format(reserved=cpus[0], allocatable=format_cpus(cpus[1:]), memory_node=memory_node)


def _record_dir(env, name: str) -> Path:
    path = env.dir / name
    env.ledger.record("path", path=str(path))
    return path


def up(env):
    if cgroups.cpuset_hierarchy() is None:
        raise LabkitError("no cgroup hierarchy with the cpuset controller (see `labkit doctor`)")
    machine = discover()
    config = live_config(machine)
    crash_point("numa:discovered")
    LiveNode(env).create(machine, config)
    crash_point("numa:node-created")
    shutil.copytree(SCENARIOS, _record_dir(env, "scenarios"))
    diagrams = _record_dir(env, "diagrams")
    diagrams.mkdir()
    from labkit.numa.machine import load_machine
    example = load_machine(EXAMPLE_MACHINE).to_dict()
    (diagrams / f"{EXAMPLE_MACHINE}.svg").write_text(diagram.svg(example, diagram.Placement(), EXAMPLE_MACHINE))
    crash_point("numa:scenarios")
    build_node_b(env)
    crash_point("numa:node-b")
    LiveNode(env).run(env.dir / "scenarios" / "node-agent.yaml")
    crash_point("numa:node-agent")


def build_node_b(env) -> None:
    """node-b runs three Pods; then someone 'gave back' a CPU by editing cpu_manager_state by hand."""
    write_node_b(_record_dir(env, NODE_B))


def write_node_b(node_b: Path) -> None:
    """node-b's files, as the lab builds them, into the directory `node_b` (made here)."""
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import load_pods

    (node_b / "kubelet").mkdir(parents=True)
    shutil.copy(load_machine(EXAMPLE_MACHINE).source, node_b / "machine.json")
    shutil.copy(SCENARIOS / "kubelet-config.yaml", node_b / "kubelet-config.yaml")
    shutil.copy(SCENARIOS / "node-b-pods.yaml", node_b / "pods.yaml")
    shutil.copy(SCENARIOS / "node-b-probe.yaml", node_b / "probe-pod.yaml")
    node = Node(load_machine(node_b / "machine.json"), load_config(node_b / "kubelet-config.yaml"), node_b / "kubelet")
    node.admit_all(load_pods(node_b / "pods.yaml"))
    node.save()
    state_file = node_b / "kubelet" / "cpu_manager_state"
    data = json.loads(state_file.read_text())
    exclusive = sorted(set().union(*(cpus for containers in node.cpu_state.assignments.values()
                                     for cpus in containers.values())))
    # the hand edit: an exclusive CPU written back into the shared pool, checksum left as it was
    data["defaultCpuSet"] = format_cpus(set(node.cpu_state.default_cpu_set) | {exclusive[-1]})
    state_file.write_text(json.dumps(data, separators=(",", ":")))


# -- resetting one exercise, keeping the student's work ------------------------------------------------

# the lab-directory files each exercise's part consists of (the answer files live elsewhere and are
# never touched by a reset)
SCENARIO_FILES = {
    "qos": ["qos-pods.yaml"],
    "cpu-hints": ["hints-running.yaml", "hints-pod.yaml", "kubelet-config.yaml"],
    "merge": ["merge-trainer.json", "merge-feeder.json"],
    "single-numa": ["kubelet-config.yaml"],
    "static-cpus": ["static-pods.yaml", "kubelet-static.yaml"],
    "memory": ["memory-pods.yaml", "kubelet-memory.yaml"],
    "checkpoint": ["node-b-pods.yaml", "node-b-probe.yaml", "kubelet-config.yaml"],
    "pin": ["node-agent.yaml"],
}
SAVED = "saved"


def _differs(path: Path, original: bytes | None) -> bool:
    try:
        return path.read_bytes() != original
    except OSError:
        return original is not None


def _changed_scenarios(env, exercise_id: str) -> list[str]:
    return [name for name in SCENARIO_FILES[exercise_id]
            if _differs(env.dir / "scenarios" / name, (SCENARIOS / name).read_bytes())]


def _node_b_originals() -> dict[str, bytes]:
    import tempfile
    with tempfile.TemporaryDirectory(prefix="numa-node-b-") as scratch:
        write_node_b(Path(scratch) / NODE_B)
        root = Path(scratch) / NODE_B
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _changed_node_b(env, originals: dict[str, bytes] | None = None) -> list[str]:
    originals = originals if originals is not None else _node_b_originals()
    here = env.dir / NODE_B
    present = {str(p.relative_to(here)) for p in here.rglob("*") if p.is_file()} if here.is_dir() else set()
    return sorted(name for name in set(originals) | present if _differs(here / name, originals.get(name)))


def _student_pods(env) -> list[str]:
    return [rec.key for rec in LiveNode(env).records() if rec.key != "kube-system/node-agent"]


def _live_config_changed(env) -> bool:
    live = LiveNode(env)
    try:
        return live.config_path.read_text() != live_config(json.loads(live.machine_path.read_text()))
    except (OSError, ValueError):
        return True


def _keep_aside(env, exercise_id: str, relpaths: list[str]) -> str:
    """Copy the student's versions of `relpaths` (relative to the lab directory) to
    saved/<exercise>-<n>/ before the originals come back; returns that directory, relative."""
    saved = env.dir / SAVED
    if not saved.exists():
        env.ledger.record("path", path=str(saved))
        saved.mkdir()
    n = 1
    while (saved / f"{exercise_id}-{n}").exists():
        n += 1
    target = saved / f"{exercise_id}-{n}"
    for rel in relpaths:
        source = env.dir / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)
    target.mkdir(parents=True, exist_ok=True)
    return str(target.relative_to(env.dir))


KEPT = "kept"       # the whole lab's rebuild keeps the student's files here (not in the ledger)


def _added_scenarios(env) -> list[str]:
    """Files the student added to scenarios/ (the rebuild would not bring them back)."""
    mine = env.dir / "scenarios"
    ours = {str(p.relative_to(SCENARIOS)) for p in SCENARIOS.rglob("*") if p.is_file()}
    return sorted(rel for p in mine.rglob("*") if p.is_file() and (rel := str(p.relative_to(mine))) not in ours) \
        if mine.is_dir() else []


def _whole_lab_work(env) -> list[str]:
    """Every file of the student's that a rebuild of the whole lab would remove or put back,
    relative to the lab directory."""
    changed = sorted({name for ex in SCENARIO_FILES for name in _changed_scenarios(env, ex)})
    files = [f"scenarios/{name}" for name in changed + _added_scenarios(env)]
    if (env.dir / NODE_B).exists():
        files += [f"{NODE_B}/{name}" for name in _changed_node_b(env)]
    live = LiveNode(env)
    if live.exists() and _live_config_changed(env):
        files.append(str(live.config_path.relative_to(env.dir)))
    saved = env.dir / SAVED
    if saved.is_dir():
        files += sorted(str(p.relative_to(env.dir)) for p in saved.rglob("*") if p.is_file())
    return [f for f in files if (env.dir / f).is_file()]


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Before the whole lab is rebuilt: copy every file of the student's it would remove or put
    back (edited and added scenario files, node-b, the live kubelet config, saved/) to
    kept/<time>/, which the rebuild leaves alone, and say where. A one-exercise reset keeps its
    own copies under saved/ (reset_exercise)."""
    import time
    if exercise_id is not None:
        return []
    files = _whole_lab_work(env)
    if not files:
        return []
    target = env.dir / KEPT / time.strftime("%Y%m%d-%H%M%S")
    for rel in files:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(env.dir / rel, target / rel)
    return [f"your {len(files)} file(s) are kept under {target} (the rebuilt lab leaves them there)"]


def student_work(env, exercise_id: str | None) -> list[str]:
    """What `labkit reset numa [EXERCISE]` would revert of the student's work, one phrase each.
    A reset of one exercise keeps a copy of each edited file under saved/; a reset of the whole lab
    rebuilds the lab directory and keeps every file of the student's under kept/<time>/ first
    (keep_student_work). The answer files stay either way."""
    ids = [exercise_id] if exercise_id else list(SCENARIO_FILES)
    kept = " (a copy is kept under saved/)" if exercise_id else " (a copy is kept under kept/)"
    out, seen = [], set()
    for ex in ids:
        for name in _changed_scenarios(env, ex):
            if name not in seen:
                seen.add(name)
                out.append(f"scenarios/{name} you edited{kept}")
    if exercise_id is None:
        out += [f"scenarios/{name} you added{kept}" for name in _added_scenarios(env)]
        if (env.dir / SAVED).is_dir() and any((env.dir / SAVED).rglob("*")):
            out.append(f"{SAVED}/, the copies earlier resets kept{kept}")
    if "checkpoint" in ids and (env.dir / NODE_B).exists():
        out += [f"{NODE_B}/{name} you changed{kept}" for name in _changed_node_b(env)]
    if "pin" in ids and LiveNode(env).exists():
        pods = _student_pods(env)
        if pods:
            out.append(f"the Pod(s) you run on the live node ({', '.join(pods)}): they are deleted")
        if not LiveNode(env).record("node-agent", "kube-system"):
            out.append("the node agent you deleted (it is started again)")
        if _live_config_changed(env):
            out.append(f"kubelet-config.yaml of the live node you edited{kept}")
    return out


def reset_exercise(env, exercise_id: str) -> None:
    """Restore only `exercise_id`'s part of the lab; the student's versions of files it restores are
    copied to saved/<exercise>-<n>/ first, and nothing of theirs is deleted."""
    aside = [f"scenarios/{name}" for name in _changed_scenarios(env, exercise_id)]
    if exercise_id == "checkpoint":
        originals = _node_b_originals()
        aside += [f"{NODE_B}/{name}" for name in _changed_node_b(env, originals)]
    live = LiveNode(env)
    if exercise_id == "pin" and _live_config_changed(env):
        aside.append(live.config_path.name)
    if aside:
        _keep_aside(env, exercise_id, aside)
    for name in SCENARIO_FILES[exercise_id]:
        shutil.copy(SCENARIOS / name, env.dir / "scenarios" / name)
    if exercise_id == "checkpoint":
        here = env.dir / NODE_B
        for rel in _changed_node_b(env, originals):
            path = here / rel
            if rel in originals:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(originals[rel])
            else:
                path.unlink()       # a file the student added: its copy is under saved/
    if exercise_id == "pin":
        if _live_config_changed(env):
            live.config_path.write_text(live_config(json.loads(live.machine_path.read_text())))
        try:
            live.kubelet()
        except LabkitError:     # checkpoints the kubelet refuses: start afresh, as kubelet's docs say
            for name in ("cpu_manager_state", "memory_manager_state"):
                (live.kubelet_dir / name).unlink(missing_ok=True)
        for key in _student_pods(env):
            namespace, name = key.split("/", 1)
            live.delete(name, namespace)
        live.kubelet().save()
        if live.record("node-agent", "kube-system") is None:
            live.run(env.dir / "scenarios" / "node-agent.yaml")
        live.reconcile()


def is_up(env):
    return LiveNode(env).exists() and runtime.lab_cgroup_root(env).is_dir()


def access(env):
    return (
        "## Your lab directory\n\n"
        f"`cd {env.dir}` — the commands in the exercises are relative to it.\n\n"
        "* `machine.json`, `kubelet-config.yaml`, `kubelet/` — the live node (this machine)\n"
        "* `scenarios/` — the exercises' Pods, configurations and hints\n"
        f"* `{NODE_B}/` — a simulated node whose kubelet no longer starts\n"
        f"* `diagrams/{EXAMPLE_MACHINE}.svg` — the example machine (open it in a browser)\n\n"
        "Start with `labkit numa show` (the live node) and "
        f"`labkit numa show --machine {EXAMPLE_MACHINE}`."
    )

