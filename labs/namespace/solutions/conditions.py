"""Reference solution: delete billing, wait for the controller's conditions, write down their counts."""

import re
import time

from labkit.exercises import write_answer


def solve(env):
    c = env.lab.environment_module().client(env)
    c.delete("v1", "namespaces", "billing", options={"propagationPolicy": "Background"})
    deadline = time.monotonic() + 60
    while True:         # pods go first; then the other content is counted
        ns = c.get("v1", "namespaces", "billing")
        conds = {x["type"]: x for x in ns.get("status", {}).get("conditions", [])}
        if conds.get("NamespaceFinalizersRemaining", {}).get("status") == "True" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    remaining = dict(re.findall(r"(\S+) has (\d+) resource instances", conds["NamespaceContentRemaining"]["message"]))
    held = dict(re.findall(r"(\S+) in (\d+) resource instances", conds["NamespaceFinalizersRemaining"]["message"]))
    write_answer(env, "conditions", {"remaining": {k: int(v) for k, v in remaining.items()},
                                     "finalizers": {k: int(v) for k, v in held.items()}})
