"""Reference solution: a Guaranteed Pod asking for more whole CPUs than one NUMA node has (8).

Its only CPU hint is {0,1}; best-effort admits it anyway, single-numa-node keeps only
single-node hints, finds none and rejects the Pod with TopologyAffinityError.
"""

import yaml

from labkit.exercises import answer_path

POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide"},
    "spec": {"containers": [{"name": "app", "image": "app",
                             "resources": {"limits": {"cpu": "10", "memory": "1Gi"}}}]},
}


def solve(env):
    path = answer_path(env.lab.id, "single-numa")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(POD))
