"""Reference solution: force-finalize legacy (the wrong fix, on purpose), list what it left in
storage under that name, create the namespace again and see the old objects in it (the new
namespace's own ServiceAccount and root CA ConfigMap, made by their controllers, are younger)."""

import time

from labkit.exercises import write_answer


def solve(env):
    lab = env.lab.environment_module()
    c = lab.client(env)
    lab.finalize(env, "legacy", [])
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    time.sleep(1.1)         # the new namespace is created in a later second than the force-finalize
    c.create("v1", "namespaces", {"metadata": {"name": "legacy"}})
    found = c.discover()
    left = []
    for r in found.resources:
        if not r.namespaced or "list" not in r.verbs or found.preferred.get(r.group) != r.version \
                or r.resource == "events":
            continue
        for item in c.list(r.api_version, r.resource, "legacy")[0]:
            if item["metadata"]["creationTimestamp"][:19] > cutoff:
                continue
            left.append(f"{r.resource}.{r.group}/{item['metadata']['name']}" if r.group else
                        f"{r.resource}/{item['metadata']['name']}")
    write_answer(env, "force-finalize", {"left_behind": sorted(left), "visible_again": bool(left)})
