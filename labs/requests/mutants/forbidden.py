"""Near-misses of the fixed RoleBinding: each field of the binding dropped or swapped (another
namespace, role, subject kind, name or namespace), one more subject (the groups the
ServiceAccount is in, other accounts), the binding made cluster-wide; the Role changed; one more
binding that grants the job more (the ClusterRole view in shop, as reported, edit, cluster-wide
view), or somebody else something (bob cluster-admin, the account default view in prod).
Judged by observation (the RBAC objects), each classified by labkit's reconstruction: what the
job may do, what anyone else gains."""

import copy

from labkit.mutants import Mutant, tree_edits
from labkit.requests import mutate, reconstruct

GROUP = "rbac.authorization.k8s.io"


def _bind(name, ns, kind, role, subject):
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": mutate.RBAC, "kind": "RoleBinding" if ns else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role}, "subjects": [subject]}


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    lab = ctx.env.lab.environment_module()
    ns, account, role_name = ctx.params["namespace"], ctx.params["account"], ctx.params["role"]
    obs = checks.observe_forbidden(ctx)
    space = reconstruct.Space.from_observation(obs["space"])
    objects = obs["rbac"]
    job = reconstruct.Subject.of({"kind": "ServiceAccount", "name": account, "namespace": ns})
    built = lab.rbac_as_built()
    binding = next(o for o in objects if mutate.ident(o) == ("RoleBinding", ns, lab.BINDING["metadata"]["name"]))
    role = next(o for o in objects if mutate.ident(o) == ("Role", ns, role_name))
    sa = {"kind": "ServiceAccount", "name": account, "namespace": ns}

    def classify(mutated):
        """(names, equivalent) by the reconstruction: the job's access against the reference's;
        everyone's against the lab as built and the reference."""
        want, got = reconstruct.access(objects, job, space), reconstruct.access(mutated, job, space)
        if got - want:
            return ("nothing more",), None
        if want - got:
            return ("still forbidden",), None
        for s in mutate.subjects_of(mutated) - {job}:
            allowed = reconstruct.access(built, s, space) | reconstruct.access(objects, s, space)
            if reconstruct.access(mutated, s, space) - allowed:
                return ("also grants",), None
        without = [o for o in built if not (o["kind"] == "RoleBinding" and o["metadata"] == lab.BINDING["metadata"])]
        for subject in lab.BINDING["subjects"]:        # the binding's wrong subject, kept beside the right one
            wrong = reconstruct.Subject.of(subject)
            if reconstruct.access(mutated, wrong, space) - reconstruct.access(without, wrong, space):
                return ("the subject that was wrong",), None
        return (), ("the job may do exactly what the reference lets it (every verb, resource and namespace, "
                    "labkit's RBAC resolver), through a binding of the Role, nobody may do anything the lab "
                    "as built or the reference does not let them, and the binding's wrong subject gets nothing")

    def make(name, change, old, new, live=True):
        mutated = mutate.replace_in(objects, old, new)
        names, equivalent = classify(mutated)
        apply = mutate.live_change(old, new) if live and (new is None or new["kind"] not in (
            "RoleBinding", "ClusterRoleBinding") or mutate.valid_binding(new)) else None
        return Mutant(name, change, names=names, observation={**obs, "rbac": mutated}, apply=apply,
                      equivalent=equivalent)

    subjects = [{"kind": "Group", "apiGroup": GROUP, "name": f"system:serviceaccounts:{ns}"},
                {"kind": "Group", "apiGroup": GROUP, "name": "system:serviceaccounts"},
                {"kind": "Group", "apiGroup": GROUP, "name": "system:authenticated"},
                {"kind": "ServiceAccount", "name": "default", "namespace": ns},
                {"kind": "ServiceAccount", "name": account, "namespace": "default"}]
    for name, change, mutated in mutate.binding_edits(binding, namespaces=["default", "dev"],
                                                      roles=["view", "edit", "admin"], subjects=subjects):
        if name == "set:roleRef.kind=ClusterRole" or name == "cluster-wide":
            yield make(name, change, binding, mutated, live=False)
        else:
            yield make(name, change, binding, mutated)
    # the Role: every rule field widened or narrowed
    for edit in tree_edits({"rules": role["rules"]}, alternatives={
            "rules[].verbs[]": ["*", "delete", "create"], "rules[].resources[]": ["*", "secrets", "pods/log"],
            "rules[].apiGroups[]": ["*", "apps"]}):
        mutated = {k: v for k, v in copy.deepcopy(role).items() if k != "rules"}
        if "rules" in edit.value:
            mutated["rules"] = edit.value["rules"]
        valid = edit.op == "set" and edit.after != ""       # what the server's validation lets through
        yield Mutant(f"role:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"the Role {edit.describe()}", names=("role", "changed"),
                     observation={**obs, "rbac": mutate.replace_in(objects, role, mutated)},
                     apply=mutate.live_change(role, mutated) if valid else None)
    # one binding more
    for name, extra in (("reported-view-in-shop", _bind("reporter-view", ns, "ClusterRole", "view", sa)),
                        ("edit-in-shop", _bind("reporter-edit", ns, "ClusterRole", "edit", sa)),
                        ("view-cluster-wide", _bind("reporter-view", None, "ClusterRole", "view", sa)),
                        ("pod-reader-for-all-accounts", _bind("all-read-pods", ns, "Role", role_name, subjects[0])),
                        ("bob-cluster-admin", _bind("bob-admin", None, "ClusterRole", "cluster-admin",
                                                    {"kind": "User", "apiGroup": GROUP, "name": "bob"})),
                        ("default-account-view-in-prod", _bind("default-view", "prod", "ClusterRole", "view",
                                                               subjects[3]))):
        # a cluster-wide grant to somebody else is no binding a reset of this exercise reverts: in-process only
        yield make(f"more:{name}", f"one more binding: {mutate.ident(extra)}", None, extra,
                   live=name != "bob-cluster-admin")
    # a new binding for the job, the broken one left as it was
    kept = mutate.replace_in(mutate.replace_in(objects, binding, copy.deepcopy(lab.BINDING)), None,
                             _bind("reporter-reads-pods-2", ns, "Role", role_name, sa))
    names, equivalent = classify(kept)
    yield Mutant("new-binding-broken-kept", "a new correct binding; the broken one left as it was", names=names,
                 observation={**obs, "rbac": kept}, equivalent=equivalent)
