"""Near-misses of real pinning, judged on what observe_pin reads of the live node: the answer's Pod
names, process ids and Cpus_allowed_list changed one at a time; the Guaranteed container not
exclusive, on a reserved CPU, widened onto the shared pool; another container (the Burstable one,
the node agent) allowed the exclusive CPU; the Burstable container off the shared pool; a second,
shared container in the Guaranteed Pod; the node agent gone; the kubelet configuration edited.
Applied live: the node agent deleted, the Burstable Pod deleted, the configuration edited."""

import copy

from labkit.mutants import Mutant, tree_edits


def _delete(name, namespace="default"):
    def apply(env):
        from labkit.numa.livenode import LiveNode
        LiveNode(env).delete(name, namespace)
    return apply


def _edit_config(env):
    path = env.dir / "kubelet-config.yaml"
    path.write_text(path.read_text().replace("topologyManagerPolicy: best-effort", "topologyManagerPolicy: restricted"))


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    seen = checks.observe_pin(ctx)
    answer = seen["answer"]
    g_name, b_name = answer["guaranteed"]["pod"], answer["burstable"]["pod"]
    every = sorted(set(seen["shared_pool"]) | {c for x in seen["containers"] for c in x["want_cpus"]})
    lists = sorted({",".join(map(str, every)), *(str(c) for c in every)})

    def changed(fn):
        out = copy.deepcopy(seen)
        fn(out)
        return out

    def containers_of(obs, pod):
        return [c for c in obs["containers"] if c["namespace"] == "default" and c["pod"] == pod]

    # the answer, one field at a time
    alternatives = {"guaranteed.pod": [b_name, "node-agent", g_name[:-1]], "burstable.pod": [g_name, "node-agent", b_name[:-1]],
                    "guaranteed.cpus_allowed_list": [x for x in lists if x != answer["guaranteed"]["cpus_allowed_list"]],
                    "burstable.cpus_allowed_list": [x for x in lists if x != answer["burstable"]["cpus_allowed_list"]]}
    for role in ("guaranteed", "burstable"):
        pid = answer[role]["pid"]
        others = [p for c in seen["containers"] for p in c["pids"] if p != pid]
        alternatives[f"{role}.pid"] = sorted({pid + 1, 1, *others[:2]})
    for edit in tree_edits(answer, alternatives=alternatives):
        role = edit.path.split(".", 1)[0]
        yield Mutant(f"answer:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"answer: {edit.describe()}", names=(role,),
                     observation=changed(lambda o, v=edit.value: o.__setitem__("answer", v)))
    g_pid = answer["guaranteed"]["pid"]
    exclusive = containers_of(seen, g_name)[0]["want_cpus"]
    pool = seen["shared_pool"]

    def set_pids(obs, pod, cpus):
        """The processes of `pod` allowed `cpus`; the answer reads them from /proc as they are now."""
        from labkit.numa.cpuset import format_cpus
        for c in containers_of(obs, pod):
            for pid in c["pids"]:
                c["pids"][pid] = list(cpus)
        for role in ("guaranteed", "burstable"):
            if obs["answer"][role]["pod"] == pod:
                obs["answer"][role]["cpus_allowed_list"] = format_cpus(cpus)

    yield Mutant("g-not-exclusive", "the Guaranteed container in the shared pool", names=("has no exclusive CPUs",),
                 observation=changed(lambda o: [c.update(exclusive=False, want_cpus=pool) for c in containers_of(o, g_name)]))
    yield Mutant("g-widened", "the Guaranteed container's process allowed the shared pool too",
                 names=("not on its exclusive CPUs",), observation=changed(lambda o: set_pids(o, g_name, sorted(set(exclusive) | set(pool)))))
    yield Mutant("g-reserved", "the Guaranteed container holding a reserved CPU", names=("reserved",),
                 observation=changed(lambda o: [c.update(want_cpus=sorted(set(exclusive) | set(o["reserved"])))
                                                for c in containers_of(o, g_name)]))
    yield Mutant("b-on-exclusive", "the Burstable container's process allowed the exclusive CPU",
                 names=("also allowed",), observation=changed(lambda o: set_pids(o, b_name, sorted(set(pool) | set(exclusive)))))
    if len(pool) > 1:       # a machine with more than one CPU in the shared pool
        yield Mutant("b-narrowed", "the Burstable container's process on part of the shared pool only",
                     names=("not on the shared pool",), observation=changed(lambda o: set_pids(o, b_name, pool[:1])))
    yield Mutant("b-elsewhere", "the Burstable container's process on the exclusive CPU only",
                 names=("also allowed",), observation=changed(lambda o: set_pids(o, b_name, exclusive)))
    yield Mutant("agent-on-exclusive", "the node agent allowed the exclusive CPU", names=("also allowed", "node-agent"),
                 observation=changed(lambda o: [c["pids"].update({p: sorted(set(pool) | set(exclusive)) for p in c["pids"]})
                                                for c in o["containers"] if c["pod"] == "node-agent"]))
    yield Mutant("pool-keeps-exclusive", "the shared pool still holding the exclusive CPU", names=("still in the shared pool",),
                 observation=changed(lambda o: o.__setitem__("shared_pool", sorted(set(pool) | set(exclusive)))))

    def sidecar(o):
        first = containers_of(o, g_name)[0]
        o["containers"].append({**copy.deepcopy(first), "container": "side", "exclusive": False, "want_cpus": pool,
                                "pids": {g_pid + 100000: list(pool)}})
    yield Mutant("g-shared-sidecar", "a second container of the Guaranteed Pod in the shared pool",
                 names=("has no exclusive CPUs", "side"), observation=changed(sidecar))
    yield Mutant("agent-deleted", "the node agent deleted", names=("node agent",),
                 observation=changed(lambda o: o.__setitem__("containers", [c for c in o["containers"] if c["pod"] != "node-agent"])),
                 apply=_delete("node-agent", "kube-system"))
    yield Mutant("burstable-deleted", "the Burstable Pod deleted", names=("burstable", "no running Pod"),
                 observation=changed(lambda o: o.__setitem__("containers", [c for c in o["containers"] if c["pod"] != b_name])),
                 apply=_delete(b_name))
    yield Mutant("config-edited", "the live kubelet's Topology Manager switched to restricted",
                 names=("kubelet-config.yaml was changed",),
                 observation=changed(lambda o: o.__setitem__("config", o["config"].replace(
                     "topologyManagerPolicy: best-effort", "topologyManagerPolicy: restricted"))),
                 apply=_edit_config)
