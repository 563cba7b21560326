"""Reference solution: meet the outage as the prompt says; scope the webhook so that the cluster's
own namespaces and the webhook's own namespace are never sent to it (its backend's Pod must be
admitted to come back), then bring the backend back."""

import json


def solve(env):
    lab = env.lab.environment_module()
    lab.start_outage(env)
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "kube-public", "kube-node-lease", "policy"]}]}
    lab.kubectl(env, "patch", "validatingwebhookconfiguration", "pod-policy", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/webhooks/0/namespaceSelector", "value": selector}]))
    lab.kubectl(env, "-n", "policy", "scale", "deployment", "pod-policy", "--replicas=1")
    lab._wait(lambda: lab.backend_ready(lab.client(env)), "the pod-policy backend to be back")
