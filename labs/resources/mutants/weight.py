"""Near-misses of the weight reference answer: the value read one off, doubled, zero, or read from
a container cgroup or the QoS cgroup instead of the pod cgroup; each bound of the range one off,
doubled, zero, or left out."""

from labkit.mutants import answer_mutants, scalar_alternatives
from labkit.resources.node import lab_nodes


def mutants(ctx):
    p = ctx.params
    answer = ctx.answer()
    node = lab_nodes(ctx.env)[p["node"]]
    record = node.record(p["pod"])
    key = "cpu.weight" if node.cgroups.version == "v2" else "cpu.shares"
    neighbours = [node.cgroups.settings(c["cgroup"])[key] for c in record["containers"].values()]
    neighbours.append(node.cgroups.settings(record["cgroup"].rsplit("/", 1)[0])[key])
    value = answer["cgroup_value"]
    others = sorted(set(scalar_alternatives(value)) | set(neighbours) - {value})
    yield from answer_mutants(answer, alternatives={"cgroup_value": others})
