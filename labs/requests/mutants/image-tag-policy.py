"""Near-misses of the image policy: each field of the policy and of its binding dropped or
swapped (operations, resources — the ephemeralcontainers subresource dropped, every Pod
subresource, every resource — failurePolicy, validationActions, the namespace selected, the
policy named), a second binding everywhere with each action alone, each validation dropped, and each expression's image test narrowed or widened to
one of its parts (a colon anywhere, a digest only, a tag only, always true). Judged by
observation (the policies, bindings and namespaces), classified by labkit's own policy
dispatcher and CEL over references of every shape in every namespace."""

import copy

from labkit.mutants import Mutant, tree_edits
from labkit.requests import mutate, reconstruct

TESTS = ("c.image.contains(':')", "c.image.contains('@')", "c.image.matches(':[\\\\w][\\\\w.-]{0,127}$')",
         "c.image.matches(':[^/]+$')", "true")


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    ns = ctx.params["namespace"]
    obs = checks.observe_image_tag_policy(ctx)
    reference = _table(checks, obs, ns)
    policy, binding = obs["policies"][0], obs["bindings"][0]
    pinned_test = "c.image.contains('@') || c.image.matches(':[\\\\w][\\\\w.-]{0,127}$')"

    def classify(mutated):
        table = _table(checks, mutated, ns)
        if table == reference:
            return (), ("the same verdict (admitted, refused, warned) on every image reference of the corpus, in "
                        "containers and init containers, created and set by an update, in an ephemeral container "
                        "`kubectl debug` adds, on the Pods' other requests, in every namespace and one made later "
                        "(labkit's policy dispatcher and CEL)")
        wrong = sorted((k for k in table if table[k] != reference[k]), key=lambda k: k[0] != ns)
        namespace, image, init = wrong[0]
        if namespace != ns:
            return ({"warned": ("warned",), "audited": ("puts the policy to work", "audit log")}.get(
                table[wrong[0]], ("refused",))), None
        if all(table[k] == "admitted" for k in table if k[0] == ns and k[2] != "side") and \
                not any("Deny" in (b.get("spec") or {}).get("validationActions", []) for b in mutated["bindings"]):
            return ("validationActions",), None
        # the judge's order: creations, then updates, then `kubectl debug`, then the other requests
        mine = [k for k in wrong if k[0] == ns]
        created = [k for k in mine if k[2] in (False, True)]
        if created:
            if any(table[k] == "admitted" and reference[k] != "admitted" for k in created):
                return ("admitted",), None
            return ("refused",), None
        if any(k[2] in ("update", "update-init") for k in mine):
            return ("UPDATE", "operations"), None
        if any(k[2] == "debug" for k in mine):
            return ("ephemeral container", "kubectl debug"), None
        return ("your policy refuses", "matchConstraints"), None

    def spec_edits(obj, alternatives, skip=lambda p: False):
        for edit in tree_edits({"spec": obj["spec"]}, alternatives=alternatives, skip=skip):
            mutated = {**copy.deepcopy(obj), **({"spec": edit.value["spec"]} if "spec" in edit.value else {})}
            if "spec" not in edit.value:
                mutated.pop("spec", None)
            yield edit, mutated

    policy_alternatives = {
        "spec.failurePolicy": ["Ignore"],
        "spec.matchConstraints.resourceRules[].operations[]": ["UPDATE", "DELETE", "*"],
        "spec.matchConstraints.resourceRules[].resources[]": ["pod", "deployments", "*", "pods/*", "*/*"],
        "spec.matchConstraints.resourceRules[].apiGroups[]": ["apps", "*"],
        "spec.matchConstraints.resourceRules[].apiVersions[]": ["v1beta1", "*"],
        "spec.matchConstraints.resourceRules[].scope": ["Cluster"],
        "spec.matchConstraints.matchPolicy": ["Exact"],
    }
    # a message is free text, and the server refuses other values of these fields
    for i, validation in enumerate(policy["spec"]["validations"]):
        expression = validation["expression"]
        policy_alternatives[f"spec.validations[{i}].expression"] = [
            expression.replace(pinned_test, test) for test in TESTS]
    skip = lambda p: p.endswith(".message") or p.endswith("Selector")  # noqa: E731
    for edit, mutated in spec_edits(policy, policy_alternatives, skip):
        changed = {**obs, "policies": [mutated]}
        names, equivalent = classify(changed)
        valid = edit.op != "drop" and edit.after not in ("",) and "drop-item" != edit.op
        yield Mutant(f"policy:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"policy {edit.describe()}", names=names, observation=changed, equivalent=equivalent,
                     apply=mutate.live_change(policy, mutated) if valid and "expression" in edit.path else None)
    binding_alternatives = {
        "spec.validationActions[]": ["Warn", "Audit"],
        "spec.policyName": ["require-image-tags", ""],
        "spec.matchResources.namespaceSelector.matchLabels.kubernetes.io/metadata.name": ["default", "dev", ""],
        "spec.matchResources.matchPolicy": ["Exact"],
    }
    for edit, mutated in spec_edits(binding, binding_alternatives, lambda p: p.endswith("objectSelector")):
        changed = {**obs, "bindings": [mutated]}
        if mutated.get("spec", {}).get("policyName") not in {p["metadata"]["name"] for p in obs["policies"]}:
            yield Mutant(f"binding:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                         f"binding {edit.describe()}", names=("binding",), observation=changed)
            continue
        names, equivalent = classify(changed)
        valid = edit.op == "set" and edit.after != ""
        yield Mutant(f"binding:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"binding {edit.describe()}", names=names, observation=changed, equivalent=equivalent,
                     apply=mutate.live_change(binding, mutated) if valid else None)
    # selected by something other than the name: a label web carries, or a name pattern
    for name, selector in (("label", {"matchLabels": {"pod-labeler": "enabled"}}),
                           ("not-the-others", {"matchExpressions": [{
                               "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                               "values": sorted(n["name"] for n in obs["namespaces"] if n["name"] != ns)}]}),
                           ("name-in", {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                              "values": [ns]}]})):
        mutated = copy.deepcopy(binding)
        mutated["spec"]["matchResources"] = {"namespaceSelector": selector}
        changed = {**obs, "bindings": [mutated]}
        names, equivalent = classify(changed)
        yield Mutant(f"binding:selector-{name}", f"binding namespaceSelector {selector}", names=names,
                     observation=changed, equivalent=equivalent)
    policy_scoped = copy.deepcopy(policy)
    policy_scoped["spec"]["matchConditions"] = [{"name": "web-like",
                                                 "expression": f"request.namespace.startsWith('{ns}')"}]
    unbound = copy.deepcopy(binding)
    unbound["spec"].pop("matchResources", None)
    changed = {**obs, "policies": [policy_scoped], "bindings": [unbound]}
    names, equivalent = classify(changed)
    yield Mutant("policy:condition-prefix", f"policy matchConditions request.namespace.startsWith('{ns}'), bound "
                 "everywhere", names=names, observation=changed, equivalent=equivalent)
    for extra in ("Warn", "Audit"):
        mutated = copy.deepcopy(binding)
        mutated["spec"]["validationActions"] = ["Deny", extra]
        changed = {**obs, "bindings": [mutated]}
        names, equivalent = classify(changed)
        yield Mutant(f"binding:actions=Deny+{extra}", f"binding validationActions [Deny, {extra}]", names=names,
                     observation=changed, equivalent=equivalent)
    # a second binding of the reference policy beside the reference one, without matchResources
    # (every namespace), for each action alone: Audit refuses and warns nothing, yet puts the
    # policy to work on every namespace's Pods
    for extra in ("Deny", "Warn", "Audit"):
        everywhere = copy.deepcopy(binding)
        everywhere["metadata"] = {**everywhere["metadata"], "name": f"{binding['metadata']['name']}-everywhere"}
        everywhere["spec"].pop("matchResources", None)
        everywhere["spec"]["validationActions"] = [extra]
        changed = {**obs, "bindings": [binding, everywhere]}
        names, equivalent = classify(changed)
        yield Mutant(f"binding:extra-everywhere-{extra}", f"a second binding everywhere with validationActions [{extra}]",
                     names=names, observation=changed, equivalent=equivalent)
    yield Mutant("no-binding", "the binding left out", names=("binding",), observation={**obs, "bindings": []},
                 apply=mutate.live_change(binding, None))
    yield Mutant("no-policy", "nothing at all", names=("ValidatingAdmissionPolicy",),
                 observation={**obs, "policies": [], "bindings": []})


def _table(checks, obs, ns) -> dict:
    """(namespace, image, in an init container | update | update-init | debug) and (namespace, request,
    side) -> admitted | refused | warned, by the server's own dispatcher (the judge's corpus in the
    exercise's namespace, created, set by an update, added by `kubectl debug`; the Pods' requests
    that bring no image; two references elsewhere)."""
    namespaces = list(obs["namespaces"]) + checks.namespaces_like(ns, obs["namespaces"])
    registry = reconstruct.Registry(reconstruct.Objects(
        obs["policies"] + obs["bindings"] +
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n["name"], "labels": n["labels"]}}
         for n in namespaces]))
    out = {}
    admin = checks._requester("labkit-admin", ("kubeadm:cluster-admins", "system:authenticated"))
    for image in checks.image_corpus():
        for init, key in ((False, "update"), (True, "update-init")):
            out[(ns, image, key)] = "refused" if checks.update_verdict(registry, admin, ns, image, init) != "admitted" \
                else "admitted"
        out[(ns, image, "debug")] = "refused" if checks.debug_verdict(registry, admin, ns, image) != "admitted" \
            else "admitted"
    for what, attrs in checks.pod_side_requests(ns):
        attrs.user = admin
        out[(ns, what, "side")] = "refused" if reconstruct.policy_verdict(registry, attrs) != "admitted" else "admitted"
    for n in namespaces:
        images = checks.image_corpus() if n["name"] == ns else ("nginx", "registry.example.com:5000/app")
        for image in images:
            for init in ((False, True) if n["name"] == ns else (False,)):
                attrs = reconstruct.pod_attributes(n["name"], checks._image_pod(image, init))
                result = reconstruct.policy_verdict(registry, attrs)
                out[(n["name"], image, init)] = "refused" if result != "admitted" else \
                    "warned" if attrs.warnings and n["name"] != ns else \
                    "audited" if n["name"] != ns and checks._acting_bindings(attrs) else "admitted"
    return out
