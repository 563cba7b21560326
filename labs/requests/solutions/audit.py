"""Reference solution: the first successful delete of configmap shop/prices in the audit log since the
lab set the scene (the one the exercise tells of)."""

import json

from labkit.apiserver.audit import received_at
from labkit.exercises import write_answer


def solve(env):
    lab = env.lab.environment_module()
    user = None
    since = lab.audit_scene_start(env)
    for line in (lab.server_dir(env) / "audit.log").read_text().splitlines():
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name"), e.get("verb")) == \
                ("configmaps", "shop", "prices", "delete") and e["responseStatus"]["code"] < 300 \
                and received_at(e) >= since:
            user = e["user"]["username"]
            break
    write_answer(env, "audit", {"user": user})
