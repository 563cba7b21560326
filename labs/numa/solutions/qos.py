"""Reference solution: the QoS classes, worked out by hand from the rules.

web: requests == limits for cpu and memory -> Guaranteed (a fractional CPU does not matter here).
batch: nothing -> BestEffort. cache: limits only; the API server copies them into the requests
-> Guaranteed. api: no cpu limit -> Burstable. migrate: the init container has no limits ->
Burstable. scratch: only ephemeral-storage, which does not count -> BestEffort.
"""

import yaml

from labkit.exercises import answer_path

ANSWER = {"qos": {"web": "Guaranteed", "batch": "BestEffort", "cache": "Guaranteed", "api": "Burstable",
                  "migrate": "Burstable", "scratch": "BestEffort"}}


def solve(env):
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ANSWER))
