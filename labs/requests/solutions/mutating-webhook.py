"""Reference solution: a webhook function that adds the label (the whole labels map when the Pod
has none), served by the lab's runner, registered for Pod creations in namespaces labelled
pod-labeler=enabled, safe for dry runs."""

SOURCE = '''\
import base64
import json

LABEL, VALUE = "example.com/owner", "web-team"


def review(admission_review):
    request = admission_review["request"]
    labels = request["object"]["metadata"].get("labels")
    if labels is None:
        patch = [{"op": "add", "path": "/metadata/labels", "value": {LABEL: VALUE}}]
    else:
        key = LABEL.replace("~", "~0").replace("/", "~1")
        patch = [{"op": "add", "path": "/metadata/labels/" + key, "value": VALUE}]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": True, "patchType": "JSONPatch",
                         "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}
'''


def solve(env):
    lab = env.lab.environment_module()
    served = lab.serve_webhook(env, SOURCE)
    lab.register_mutating(env, served, namespace_selector={"matchLabels": {"pod-labeler": "enabled"}})
