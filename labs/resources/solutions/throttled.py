"""Reference solution.

1. limits.cpu 100m -> CFS quota 100 * 100000 / 1000 = 10000 us per 100000 us period. A request
   needs 15 ms of CPU. Starting as a period begins with the quota unspent: 10 ms, then the container
   waits until the period ends, and finishes with 5 ms in the next: 100 + 5 = 105 ms at most, even
   with every other CPU idle (one that starts 10 ms before a refill takes 15 ms: the bound is 105).
2. The server uses 15 ms per 100 ms = 150m: request 200m, and no CPU limit.
"""

import yaml

from labkit.exercises import answer_path


def solve(env):
    path = answer_path(env.lab.id, "throttled")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"quota_us": 10000, "period_us": 100000, "request_ms": 105}))
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "frontend")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "200m", "memory": "32Mi"},
                                                 "limits": {"memory": "64Mi"}}
    lab.replace_pod(env, "node-1", pod)
