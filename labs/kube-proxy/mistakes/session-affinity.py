"""Common wrong solutions to session-affinity."""

from labkit.exercises import mistake
from labkit.kubeproxy import live


@mistake("Service api", "sessionAffinity None")
def affinity_on_the_wrong_service(env):
    """Gives ClientIP affinity to Service web instead of api."""
    svc = live.load(env).service("web")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    live.apply_documents(env, [svc], "mistakes/session-affinity.py")


@mistake("Service api", "sessionAffinity None", "rewritten")
def recent_rules_on_one_node_only(env):
    """Writes kube-proxy's `recent` affinity rules by hand, on node1 only, instead of changing the Service."""
    from labkit.kubeproxy.proxier import render
    from labkit.netfilter import parse, restore

    state = live.load(env)
    svc = state.service("api")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    svc["spec"]["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    objects = [o for o in state.objects() if not (o["kind"] == "Service" and o["metadata"]["name"] == "api")] + [svc]
    nat = parse(render(objects, live.proxier_config(state, "node1"))).table("nat")
    chains = [c for c in nat.chains.values() if c.name.startswith(("KUBE-SVC-", "KUBE-SEP-"))
              and any(r.comment and r.comment.startswith("default/api:") for r in c.rules)]
    text = "*nat\n" + "".join(f":{c.name} - [0:0]\n" for c in chains)
    text += "".join(r.text + "\n" for c in chains for r in c.rules) + "COMMIT\n"
    restore(env.netns_name("node1"), text, noflush=True)
