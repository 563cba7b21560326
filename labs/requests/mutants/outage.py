"""Near-misses of the outage fix: each field of the webhook pod-policy dropped or swapped (each
namespace left out of, or swapped in, its namespaceSelector; its operator and key; its rules,
sideEffects, timeout, client configuration), an objectSelector or matchConditions that narrow it
further, failurePolicy Ignore; the other webhook changed or deleted; the backend's Service
changed; the outage never met. Judged by observation (the configurations, namespaces and the
backend's Service), classified by the server's own webhook matching over the exercise's story."""

import copy

from labkit.mutants import Mutant, tree_edits
from labkit.requests import mutate

SAFE = "the webhook still refuses privileged Pods in every application namespace (and one made later) while "\
       "its backend is up, and never blocks the cluster's own namespaces or its backend's Pod while it is down "\
       "(labkit's webhook matching, selectors and matchConditions in CEL, over every namespace, Pod shape and "\
       "backend state)"


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    lab = ctx.env.lab.environment_module()
    webhook, home = ctx.params["webhook"], ctx.params["namespace"]
    obs = checks.observe_outage(ctx)
    configs = obs["configs"]
    vwc = next(c for c in configs["validatingwebhookconfigurations"] if c["metadata"]["name"] == webhook)
    mwc = next(c for c in configs["mutatingwebhookconfigurations"] if c["metadata"]["name"] == lab.DEFAULTS_NAME)
    vwc = {**vwc, "apiVersion": mutate.ADMISSION, "kind": "ValidatingWebhookConfiguration"}
    mwc = {**mwc, "apiVersion": mutate.ADMISSION, "kind": "MutatingWebhookConfiguration"}

    def with_config(resource, old, new):
        items = [c for c in configs[resource] if c["metadata"]["name"] != old["metadata"]["name"]]
        return {**obs, "configs": {**configs, resource: items + ([new] if new is not None else [])}}

    def classify(mutated_config):
        for requirement, ns, _labels, _user, outcome in checks.outage_fates(ctx, obs, mutated_config):
            if requirement == "backend" and outcome == "blocked":
                return ("own backend",), None
            if requirement == "system" and outcome == "blocked":
                return (ns, "still fail"), None
            if requirement == "app" and outcome != "refused":
                return ("no longer applies",), None
            if requirement == "app-down" and outcome == "admitted":
                return ("through unchecked",), None
        return (), SAFE

    hook = vwc["webhooks"][0]
    alternatives = {
        "namespaceSelector.matchExpressions[].operator": ["In"],
        "namespaceSelector.matchExpressions[].key": ["name", "kubernetes.io/metadata.nam"],
        "namespaceSelector.matchExpressions[].values[]": ["shop", "default"],
        "failurePolicy": ["Ignore"],
        "sideEffects": ["NoneOnDryRun"],
        "timeoutSeconds": [1, 30],
        "rules[].operations[]": ["UPDATE", "*"],
        "rules[].resources[]": ["pods/status", "*"],
        "rules[].apiVersions[]": ["*"],
        "matchPolicy": ["Exact"],
        "clientConfig.service.path": ["/mutate", "/"],
        "clientConfig.service.port": [8443],
        "clientConfig.service.name": ["pod-defaults"],
        "clientConfig.service.namespace": ["default"],
    }
    scope = set(checks.SCOPE_FIELDS)
    skip = lambda p: p in ("name", "clientConfig.caBundle", "admissionReviewVersions") or p.endswith(".scope") \
        or p.startswith("objectSelector") or p.startswith("admissionReviewVersions")  # noqa: E731
    for edit in tree_edits(hook, alternatives=alternatives, skip=skip):
        field = edit.path.split(".")[0].split("[")[0]
        mutated = copy.deepcopy(vwc)
        mutated["webhooks"] = [edit.value]
        if edit.op in ("drop", "drop-item") and field in ("rules", "clientConfig", "sideEffects") or \
                (edit.path.startswith("namespaceSelector.matchExpressions[0]") and edit.op == "drop"
                 and not edit.path.endswith("values")) or edit.path == "namespaceSelector.matchExpressions[0].values":
            # what the server's validation refuses: judged on the observation only
            live = False
        else:
            live = edit.op != "swap"
        name = f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
        if checks._normal_hook(edit.value, False) == checks._normal_hook(hook, False):
            names, equivalent = (), f"the server defaults {edit.path} to the value it had (admissionregistration/v1 defaults)"
        elif field in scope:
            names, equivalent = classify(mutated)
        else:
            names, equivalent = (field,), None
        yield Mutant(name, f"{webhook}: {edit.describe()}", names=names, equivalent=equivalent,
                     observation=with_config("validatingwebhookconfigurations", vwc, mutated),
                     apply=mutate.live_change(vwc, mutated) if live else None)
    # narrower still: by the Pod's labels, by CEL
    for name, key, value in (
            ("object-selector-run", "objectSelector", {"matchLabels": {"run": "probe"}}),
            ("object-selector-not-backend", "objectSelector",
             {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["pod-policy"]}]}),
            ("match-conditions-not-shop", "matchConditions",
             [{"name": "not-shop", "expression": "request.namespace != 'shop'"}]),
            ("match-conditions-privileged-only", "matchConditions",
             [{"name": "privileged", "expression": "object.spec.containers.exists(c, has(c.securityContext) && "
                                                   "has(c.securityContext.privileged) && c.securityContext.privileged)"}]),
            ("match-conditions-system-instead", "matchConditions",
             [{"name": "not-system", "expression": "!request.namespace.startsWith('kube-') && "
                                                   "request.namespace != 'policy'"}]),
            # the backend's Pod let through by who creates it, not where: every workload's Pod with it
            ("match-conditions-not-controllers", "matchConditions",
             [{"name": "not-controllers",
               "expression": "!request.userInfo.username.startsWith('system:serviceaccount:kube-system:')"}]),
            ("match-conditions-not-replicasets", "matchConditions",
             [{"name": "not-replicasets",
               "expression": "request.userInfo.username != 'system:serviceaccount:kube-system:replicaset-controller'"}]),
            ("match-conditions-not-service-accounts", "matchConditions",
             [{"name": "not-service-accounts", "expression": "!('system:serviceaccounts' in request.userInfo.groups)"}]),
            # the narrow exemption: the backend's own Pods only (its namespace and its controller)
            ("match-conditions-backend-only", "matchConditions",
             [{"name": "not-the-backend",
               "expression": "!(request.namespace == 'policy' && request.userInfo.username == "
                             "'system:serviceaccount:kube-system:replicaset-controller')"}])):
        mutated = copy.deepcopy(vwc)
        mutated["webhooks"][0][key] = value
        if name == "match-conditions-system-instead":
            mutated["webhooks"][0].pop("namespaceSelector")
        if name.startswith(("match-conditions-not-", "match-conditions-backend")) and name != "match-conditions-not-shop":
            # with the cluster's own namespaces left out by the selector, the backend's by the condition
            expressions = mutated["webhooks"][0]["namespaceSelector"]["matchExpressions"]
            expressions[0] = {**expressions[0], "values": [v for v in expressions[0]["values"] if v != home]}
        names, equivalent = classify(mutated)
        yield Mutant(name, f"{webhook}: {key} {value}", names=names, equivalent=equivalent,
                     observation=with_config("validatingwebhookconfigurations", vwc, mutated))
    # the other webhook
    for field, value in (("failurePolicy", "Fail"), ("namespaceSelector", {"matchLabels": {"a": "b"}}),
                         ("timeoutSeconds", 1)):
        mutated = copy.deepcopy(mwc)
        mutated["webhooks"][0][field] = value
        yield Mutant(f"pod-defaults:{field}", f"{lab.DEFAULTS_NAME}: {field} {value}", names=(lab.DEFAULTS_NAME,),
                     observation=with_config("mutatingwebhookconfigurations", mwc, mutated),
                     apply=mutate.live_change(mwc, mutated))
    yield Mutant("pod-defaults-deleted", f"{lab.DEFAULTS_NAME} deleted", names=("deleted",),
                 observation=with_config("mutatingwebhookconfigurations", mwc, None))
    yield Mutant("pod-policy-deleted", f"{webhook} deleted", names=("deleted",),
                 observation=with_config("validatingwebhookconfigurations", vwc, None))
    # the backend's Service, and the story
    service = obs["service"]
    yield Mutant("service-selector", "the Service selects nothing", names=("Service",),
                 observation={**obs, "service": {**service, "selector": {"app": "nothing"}}})
    yield Mutant("service-port", "the Service's port changed", names=("Service",),
                 observation={**obs, "service": {**service, "ports": [{**service["ports"][0], "port": 8443}]}})
    yield Mutant("service-deleted", "the Service deleted", names=("Service",), observation={**obs, "service": None})
    yield Mutant("outage-not-met", "the fix made before meeting the outage", names=("outage",),
                 observation={**obs, "met": False})
