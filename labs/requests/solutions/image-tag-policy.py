"""Reference solution: a policy whose expressions accept an image with a digest, or with a tag
after the last `/` (or, on an update, the image the container already had), for containers, init
containers and ephemeral containers, on Pod creations and updates and on updates of the
ephemeralcontainers subresource (`kubectl debug`); bound to the namespace web with Deny."""

import json

PINNED = r"c.image.contains('@') || c.image.matches(':[\\w][\\w.-]{0,127}$')"


RESOURCES = ("pods", "pods/ephemeralcontainers")


def policy(expressions, resources=RESOURCES):
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "require-image-tag"},
            "spec": {"failurePolicy": "Fail",
                     "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                             "operations": ["CREATE", "UPDATE"],
                                                             "resources": list(resources)}]},
                     "validations": [{"expression": e, "message": "images must name a tag or a digest"}
                                     for e in expressions]}}


def binding(actions=("Deny",)):
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "require-image-tag-web"},
            "spec": {"policyName": "require-image-tag", "validationActions": list(actions),
                     "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "web"}}}}}


def kept(field):
    """On an update, the image a container of that name already had: it brings nothing new (a Pod
    whose images predate the policy may still have its labels or annotations changed)."""
    return (f"(request.operation == 'UPDATE' && has(oldObject.spec.{field}) && "
            f"oldObject.spec.{field}.exists(o, o.name == c.name && o.image == c.image))")


EXPRESSIONS = [f"object.spec.containers.all(c, {PINNED} || {kept('containers')})",
               f"!has(object.spec.initContainers) || object.spec.initContainers.all(c, {PINNED} || "
               f"{kept('initContainers')})",
               f"!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, {PINNED} || "
               f"{kept('ephemeralContainers')})"]


def apply(env, *objects):
    lab = env.lab.environment_module()
    for obj in objects:
        lab.kubectl(env, "apply", "-f", "-", input=json.dumps(obj))


def solve(env):
    apply(env, policy(EXPRESSIONS), binding())
