"""Reference solution: run a Guaranteed and a Burstable Pod on the live node, then read /proc."""

import re
import tempfile
from pathlib import Path

import yaml

from labkit.exercises import answer_path
from labkit.numa import runtime
from labkit.numa.livenode import LiveNode

PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  containers:
    - name: app
      command: [sleep, infinity]
      resources:
        limits: {cpu: "1", memory: 64Mi}
---
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


def _read(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1)


def solve(env):
    live = LiveNode(env)
    with tempfile.TemporaryDirectory() as scratch:
        pod_file = Path(scratch) / "pods.yaml"
        pod_file.write_text(PODS)
        live.run(pod_file)
    answer = {}
    for role, name in (("guaranteed", "pinned"), ("burstable", "bursty")):
        record = live.record(name)
        pid = min(runtime.running_pids(env, record.uid, "app"))
        answer[role] = {"pod": name, "pid": pid, "cpus_allowed_list": _read(pid)}
    path = answer_path(env.lab.id, "pin")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(answer))
