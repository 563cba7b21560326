"""Near-misses of alice: her RoleBinding with each field dropped or swapped (another role,
namespace, subject kind or name), one more subject (bob, the team's group, every authenticated
user), made cluster-wide; one more binding for somebody else (the team's group, bob,
a ServiceAccount); her certificate with another common name, an organization that puts
her in a group (system:masters, the team's), a key that does not belong to it, not issued by the
cluster, a token instead, a CSR refused for naming system:masters; the answer's path cut short.
The RBAC ones are classified by labkit's reconstruction (what she may do; what anyone else gains)."""

import copy

from labkit.mutants import Mutant, answer_mutants
from labkit.requests import mutate, reconstruct

GROUP = "rbac.authorization.k8s.io"


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    lab = ctx.env.lab.environment_module()
    user, ns = ctx.params["user"], ctx.params["namespace"]
    obs = checks.observe_alice(ctx)
    space = reconstruct.Space.from_observation(obs["space"])
    objects = obs["rbac"]
    her = reconstruct.Subject(user, ("system:authenticated",), f"the user {user}")
    built = lab.rbac_as_built()
    binding = next(o for o in objects if o["kind"] == "RoleBinding" and any(
        s.get("kind") == "User" and s.get("name") == user for s in o.get("subjects") or []))

    def classify(mutated):
        want, got = reconstruct.access(objects, her, space), reconstruct.access(mutated, her, space)
        extra = got - want
        if extra:
            if any(g[1] not in checks.READ_VERBS for g in extra):
                return ("can write",), None
            if any(g[0] != ns for g in extra):
                return ("other namespaces",), None
            if any(g[3] == "secrets" for g in extra):
                return ("secrets",), None
            return ("more than read-only",), None
        if want - got:
            return ("cannot",), None
        for s in mutate.subjects_of(mutated) - {her}:
            allowed = reconstruct.access(built, s, space) | reconstruct.access(objects, s, space)
            if reconstruct.access(mutated, s, space) - allowed:
                return ("also grants",), None
        return (), ("she may do exactly what the reference lets her (every verb, resource and namespace, labkit's "
                    "RBAC resolver), and nobody may do anything the lab as built or the reference does not let them")

    subjects = [{"kind": "User", "apiGroup": GROUP, "name": "bob"},
                {"kind": "Group", "apiGroup": GROUP, "name": lab.TEAM_GROUP},
                {"kind": "Group", "apiGroup": GROUP, "name": "system:authenticated"}]
    for name, change, mutated in mutate.binding_edits(binding, namespaces=["prod", "default"],
                                                      roles=["edit", "admin", "cluster-admin", "vie"],
                                                      subjects=subjects):
        changed = mutate.replace_in(objects, binding, mutated)
        names, equivalent = classify(changed)
        live = mutate.valid_binding(mutated) and name != "cluster-wide"
        yield Mutant(name, change, names=names, observation={**obs, "rbac": changed}, equivalent=equivalent,
                     apply=mutate.live_change(binding, mutated) if live else None)
    # one binding more, for somebody else: what alice may do is the reference's, anyone else gains
    for name, ns_, role, subject in (("team-cluster-admin", None, "cluster-admin", subjects[1]),
                                     ("bob-view-in-prod", "prod", "view", subjects[0]),
                                     ("account-edit-in-dev", ns, "edit",
                                      {"kind": "ServiceAccount", "name": "default", "namespace": "dev"})):
        extra = {"apiVersion": mutate.RBAC, "kind": "RoleBinding" if ns_ else "ClusterRoleBinding",
                 "metadata": {"name": f"more-{name}", **({"namespace": ns_} if ns_ else {})},
                 "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}, "subjects": [subject]}
        changed = mutate.replace_in(objects, None, extra)
        names, equivalent = classify(changed)
        # judged in-process only: a reset of alice reverts the bindings that name her, not these
        yield Mutant(f"more:{name}", f"one more binding: {mutate.ident(extra)}", names=names,
                     observation={**obs, "rbac": changed}, equivalent=equivalent)
    # her certificate and kubeconfig
    cn, orgs = obs["subject"]
    who = obs["whoami"]
    for other in (user.capitalize(), user[:-1], f"{user} smith", ""):
        yield Mutant(f"cn={other}", f"the certificate's CN is {other!r}", names=("common name",),
                     observation={**obs, "subject": [other, orgs],
                                  "whoami": {**who, "username": other or "system:anonymous"}})
    for group in ("system:masters", lab.TEAM_GROUP):
        yield Mutant(f"organization={group}", f"the certificate also has O={group}", names=(group,),
                     observation={**obs, "subject": [cn, [*orgs, group]],
                                  "whoami": {**who, "groups": [group, *who["groups"]]}})
    yield Mutant("csr-refused", "her CSR named O=system:masters: refused at creation, no certificate",
                 names=("no client certificate", "system:masters"),
                 observation={**obs, "certificate": False, "subject": None, "whoami": None,
                              "refused": ['certificatesigningrequests.certificates.k8s.io "alice" is forbidden: use of '
                                          "kubernetes.io/kube-apiserver-client signer with system:masters group is "
                                          "not allowed"]})
    yield Mutant("key-mismatch", "the kubeconfig's key is another key than the certificate's", names=("private key",),
                 observation={**obs, "key_matches": False, "whoami": None})
    yield Mutant("not-issued", "a certificate the cluster did not issue", names=("CertificateSigningRequest",),
                 observation={**obs, "issued": False, "whoami": None})
    yield Mutant("token", "the kubeconfig uses a token", names=("token",), observation={**obs, "token": True})
    yield Mutant("no-certificate", "the kubeconfig has no certificate", names=("no client certificate",),
                 observation={**obs, "certificate": False, "subject": None, "whoami": None})
    yield Mutant("encrypted-key", "the key encrypted with a passphrase", names=("encrypted",),
                 observation={**obs, "encrypted": True, "key_matches": False, "whoami": None})
    yield Mutant("other-server", "the kubeconfig's cluster part names another server", names=("cannot be reached",),
                 observation={**obs, "whoami": {"code": 0, "message": "ConnectionRefusedError", "username": None,
                                                "groups": []}})
    yield Mutant("unauthorized", "the server answers 401", names=("401",),
                 observation={**obs, "whoami": {**who, "code": 401, "username": None}})
    yield from answer_mutants(copy.deepcopy(ctx.answer()), names=lambda e: ("kubeconfig",))
