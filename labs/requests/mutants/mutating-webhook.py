"""Near-misses of the labelling webhook: each field of its registration dropped or swapped (the
namespaceSelector's key and value, the operations and resources of its rules, failurePolicy,
sideEffects, timeout), an objectSelector or matchCondition that skips Pods by their labels, the
registration gone; what the webhook answers changed one Pod at a time
(the label missing or with another value, the value a Pod was sent with kept, the Pod's own labels
lost, one label more, an error, a Pod elsewhere labelled too); and, applied live, a registration that cannot reach it. The
registrations are classified by the server's own webhook matching over every namespace and
namespaces made later, labelled or not."""

import copy

from labkit.mutants import Mutant, tree_edits
from labkit.requests import mutate, reconstruct


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    ns, label, value, enabler = (ctx.params[k] for k in ("namespace", "label", "value", "enabler"))
    obs = checks.observe_mutating_webhook(ctx)
    config = obs["configurations"][0]

    def scope(configuration):
        """(namespace, labels case) -> sent, over the namespaces and two made later."""
        namespaces = list(obs["namespaces"]) + checks.later_namespaces(enabler)
        registry = reconstruct.Registry(reconstruct.Objects(
            [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n["name"], "labels": n["labels"]}}
             for n in namespaces]))
        out = {}
        for n in namespaces:
            for case, labels in checks.probe_pods(label).items():
                attrs = reconstruct.pod_attributes(n["name"], checks._pod(labels), dry_run=True)
                out[(n["name"], case)] = any(
                    reconstruct.webhook_called(registry, configuration["metadata"]["name"], i, h, attrs) != "skipped"
                    for i, h in enumerate(configuration.get("webhooks") or []))
        for case, labels in checks.probe_pods(label).items():      # every request that is not a Pod creation
            for attrs in reconstruct.other_requests(ns, labels):
                out[(ns, case, attrs.operation, attrs.rt.resource, attrs.subresource)] = any(
                    reconstruct.webhook_called(registry, configuration["metadata"]["name"], i, h, attrs) != "skipped"
                    for i, h in enumerate(configuration.get("webhooks") or []))
        return out

    reference = scope(config)
    hook = config["webhooks"][0]
    alternatives = {
        "namespaceSelector.matchLabels.pod-labeler": ["enable", ""],
        "failurePolicy": ["Ignore"],
        "sideEffects": ["NoneOnDryRun"],
        "timeoutSeconds": [1, 30],
        "rules[].operations[]": ["UPDATE", "*"],
        "rules[].resources[]": ["pods/status", "deployments", "*"],
        "rules[].apiGroups[]": ["apps", "*"],
        "rules[].apiVersions[]": ["v1beta1", "*"],
        "matchPolicy": ["Exact"],
    }
    skip = lambda p: p in ("name", "admissionReviewVersions", "reinvocationPolicy") or p.startswith("clientConfig") \
        or p.endswith(".scope") or p.startswith("objectSelector") or p.startswith("admissionReviewVersions")  # noqa: E731
    for edit in tree_edits(hook, alternatives=alternatives, skip=skip):
        if edit.op == "drop" and edit.path == "sideEffects":
            continue        # required in admissionregistration/v1: the server refuses a registration without it
        mutated = copy.deepcopy(config)
        mutated["webhooks"] = [edit.value]
        changed = {**obs, "configurations": [mutated]}
        mine = scope(mutated)
        if mine != reference:
            wider = any(mine[k] and not reference[k] for k in reference if len(k) > 2)
            names, equivalent = ("also asked about",) if wider else ("sent to your webhook",), None
        else:
            names, equivalent = (), ("sent the same requests (labkit's webhook matching over every namespace and "
                                     "namespaces made later, labelled or not); the webhook answers every one of them, "
                                     "so failurePolicy and timeout never come into play; a dry run is safe")
        valid = edit.op == "set" and edit.after != "" or edit.path in ("namespaceSelector", "failurePolicy")
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"registration: {edit.describe()}", names=names, equivalent=equivalent, observation=changed,
                     apply=mutate.live_change({**config, "apiVersion": mutate.ADMISSION,
                                               "kind": "MutatingWebhookConfiguration"},
                                              {**mutated, "apiVersion": mutate.ADMISSION,
                                               "kind": "MutatingWebhookConfiguration"}) if valid else None)
    # selectors that take web and more: the key alone, any value but one
    for name, selector in (("exists", {"matchExpressions": [{"key": enabler, "operator": "Exists"}]}),
                           ("not-disabled", {"matchExpressions": [{"key": enabler, "operator": "NotIn",
                                                                   "values": ["disabled"]}]}),
                           ("in-enabled", {"matchExpressions": [{"key": enabler, "operator": "In",
                                                                 "values": ["enabled"]}]})):
        mutated = copy.deepcopy(config)
        mutated["webhooks"][0]["namespaceSelector"] = selector
        mine = scope(mutated)
        names, equivalent = (("sent to your webhook",), None) if mine != reference else \
            ((), "the same namespaces selected (labkit's webhook matching over every namespace and namespaces made "
                 "later: labelled enabled, another value, not at all)")
        yield Mutant(f"selector:{name}", f"registration: namespaceSelector {selector}", names=names,
                     equivalent=equivalent, observation={**obs, "configurations": [mutated]})
    # registrations that skip some Pods of the labelled namespaces by their labels: `kubectl run`'s
    # run=<name>, a controller's template labels, the probes' own
    for name, field, value_ in (
            ("object:run-absent", "objectSelector", {"matchExpressions": [{"key": "run", "operator": "DoesNotExist"}]}),
            ("object:tier-not-frontend", "objectSelector",
             {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["frontend"]}]}),
            ("object:app-absent", "objectSelector", {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}),
            # a Pod sent with the exercise's label (another owner) is left as it is
            ("object:owner-absent", "objectSelector",
             {"matchExpressions": [{"key": label, "operator": "DoesNotExist"}]}),
            ("condition:not-run", "matchConditions",
             [{"name": "not-kubectl-run", "expression": "!has(object.metadata.labels) || !('run' in object.metadata.labels)"}])):
        mutated = copy.deepcopy(config)
        mutated["webhooks"][0][field] = value_
        yield Mutant(f"selector:{name}", f"registration: {field} {value_}", names=("objectSelector", "whatever its labels"),
                     observation={**obs, "configurations": [mutated]},
                     apply=mutate.live_change({**config, "apiVersion": mutate.ADMISSION,
                                               "kind": "MutatingWebhookConfiguration"},
                                              {**mutated, "apiVersion": mutate.ADMISSION,
                                               "kind": "MutatingWebhookConfiguration"}))
    # Pods that already say the right owner are not sent: nothing would change for them
    mutated = copy.deepcopy(config)
    mutated["webhooks"][0]["objectSelector"] = {"matchExpressions": [{"key": label, "operator": "NotIn",
                                                                      "values": [value]}]}
    yield Mutant("selector:object:owner-not-right", f"registration: objectSelector {label} NotIn [{value}]",
                 equivalent="every Pod that is not sent already carries the label with the owner's value: the webhook "
                            "would add nothing to it (labkit's webhook matching over every label set of the check's "
                            "space)", observation={**obs, "configurations": [mutated]})
    # the Pods and every subresource of theirs: evictions and bindings are creations too
    mutated = copy.deepcopy(config)
    mutated["webhooks"][0]["rules"] = [{**r, "resources": ["pods", "pods/*"]} for r in hook["rules"]]
    yield Mutant("rules:pods-and-subresources", "registration: resources [pods, pods/*]", names=("also asked about",),
                 observation={**obs, "configurations": [mutated]},
                 apply=mutate.live_change({**config, "apiVersion": mutate.ADMISSION, "kind": "MutatingWebhookConfiguration"},
                                          {**mutated, "apiVersion": mutate.ADMISSION,
                                           "kind": "MutatingWebhookConfiguration"}))
    yield Mutant("no-registration", "no registration", names=("no MutatingWebhookConfiguration",),
                 observation={**obs, "configurations": []})
    # what the webhook answered, one Pod at a time
    later = {n["name"] for n in checks.later_namespaces(enabler)}
    for key, probe in sorted(obs["probes"].items()):
        where, case, *stored = key.split("/")
        got = probe["labels"] or {}
        if stored == ["controller"]:
            # the same stored creation, sent by the ReplicaSet controller (a Deployment's Pod): it
            # must come back as the admin's did
            for name, labels, said in (("label-missing", {k: v for k, v in got.items() if k != label}, "without"),
                                       ("label-value", {**got, label: value[:-1]}, "without"),
                                       ("one-more-label", {**got, "example.com/extra": "x"}, "other labels")):
                yield Mutant(f"probe:{key}:{name}", f"the Pod {case} the ReplicaSet controller creates in {where} "
                             f"came back with {labels}", names=("ReplicaSet controller", said),
                             observation={**obs, "probes": {**obs["probes"], key: {**probe, "labels": labels}}})
            yield Mutant(f"probe:{key}:error", f"creating the Pod {case} in {where} as the ReplicaSet controller failed",
                         names=("ReplicaSet controller", "would fail"),
                         observation={**obs, "probes": {**obs["probes"], key: {"code": 500, "labels": None,
                                                                               "message": "Internal error occurred",
                                                                               "rest": None}}})
            continue
        if stored:
            # the same creation, not a dry run (stored): it must come back as its dry run did
            for name, labels in (("label-missing", {k: v for k, v in got.items() if k != label}),
                                 ("label-value", {**got, label: value[:-1]}),
                                 ("one-more-label", {**got, "example.com/extra": "x"})):
                yield Mutant(f"probe:{key}:{name}", f"the Pod {case} created in {where}, stored, came back with {labels}",
                             names=("not a dry run", "other labels than its dry run"),
                             observation={**obs, "probes": {**obs["probes"], key: {**probe, "labels": labels}}})
            yield Mutant(f"probe:{key}:error", f"creating the Pod {case} in {where}, stored, failed",
                         names=("not a dry run", "would fail"),
                         observation={**obs, "probes": {**obs["probes"], key: {"code": 500, "labels": None,
                                                                               "message": "Internal error occurred",
                                                                               "rest": None}}})
            continue
        if where in later:
            # what the webhook answers for a namespace made later with the label (the dispatcher's
            # call): the label missing there (a webhook that decides by the namespace's name), an error
            for name, labels in (("label-missing", {k: v for k, v in got.items() if k != label}),
                                 ("own-labels-lost", {label: value})):
                if name == "own-labels-lost" and case != "own-labels":
                    continue
                yield Mutant(f"probe:{key}:{name}", f"the Pod {case} in a namespace made later came back with {labels}",
                             names=("made later", "without the label"),
                             observation={**obs, "probes": {**obs["probes"], key: {**probe, "labels": labels}}})
            yield Mutant(f"probe:{key}:error", f"creating the Pod {case} in a namespace made later failed",
                         names=("made later", "would fail"),
                         observation={**obs, "probes": {**obs["probes"], key: {"code": 500, "labels": None,
                                                                               "message": "Internal error occurred",
                                                                               "rest": None}}})
            continue
        variants = []
        if where == ns:
            variants += [("label-missing", {k: v for k, v in got.items() if k != label}, ("without the label",)),
                         ("label-value", {**got, label: value[:-1]}, ("without the label",)),
                         ("one-more-label", {**got, "example.com/extra": "x"}, ("nobody asked for",))]
            if case == "own-labels":
                variants.append(("own-labels-lost", {label: value}, ("lost",)))
            if case == "owner-set":     # the label the Pod was sent with kept, not set to the owner
                variants.append(("owner-kept", {**got, label: checks.OTHER_OWNER}, ("still", "already")))
            rest = probe["rest"]
            for part, changed in (("annotations", {**rest, "annotations": {**rest["annotations"], "x": "y"}}),
                                  ("spec", {**rest, "spec": {**rest["spec"], "containers": [
                                      {**rest["spec"]["containers"][0], "image": "nginx:latest"}]}})):
                yield Mutant(f"probe:{key}:{part}-changed", f"the Pod {case} in {where} came back with its {part} "
                             "changed", names=(part, "more than the labels"),
                             observation={**obs, "probes": {**obs["probes"], key: {**probe, "rest": changed}}})
        else:
            variants.append(("labelled-elsewhere", {**got, label: value}, ("every namespace",)))
        for name, labels, names in variants:
            yield Mutant(f"probe:{key}:{name}", f"the Pod {case} in {where} came back with {labels}", names=names,
                         observation={**obs, "probes": {**obs["probes"], key: {**probe, "labels": labels}}})
        yield Mutant(f"probe:{key}:error", f"creating the Pod {case} in {where} failed", names=("failed",),
                     observation={**obs, "probes": {**obs["probes"], key: {"code": 500, "labels": None,
                                                                           "message": "Internal error occurred"}}})

    # applied live only: a registration that cannot reach the webhook
    def unreachable(change):
        def apply(env):
            lab = env.lab.environment_module()
            c = lab.client(env)
            live = c.get(mutate.ADMISSION, "mutatingwebhookconfigurations", config["metadata"]["name"])
            change(live["webhooks"][0]["clientConfig"])
            c.update(mutate.ADMISSION, "mutatingwebhookconfigurations", live)
        return apply
    url = hook["clientConfig"]["url"]
    host, _, rest = url.rpartition(":")
    port, _, path = rest.partition("/")
    yield Mutant("live:wrong-port", "the registration's url names another port", names=("failed",),
                 apply=unreachable(lambda cc: cc.update(url=f"{host}:{int(port) + 1}/{path}")))
    yield Mutant("live:no-ca", "the registration has no caBundle", names=("failed",),
                 apply=unreachable(lambda cc: cc.pop("caBundle", None)))
