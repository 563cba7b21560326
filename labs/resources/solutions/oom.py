"""Reference solution: `labkit resources get --node node-1` shows shop/indexer terminated with
OOMKilled; its memory.failcnt (v1) / memory.events.local `oom` (v2) counts hits of its own 160Mi
limit, while the node had plenty left: cause `limit`. It allocates 200Mi (plus the interpreter):
a 256Mi limit holds it."""

import yaml

from labkit.exercises import answer_path


def solve(env):
    path = answer_path(env.lab.id, "oom")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"container": "indexer", "cause": "limit"}))
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "shop")
    pod["spec"]["containers"][1]["resources"]["limits"]["memory"] = "256Mi"
    lab.replace_pod(env, "node-1", pod)
    lab.wait_settled(env, "node-1", "shop")
