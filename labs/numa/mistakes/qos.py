"""Common wrong classifications for qos."""

import yaml

from labkit.exercises import answer_path, mistake

RIGHT = {"web": "Guaranteed", "batch": "BestEffort", "cache": "Guaranteed", "api": "Burstable",
         "migrate": "Burstable", "scratch": "BestEffort"}


def _write(env, **changes):
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"qos": {**RIGHT, **changes}}))


@mistake("prediction is not right", "not by trying values", "a limit without a request")
def limits_without_requests(env):
    """Forgets that the API server copies a limit into the missing request: limits only looks Burstable."""
    _write(env, cache="Burstable")


@mistake("prediction is not right", "only cpu and memory count")
def ephemeral_storage_counts(env):
    """Counts ephemeral-storage requests and limits towards the QoS class."""
    _write(env, scratch="Burstable")


@mistake("prediction is not right", "init containers count")
def init_containers_ignored(env):
    """Looks only at the app containers, not at the init container without limits."""
    _write(env, migrate="Guaranteed")


@mistake("prediction is not right")
def limits_make_guaranteed(env):
    """Calls every Pod with cpu and memory limits Guaranteed and every Pod without them BestEffort, looking at
    nothing else: the reported feedback then named the class of each wrong Pod in its reason."""
    _write(env, web="Guaranteed", cache="Guaranteed", api="BestEffort", migrate="Guaranteed", scratch="Burstable")


@mistake("gives qos.web twice")
def pod_listed_twice(env):
    """Lists web twice with two classes, hoping one of them counts."""
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(f"  {pod}: {qos}\n" for pod, qos in RIGHT.items())
    path.write_text(f"qos:\n{lines}  web: Burstable\n")


@mistake("prediction is not right", "graded against the situation the exercise describes",
         "scenarios/qos-pods.yaml differs")
def edits_the_scenario(env):
    """Gives cache explicit requests below its limits in the lab's copy of qos-pods.yaml, then answers for the
    edited file: the prediction is about the Pods as the lab built them."""
    path = env.dir / "scenarios" / "qos-pods.yaml"
    path.write_text(path.read_text().replace("limits: {cpu: \"2\", memory: 1Gi}",
                                             "requests: {cpu: \"1\", memory: 512Mi}\n        limits: {cpu: \"2\", memory: 1Gi}"))
    _write(env, cache="Burstable")


@mistake("prediction is not right", "as it was when")
def reads_the_classes_off_the_live_node(env):
    """Runs the Pods of qos-pods.yaml on the live node before answering (`labkit numa run`; when labkit
    refuses, first writes and checks a placeholder, every Pod BestEffort) and copies the class each one's
    cgroup shows (/proc/<pid>/cgroup: kubepods/pod<uid>, kubepods/burstable/…, kubepods/besteffort/…), a
    Pod the node rejected for want of CPUs being one that asked for exclusive CPUs, Guaranteed."""
    from labkit import runner
    from labkit.numa import withhold
    from labkit.numa.livenode import LiveNode
    from labkit.numa.pods import load_pods

    path = env.dir / "scenarios" / "qos-pods.yaml"
    if withhold.qos_run_refusal(load_pods(path)):      # what `labkit numa run` checks first
        _write(env, **{pod: "BestEffort" for pod in RIGHT})
        runner.check(env.lab, "qos")
    live = LiveNode(env)
    copied = {}
    for result in live.run(path):
        name = result.pod.name
        if not result.admitted:
            copied[name] = "Guaranteed"
            continue
        cgroup = result.started[0].container.cgroup
        copied[name] = "Burstable" if "/burstable/" in cgroup else "BestEffort" if "/besteffort/" in cgroup \
            else "Guaranteed"
        live.delete(name, result.pod.namespace)
    _write(env, **copied)
