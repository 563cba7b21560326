"""Near-misses of own-scheduler, on the observation of the solved lab: each Pod's node swapped for
every other Node (proven equivalent when labkit's reconstruction of the default profile's Filter
plugins lets every Pod through where it then is: any placement that fits is right), each Pod's
binding missing or sent by hand, its schedulerName, requests, tolerations or nodeSelector changed, the Pod gone,
unbound with the scheduler running or not, a large Pod bound beside them; the check's test Pod
(on two Nodes made for it) left Pending, bound without the program's binding, or placed on the
cordoned test Node or on node-e (too little CPU), the scheduler stopped before the test. Two are
also made live: a Pod deleted, and a Pod made again with the scheduler stopped."""

import copy
import json

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant
from labkit.scheduler import own


def _delete_job(env):
    for_env(env).kubectl("delete", "pod", "job-1", "-n", "sched", "--force", "--grace-period=0")


def _pending_again(env):
    own.stop(env)
    target = for_env(env)
    target.kubectl("delete", "pod", "job-3", "-n", "sched", "--force", "--grace-period=0")
    target.kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(env.lab.environment_module().job_pod("job-3")))


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    obs = checks.observe_own_scheduler(ctx)
    nodes = [n["metadata"]["name"] for n in obs["nodes"]]

    def fits(o) -> bool:
        return checks.judge_own_scheduler(ctx, o).status == "pass"

    def jobs(o, job, **changes):
        out = copy.deepcopy(o)
        out["jobs"][job].update(changes)
        return out
    for job, view in obs["jobs"].items():
        for node in nodes:
            if node == view["nodeName"]:
                continue
            moved = jobs(obs, job, nodeName=node)
            same = fits(moved)
            yield Mutant(f"{job}:node={node}", f"{job} bound to {node}", names=() if same else (job, node),
                         observation=moved, equivalent="every Pod passes the default profile's Filter plugins where "
                                                       "it is (labkit's reconstruction): a scheduler may pick any "
                                                       "node that fits" if same else None)
        yield Mutant(f"{job}:no-binding", f"{job} bound without a binding", names=(job, "without a binding"),
                     observation={**obs, "bindings": [b for b in obs["bindings"] if b != job]})
        yield Mutant(f"{job}:bound-by-hand", f"{job} bound by a binding sent by hand, not by the program",
                     names=(job, "by hand"),
                     observation={**obs, "bindings": [b for b in obs["bindings"] if b != job],
                                  "by_hand": sorted({*obs.get("by_hand", ()), job})})
        for key, value in (("schedulerName", "default-scheduler"), ("requests", [{"cpu": "1", "memory": "512Mi"}]),
                           ("nodeSelector", {}), ("tolerations", [{"operator": "Exists"}])):
            yield Mutant(f"{job}:{key}", f"{job}'s {key} changed", names=(job, key),
                         observation=jobs(obs, job, **{key: value}))
        yield Mutant(f"{job}:gone", f"{job} deleted", names=(job, "gone"),
                     observation={**obs, "jobs": {**obs["jobs"], job: None}},
                     apply=_delete_job if job == "job-1" else None)
        yield Mutant(f"{job}:pending-stopped", f"{job} Pending, the scheduler stopped", names=(job, "not running"),
                     observation={**jobs(obs, job, nodeName=None), "running": False},
                     apply=_pending_again if job == "job-3" else None)
        yield Mutant(f"{job}:pending-running", f"{job} Pending, the scheduler running", names=(job, "not bound yet"),
                     observation={**jobs(obs, job, nodeName=None), "running": True})
    for node in ("node-b", "node-e"):
        big = {"name": "hog", "namespace": "default", "nodeName": node, "schedulerName": "default-scheduler",
               "nodeSelector": {}, "tolerations": [], "requests": [{"cpu": "3", "memory": "1Gi"}]}
        yield Mutant(f"hog-on-{node}", f"a 3-CPU Pod bound to {node} too", names=("Insufficient cpu",),
                     observation={**obs, "others": [*obs["others"], big]})
    probe = obs["probe"]
    by_name = {n["metadata"]["name"]: n for n in obs["nodes"]}

    def probe_on(node_view, others):
        return {**obs, "probe": {**probe, "pod": {**probe["pod"], "nodeName": node_view["metadata"]["name"]},
                                 "placement": {"node": node_view, "others": others}}}
    cordoned = copy.deepcopy(probe["placement"]["node"])
    cordoned["metadata"]["name"] = probe["cordoned"]
    cordoned["spec"]["unschedulable"] = True
    yield Mutant("probe:cordoned", "the test Pod bound to the cordoned test Node", names=("NodeUnschedulable",),
                 observation=probe_on(cordoned, []))
    tainted = copy.deepcopy(probe["placement"]["node"])
    tainted["metadata"]["name"] = probe["tainted"]
    tainted["spec"]["taints"] = [dict(checks.PROBE_TAINT)]
    yield Mutant("probe:tainted", "the test Pod bound to the tainted test Node", names=("TaintToleration",),
                 observation=probe_on(tainted, []))
    on_e = [v for v in (*obs["others"], *obs["jobs"].values()) if v["nodeName"] == "node-e"]
    yield Mutant("probe:node-e", "the test Pod bound to node-e (a node the scheduler was written for)",
                 names=("Insufficient cpu", "node names"), observation=probe_on(by_name["node-e"], on_e))
    yield Mutant("probe:pending", "the test Pod left Pending", names=("did not bind", "test Pod"),
                 observation={**obs, "probe": {**probe, "pod": {**probe["pod"], "nodeName": None}, "placement": None}})
    yield Mutant("probe:no-binding", "the test Pod bound without the program's binding", names=("without a binding",),
                 observation={**obs, "probe": {**probe, "bound_by": []}})
    yield Mutant("probe:not-running", "the scheduler stopped once the jobs were bound", names=("not running",),
                 observation={**obs, "running": False, "probe": None})
