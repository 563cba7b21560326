"""Common wrong fixes of the webhook outage."""

import json

from labkit.exercises import mistake


@mistake("deleted")
def deletes_every_webhook(env):
    """Deletes every webhook configuration in the cluster."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    lab.kubectl(env, "delete", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "--all")


@mistake("still fail")
def empty_service(env):
    """Recreates the Service pod-policy without a selector, so that "the Service exists"."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    lab.kubectl(env, "-n", "policy", "delete", "service", "pod-policy")
    lab.kubectl(env, "-n", "policy", "create", "service", "clusterip", "pod-policy", "--tcp=443:8443")


@mistake("no longer applies")
def scoped_to_nothing(env):
    """Adds a namespaceSelector that no namespace matches."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector",
                             "value": {"matchLabels": {"policy": "enforced"}}}]))


@mistake("own backend")
def excludes_only_kube_system(env):
    """Leaves out kube-system only: the webhook still fails closed for its own backend's namespace."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system"]}]}
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector", "value": selector}]))


@mistake("kube-public", "still fail")
def excludes_kube_system_and_backend_only(env):
    """Leaves out kube-system and the backend's namespace: kube-public and kube-node-lease are still blocked."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "policy"]}]}
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector", "value": selector}]))


@mistake("timeoutSeconds")
def shortens_the_timeout(env):
    """Scopes the webhook right, and also lowers its timeout, thinking a fast failure is the fix."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "kube-public", "kube-node-lease", "policy"]}]}
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector", "value": selector},
                            {"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 1}]))


@mistake("through unchecked", "failurePolicy")
def fails_open(env):
    """Only switches failurePolicy to Ignore: nothing is blocked any more, and while the backend is down
    every privileged Pod of the application namespaces gets in unchecked."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]))


@mistake("no longer applies", "created later")
def excludes_by_prefix(env):
    """Leaves out the cluster's namespaces by a name prefix in CEL: a namespace kube-apps made later is an
    application namespace, and is left out too."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    condition = [{"name": "not-system", "expression": "!request.namespace.startsWith('kube-') && "
                                                      "request.namespace != 'policy'"}]
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/matchConditions", "value": condition}]))


@mistake("no longer applies", "replicaset-controller creates")
def exempts_the_controllers(env):
    """Leaves out the cluster's own namespaces by a selector and the backend's Pod by who creates it:
    every request of kube-system's controllers skips the webhook, so every Pod a Deployment, Job or
    StatefulSet makes in shop gets in unchecked."""
    lab = env.lab.environment_module()
    lab.start_outage(env)
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "kube-public", "kube-node-lease"]}]}
    condition = [{"name": "not-controllers",
                  "expression": "!request.userInfo.username.startsWith('system:serviceaccount:kube-system:')"}]
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector", "value": selector},
                            {"op": "add", "path": "/webhooks/0/matchConditions", "value": condition}]))


@mistake("not met the outage")
def fixes_without_the_outage(env):
    """Never takes the backend down: the only Pod creation that failed was refused by a webhook of
    their own that could not be called (a 500 too, but not pod-policy's outage); then scopes
    pod-policy as the reference does."""
    lab = env.lab.environment_module()
    c = lab.client(env)
    hook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "my-labeler"},
            "webhooks": [{"name": "my-labeler.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Fail", "clientConfig": {"url": "https://127.0.0.1:9/mutate"},
                          "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "web"}},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"]}]}]}
    lab.kubectl(env, "apply", "-f", "-", input=json.dumps(hook))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
           "spec": {"containers": [{"name": "probe", "image": "nginx:1.27"}]}}
    code, _ = c.request("POST", "/api/v1/namespaces/web/pods", None, pod)
    assert code == 500, code
    lab.kubectl(env, "delete", "mutatingwebhookconfiguration", "my-labeler")
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "kube-public", "kube-node-lease", "policy"]}]}
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector", "value": selector}]))
