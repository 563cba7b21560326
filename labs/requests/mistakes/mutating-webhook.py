"""Common wrong webhooks of mutating-webhook: each is served by the lab's runner and registered."""

from labkit.exercises import mistake

ANSWER = '''\
import base64
import json


def answer(request, patch):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch",
                         "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}
'''
SELECTOR = {"matchLabels": {"pod-labeler": "enabled"}}


def _serve(env, body, **register):
    lab = env.lab.environment_module()
    served = lab.serve_webhook(env, ANSWER + body)
    lab.register_mutating(env, served, **{"namespace_selector": SELECTOR, **register})


@mistake("replaced")
def replaces_all_labels(env):
    """Adds /metadata/labels as a whole every time: the Pod's own labels are gone."""
    _serve(env, '''
def review(review):
    request = review["request"]
    return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
''')


@mistake("could not be applied")
def unescaped_slash(env):
    """Writes the label's key into the patch path as it is: /metadata/labels/example.com/owner."""
    _serve(env, '''
def review(review):
    request = review["request"]
    if request["object"]["metadata"].get("labels") is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com/owner", "value": "web-team"}])
''')


@mistake("without labels")
def assumes_labels_exist(env):
    """Always adds the one label, also to a Pod that has no metadata.labels."""
    _serve(env, '''
def review(review):
    request = review["request"]
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
''')


@mistake("every namespace")
def no_namespace_selector(env):
    """Right webhook, registered without a namespaceSelector."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    lab.register_mutating(env, served)



@mistake("sent to your webhook", "namespaceSelector")
def selects_web_by_name(env):
    """Selects the namespace web by its name instead of by the label pod-labeler=enabled: a namespace
    labelled later is left out."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    lab.register_mutating(env, served, namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": "web"}})


@mistake("spec", "more than the labels")
def pins_the_image_too(env):
    """Adds the label, and while at it rewrites every container's image to a pinned one."""
    _serve(env, '''
def review(review):
    request = review["request"]
    pod = request["object"]
    patch = [{"op": "replace", "path": f"/spec/containers/{i}/image", "value": "nginx:1.27.0"}
             for i, _ in enumerate(pod["spec"]["containers"])]
    if pod["metadata"].get("labels") is None:
        patch.append({"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}})
    else:
        patch.append({"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"})
    return answer(request, patch)
''')


@mistake("also asked about", "rules")
def registered_for_everything(env):
    """Right webhook and namespaceSelector, registered for every resource and for updates too
    (`apiGroups: ["*"], resources: ["*"], operations: [CREATE, UPDATE]`): ConfigMaps and Services
    created in the namespace come back labelled as well."""
    _serve(env, '''
def review(review):
    request = review["request"]
    if request["object"]["metadata"].get("labels") is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
''', rules=[{"operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}])


@mistake("sent to your webhook", "pod-labeler=disabled")
def selects_the_key_only(env):
    """Right webhook, registered for every namespace that has the label pod-labeler at all
    (`operator: Exists`): a namespace labelled pod-labeler=disabled gets its Pods labelled too."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    lab.register_mutating(env, served, namespace_selector={"matchExpressions": [{"key": "pod-labeler",
                                                                                   "operator": "Exists"}]})


@mistake("made later", "without the label")
def labels_web_by_name(env):
    """Registered right, but the webhook itself decides by the namespace's name: it labels the Pods
    of web and answers every other namespace without a patch, so a namespace labelled later gets
    nothing."""
    _serve(env, '''
def review(review):
    request = review["request"]
    if request.get("namespace") != "web":
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": True}}
    if request["object"]["metadata"].get("labels") is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
''')


@mistake("labelled run=", "objectSelector")
def skips_the_pods_kubectl_run_makes(env):
    """Right webhook and namespaceSelector, and an objectSelector that leaves out Pods labelled
    `run` (thinking those are somebody's tests): every Pod `kubectl run` makes in web stays
    unlabelled."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    lab.register_mutating(env, served, namespace_selector=SELECTOR,
                          object_selector={"matchExpressions": [{"key": "run", "operator": "DoesNotExist"}]})


@mistake("also asked about", "pods/binding")
def registers_every_pod_subresource(env):
    """Registers the right webhook for `pods` and `pods/*`, to be sure to catch every Pod: it is also
    asked about every eviction and binding of a Pod in web."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    rules = [{**r, "resources": ["pods", "pods/*"]} for r in lab.POD_CREATIONS]
    lab.register_mutating(env, served, namespace_selector=SELECTOR, rules=rules)


@mistake("still", "already")
def keeps_the_owner_it_was_sent_with(env):
    """Adds the label only to Pods that do not carry it yet: a Pod sent with example.com/owner:
    other-team keeps that owner in web."""
    _serve(env, '''
def review(review):
    request = review["request"]
    labels = request["object"]["metadata"].get("labels")
    if labels is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    if "example.com/owner" in labels:
        return answer(request, [])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
''')


@mistake("objectSelector", "example.com/owner")
def skips_pods_that_name_an_owner(env):
    """Right webhook, registered with an objectSelector that leaves out the Pods that already carry
    example.com/owner (thinking they are labelled already): a Pod sent with another owner keeps it."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    lab.register_mutating(env, served, namespace_selector=SELECTOR,
                          object_selector={"matchExpressions": [{"key": "example.com/owner",
                                                                 "operator": "DoesNotExist"}]})


@mistake("pod-defaults", "of your own")
def added_to_the_labs_configuration(env):
    """Serves the right webhook and adds it to the lab's MutatingWebhookConfiguration pod-defaults
    (it is already there for Pod creations) instead of registering a configuration of its own."""
    import json
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    served = lab.serve_webhook(env, reference.SOURCE)
    hook = {"name": "labeler.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5, "rules": lab.POD_CREATIONS, "namespaceSelector": SELECTOR,
            "clientConfig": {"url": f"{served.url}/mutate", "caBundle": lab.pki.ca_bundle(lab.webhook.pki_dir(env))}}
    lab.kubectl(env, "patch", "mutatingwebhookconfiguration", lab.DEFAULTS_NAME, "--type=json",
                "-p", json.dumps([{"op": "add", "path": "/webhooks/-", "value": hook}]))


@mistake("not a dry run", "dryRun")
def labels_dry_runs_only(env):
    """Sets the label only when the review says `dryRun: true` and answers real creations without a
    patch: every dry run shows the label, no Pod that is stored carries it."""
    _serve(env, '''
def review(review):
    request = review["request"]
    if not request.get("dryRun"):
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": True}}
    if request["object"]["metadata"].get("labels") is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
''')


@mistake("a dry run", "a stored one gets it", "dryRun")
def skips_dry_runs(env):
    """Answers a dry run without a patch (nothing is stored, so nothing to label, the student
    thinks) and labels real creations: `kubectl run --dry-run=server` shows a Pod without the
    label. Its feedback once said a Pod created in web came back without it, which real ones did not."""
    _serve(env, '''
def review(review):
    request = review["request"]
    if request.get("dryRun"):
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": True}}
    if request["object"]["metadata"].get("labels") is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
''')


@mistake("no longer labelled pod-labeler=enabled", "kubectl label namespace web")
def unlabels_web(env):
    """Serves and registers the right webhook, then takes the label pod-labeler=enabled off the
    namespace web (an experiment: do Pods there still get the label?). Pods created in web are then
    rightly not labelled; the check must not pass saying they are."""
    from importlib import util
    lab = env.lab.environment_module()
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "mutating-webhook.py")
    reference = util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    reference.solve(env)
    lab.kubectl(env, "label", "namespace", "web", "pod-labeler-")



LABELS = '''
    if request["object"]["metadata"].get("labels") is None:
        return answer(request, [{"op": "add", "path": "/metadata/labels", "value": {"example.com/owner": "web-team"}}])
    return answer(request, [{"op": "add", "path": "/metadata/labels/example.com~1owner", "value": "web-team"}])
'''


@mistake("whoever creates it", "matchConditions")
def sent_the_admins_pods_only(env):
    """The right webhook, registered with a matchCondition that sends it only labkit-admin's
    requests (the user the student tried it as): a Deployment's Pods in web, which the ReplicaSet
    controller creates, and anyone else's, are not labelled."""
    _serve(env, '''
def review(review):
    request = review["request"]
''' + LABELS, match_conditions=[{"name": "the-admin", "expression": "request.userInfo.username == 'labkit-admin'"}])


@mistake("ReplicaSet controller", "request.userInfo")
def labels_the_admins_pods_only(env):
    """Labels a Pod only when the review's userInfo is labkit-admin's, and lets every other creation
    through unchanged: a Deployment's Pods in web are not labelled."""
    _serve(env, '''
def review(review):
    request = review["request"]
    if request.get("userInfo", {}).get("username") != "labkit-admin":
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": True}}
''' + LABELS)
