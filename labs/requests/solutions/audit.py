"""Reference solution: the newest successful delete of configmap shop/prices in the audit log."""

import json

from labkit.exercises import write_answer


def solve(env):
    lab = env.lab.environment_module()
    user = None
    for line in (lab.server_dir(env) / "audit.log").read_text().splitlines():
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name"), e.get("verb")) == \
                ("configmaps", "shop", "prices", "delete") and e["responseStatus"]["code"] < 300:
            user = e["user"]["username"]
    write_answer(env, "audit", {"user": user})
