"""What labkit's own tools hold back until a prediction is written.

The kube-proxy lab's traffic-policy exercise asks the student to *predict*, for Services
shop-cluster and shop-local, whether the client's request to each node's NodePort is answered and
which address the pod sees, and only then to observe. `labkit kube-proxy curl` from the client and
`labkit trace` of a client's packet on a node's live rules would show exactly that outcome, so
both withhold it until the exercise's answer file holds a prediction (a mapping for both
Services); afterwards they show everything. The check grades the prediction against the lab as
built, whatever the tools showed.
"""

from __future__ import annotations

import yaml

from labkit.exercises import answer_path

EXERCISE = "traffic-policy"


def prediction_written(env) -> bool:
    exercise = env.lab.exercise(EXERCISE)
    try:
        data = yaml.safe_load(answer_path(env.lab.id, EXERCISE).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    names = (exercise.params["cluster_service"], exercise.params["local_service"])
    return isinstance(data, dict) and all(isinstance(data.get(n), dict) for n in names)


def withheld(env, state, src: str | None, dst: str, dport: int) -> str | None:
    """Why a request or trace from `src` to dst:dport is withheld, or None. `src` None: the
    client's own first address."""
    if env.lab.id != "kube-proxy":
        return None
    try:
        exercise = env.lab.exercise(EXERCISE)
    except Exception:
        return None
    client = next((h for h in state.hosts if h["name"] == "client"), None)
    if client is None or (src is not None and src not in client["addresses"]):
        return None
    nodes = {state.node_address(n) for n in state.node_names()}
    if dst not in nodes:
        return None
    names = (exercise.params["cluster_service"], exercise.params["local_service"])
    ports = {p.get("nodePort") for n in names if state.service(n) for p in state.service(n)["spec"].get("ports") or []}
    if dport not in ports or prediction_written(env):
        return None
    return (f"what the client gets at {dst}:{dport} is what exercise {EXERCISE} asks you to predict: write your "
            f"prediction to {answer_path(env.lab.id, EXERCISE)} first (`labkit show kube-proxy {EXERCISE}`), then "
            "observe")
