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
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import load_pods

    node_b = _record_dir(env, NODE_B)
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

