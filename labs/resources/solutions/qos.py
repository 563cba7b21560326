"""Reference solution: the QoS classes and oom_score_adj values, worked out by hand.

web: requests below limits -> Burstable; 1000 - 1000 * 128Mi / 2Gi = 1000 - 62 = 938.
queue: limits only; the API server copies them into the requests -> Guaranteed: -997.
batch: nothing -> BestEffort: 1000.
api: log-shipper has no limits -> Burstable; server 1000 - 1000 * 512Mi / 2Gi = 750; log-shipper
requests nothing: 1000, which kubelet lowers to 999 for a Burstable container.
migrate: the init container has no limits -> Burstable; app 1000 - 1000 * 64Mi / 2Gi = 969
(the finished init container has no process any more).
"""

import yaml

from labkit.exercises import answer_path

ANSWER = {
    "qos": {"web": "Burstable", "queue": "Guaranteed", "batch": "BestEffort", "api": "Burstable",
            "migrate": "Burstable"},
    "oom_score_adj": {"web/app": 938, "queue/broker": -997, "batch/job": 1000, "api/server": 750,
                      "api/log-shipper": 999, "migrate/app": 969},
}


def solve(env):
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ANSWER))
