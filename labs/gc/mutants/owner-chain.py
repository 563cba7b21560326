"""Near-misses of the owner-chain answer: each key dropped; the Pod swapped for another of the
same Deployment (equivalent: the chain is the same), for a Pod of another Deployment, or cut;
each UID swapped for the other owner's, the Pod's own, another chain's, the owner's name, or cut."""

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, answer_mutants


def _other_chain(client, ns, app):
    pod = client.list("v1", "pods", ns, label_selector=f"app={app}")[0][0]
    rs_ref = next(r for r in pod["metadata"]["ownerReferences"] if r.get("controller"))
    rs = client.get("apps/v1", "replicasets", rs_ref["name"], ns)
    return pod, rs, rs["metadata"]["ownerReferences"][0]


def mutants(ctx):
    answer = ctx.answer()
    ns, app = ctx.params["namespace"], ctx.params["deployment"]
    client = for_env(ctx.env).client()
    pod = client.get("v1", "pods", answer["pod"], ns)
    rs = client.get("apps/v1", "replicasets", pod["metadata"]["ownerReferences"][0]["name"], ns)
    siblings = [p["metadata"]["name"] for p in client.list("v1", "pods", ns, label_selector=f"app={app}")[0]
                if p["metadata"]["name"] != answer["pod"] and not p["metadata"].get("deletionTimestamp")]
    # a Pod without a Deployment (ReplicaSet worker's), and another Deployment's chain (api):
    # real names and UIDs, but not this chain's
    loose_pod = client.list("v1", "pods", ns, label_selector="app=worker")[0][0]
    other_pod, other_rs, other_dep = _other_chain(client, ns, "api")
    alternatives = {
        "pod": [other_pod["metadata"]["name"], loose_pod["metadata"]["name"], answer["pod"][:-1], ""],
        "replicaset": [answer["deployment"], pod["metadata"]["uid"], other_rs["metadata"]["uid"], rs["metadata"]["name"],
                       answer["replicaset"][:-1], ""],
        "deployment": [answer["replicaset"], pod["metadata"]["uid"], other_dep["uid"], app, answer["deployment"][:-1], ""],
    }
    yield from answer_mutants(answer, alternatives=alternatives, names=lambda e: (e.key,))
    for sibling in siblings[:1]:
        yield Mutant("set:pod=sibling", "answer: another Pod of the same Deployment", answer={**answer, "pod": sibling},
                     equivalent="every Pod of the Deployment has the same ReplicaSet and Deployment as owners "
                                "(its ownerReferences, read live)")
