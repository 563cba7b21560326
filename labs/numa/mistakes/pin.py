"""Common wrong answers to pin."""

import re
import tempfile
from pathlib import Path

import yaml

from labkit.exercises import answer_path, mistake
from labkit.numa import runtime
from labkit.numa.livenode import LiveNode

BURSTY = """\
apiVersion: v1
kind: Pod
metadata: {name: bursty}
spec:
  containers:
    - name: app
      command: [sleep, infinity]
      resources:
        requests: {cpu: 100m, memory: 32Mi}
"""


def _pinned(cpu: str) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: pinned}}
spec:
  containers:
    - name: app
      command: [sleep, infinity]
      resources:
        limits: {{cpu: "{cpu}", memory: 64Mi}}
"""


def _run(env, text: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "pods.yaml"
        path.write_text(text)
        LiveNode(env).run(path)


def _read(pid: int) -> str:
    return re.search(r"^Cpus_allowed_list:\s*(\S+)", Path(f"/proc/{pid}/status").read_text(), re.M).group(1)


def _write(env, guaranteed: dict, burstable: dict) -> None:
    path = answer_path(env.lab.id, "pin")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"guaranteed": guaranteed, "burstable": burstable}))


def _entry(env, name: str, listed=None) -> dict:
    pid = min(runtime.running_pids(env, LiveNode(env).record(name).uid, "app"))
    return {"pod": name, "pid": pid, "cpus_allowed_list": listed if listed is not None else _read(pid)}


@mistake("has no exclusive CPUs")
def half_a_cpu(env):
    """Runs the Guaranteed Pod with cpu: 500m: Guaranteed, but in the shared pool."""
    _run(env, _pinned("500m") + "---\n" + BURSTY)
    _write(env, _entry(env, "pinned"), _entry(env, "bursty"))


@mistake("is not what /proc/")
def reserved_cpu_written(env):
    """Writes the reserved CPU 0 as the Guaranteed container's CPU instead of reading /proc."""
    _run(env, _pinned("1") + "---\n" + BURSTY)
    _write(env, _entry(env, "pinned", listed="0"), _entry(env, "bursty"))


@mistake("is not a container process of Pod pinned")
def pids_swapped(env):
    """Puts the Burstable container's process id under the Guaranteed Pod."""
    _run(env, _pinned("1") + "---\n" + BURSTY)
    guaranteed, burstable = _entry(env, "pinned"), _entry(env, "bursty")
    guaranteed["pid"], burstable["pid"] = burstable["pid"], guaranteed["pid"]
    _write(env, guaranteed, burstable)


@mistake("node agent", "no longer runs")
def node_agent_deleted(env):
    """Deletes the node agent so that nothing else could run on the exclusive CPU anyway."""
    LiveNode(env).delete("node-agent", "kube-system")
    _run(env, _pinned("1") + "---\n" + BURSTY)
    _write(env, _entry(env, "pinned"), _entry(env, "bursty"))


@mistake("kubelet-config.yaml was changed")
def reservation_moved(env):
    """Switches the live kubelet's Topology Manager to restricted in kubelet-config.yaml before running the Pods."""
    path = env.dir / "kubelet-config.yaml"
    path.write_text(path.read_text().replace("topologyManagerPolicy: best-effort", "topologyManagerPolicy: restricted"))
    _run(env, _pinned("1") + "---\n" + BURSTY)
    _write(env, _entry(env, "pinned"), _entry(env, "bursty"))


@mistake("default/pinned/side has no exclusive CPUs")
def fractional_sidecar(env):
    """Runs the Guaranteed Pod with a second container asking for 500m: that container stays in the shared pool,
    and the answer names only the pinned container's process."""
    _run(env, _pinned("1") + "    - name: side\n      command: [sleep, infinity]\n      resources:\n"
         "        limits: {cpu: 500m, memory: 32Mi}\n---\n" + BURSTY)
    _write(env, _entry(env, "pinned"), _entry(env, "bursty"))
