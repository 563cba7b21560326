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
