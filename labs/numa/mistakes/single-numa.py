"""Common wrong Pods for single-numa."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, containers, status=None):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide"},
           "spec": {"containers": [{"name": "app", "image": "app", **c} for c in containers]}}
    if status:
        pod["status"] = status
    path = answer_path(env.lab.id, "single-numa")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(pod))


@mistake("single-numa-node admits", "(Burstable)")
def requests_only(env):
    """Asks for 10 CPUs with requests only: a Burstable Pod, which gets no CPU hints at all."""
    _write(env, [{"resources": {"requests": {"cpu": "10", "memory": "1Gi"}}}])


@mistake("single-numa-node admits", "(Burstable)")
def status_says_guaranteed(env):
    """Writes `status: {qosClass: Guaranteed}` into a requests-only Pod, hoping kubelet believes it."""
    _write(env, [{"resources": {"requests": {"cpu": "10", "memory": "1Gi"}}}], status={"qosClass": "Guaranteed"})


@mistake("must be less than or equal to cpu limit of 2")
def request_above_limit(env):
    """Puts 10 CPUs in the request and 2 in the limit."""
    _write(env, [{"resources": {"requests": {"cpu": "10", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}])


@mistake("single-numa-node admits", "(Guaranteed)")
def fits_one_node(env):
    """A Guaranteed Pod that fits on one NUMA node: every policy admits it."""
    _write(env, [{"resources": {"limits": {"cpu": "4", "memory": "1Gi"}}}])


@mistake("unknown field", "spec.containers[0].resources.limit")
def misspelt_limits(env):
    """Writes `limit:` for `limits:`: kubectl refuses the field, it is not silently dropped."""
    path = answer_path(env.lab.id, "single-numa")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: wide}\nspec:\n  containers:\n    - name: app\n"
                    "      image: app\n      resources:\n        limit: {cpu: \"10\", memory: 1Gi}\n")


@mistake("image: Required value")
def no_image(env):
    """Writes the wide Guaranteed Pod without an image: kube-apiserver refuses to create it."""
    path = answer_path(env.lab.id, "single-numa")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide"},
                                    "spec": {"containers": [{"name": "app",
                                                             "resources": {"limits": {"cpu": "10", "memory": "1Gi"}}}]}}))


@mistake("best-effort rejects", "OutOfnvidia.com/gpu")
def gpu_the_node_lacks(env):
    """Adds an nvidia.com/gpu to the wide Pod: lab-two-node has no such device, so kubelet rejects it under every
    policy (the resource managers alone would let best-effort admit it)."""
    _write(env, [{"resources": {"limits": {"cpu": "10", "memory": "1Gi", "nvidia.com/gpu": "1"}}}])
