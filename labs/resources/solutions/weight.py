"""Reference solution: read the pod cgroup's value (cpu.weight on v2, cpu.shares on v1) and
invert kubelet's conversion by trying every request: mystery asks 150m + 100m = 250m -> 256
shares -> weight 10 on v2, which requests 233m to 258m give (on v1: 256 shares, only 250m)."""

import yaml

from labkit.exercises import answer_path
from labkit.resources.kubelet import milli_cpu_to_shares, shares_to_weight
from labkit.resources.node import lab_nodes


def read_value(env, rel: str) -> tuple[int, bool]:
    node = lab_nodes(env)["node-1"]
    v2 = node.cgroups.version == "v2"
    return node.cgroups.settings(rel)["cpu.weight" if v2 else "cpu.shares"], v2


def answer(env, value: int, v2: bool) -> None:
    convert = (lambda m: shares_to_weight(milli_cpu_to_shares(m))) if v2 else milli_cpu_to_shares
    millis = [m for m in range(0, 20000) if convert(m) == value]
    path = answer_path(env.lab.id, "weight")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"cgroup_value": value, "min_millicores": min(millis),
                                    "max_millicores": max(millis)}))


def solve(env):
    record = lab_nodes(env)["node-1"].record("mystery")
    answer(env, *read_value(env, record["cgroup"]))
