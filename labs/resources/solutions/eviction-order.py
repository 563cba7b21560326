"""Reference solution.

Usage above request first (all but payments and checkout, which stay below their requests);
among those, lower priority first: crawler (low-priority, -10); then priority 0 by usage minus
request: analytics (~200Mi - 64Mi), logs (~40Mi - 0); then reports (high-priority). Below their
requests: payments (~64Mi - 96Mi) before checkout (~64Mi - 128Mi). Then run it and watch.
"""

from pathlib import Path

import yaml

from labkit.exercises import answer_path
from labkit.resources import eviction
from labkit.resources.node import lab_nodes

ORDER = ["crawler", "analytics", "logs", "reports", "payments", "checkout"]


def solve(env):
    path = answer_path(env.lab.id, "eviction-order")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"order": ORDER}))
    watch(env)


def watch(env):
    """Apply the scenario, wait until every Pod holds its memory, run the eviction manager."""
    lab = env.lab.environment_module()
    node = lab_nodes(env)["node-3"]
    node.apply(node.load(Path(env.dir) / "scenarios" / "pressure.yaml"))
    for name in ORDER:
        lab.wait_settled(env, "node-3", name)
    eviction.run(node)
