"""Common wrong predictions in noexecute."""

from labkit.exercises import mistake, write_answer


def _predict(env, **changes):
    answer = {"plain": 0, "patient": 120, "stubborn": "never", "wrong-effect": 0, "wildcard": "never", "other-value": 0}
    answer.update({k.replace("_", "-"): v for k, v in changes.items()})
    write_answer(env, "noexecute", answer)


@mistake("prediction is not right")
def effect_ignored(env):
    """Thinks a toleration of the key protects whatever its effect: wrong-effect stays."""
    _predict(env, wrong_effect="never")


@mistake("prediction is not right")
def empty_key_matches_nothing(env):
    """Thinks a toleration without a key matches no taint: wildcard goes at once."""
    _predict(env, wildcard=0)


@mistake("prediction is not right")
def key_is_enough(env):
    """Thinks the key and effect are enough, whatever the value: other-value stays 300 s."""
    _predict(env, other_value=300)


def _taint_and_watch(env, node: str = "node-e", pod: str = "plain", taint: str = "drain=now:NoExecute"):
    from labkit.apiserver.target import for_env
    from labkit.exercises import wait_for
    target = for_env(env)
    target.kubectl("taint", "node", node, taint)
    client = target.client()
    assert wait_for(lambda: (client.get_or_none("v1", "pods", pod, "sched") or {"metadata": {"x": 1}})
                    ["metadata"].get("deletionTimestamp"), timeout=30, interval=0.1)


@mistake("tried the experiment", "after")
def watches_first(env):
    """Adds the drain taint to node-e, watches the taint-eviction controller delete plain, then
    writes the right prediction: one made after watching earns nothing."""
    _taint_and_watch(env)
    _predict(env)


@mistake("tried the experiment", "after")
def watches_then_resets(env):
    """Adds the drain taint to node-e and watches, then `labkit reset scheduler noexecute` (node-e
    and its Pods as built, the decision log read afresh), then writes the right prediction: the
    reset keeps the try. The reset as labkit.runner.reset does it (the lab's keep_student_work
    hook, then reset_exercise; the lab's lock is held by whoever applies this mistake)."""
    _taint_and_watch(env)
    lab = env.lab.environment_module()
    lab.keep_student_work(env, "noexecute")
    lab.reset_exercise(env, "noexecute")
    env.state.set_ready(["noexecute"])
    _predict(env)


@mistake("tried the experiment", "after")
def watches_a_copy_elsewhere(env):
    """Copies plain (other name, same tolerations: none) onto a scratch Node of its own, taints
    that Node with another value of the drain key, watches the copy go, deletes the scratch Node
    and Pod again, and writes the right prediction."""
    import copy
    import json

    from labkit.apiserver.target import for_env
    from labkit.nodes import ready_node
    target = for_env(env)
    lab = env.lab.environment_module()
    target.kubectl("create", "-f", "-", input=json.dumps(ready_node("scratch", {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                                                    {}, [])))
    pod = copy.deepcopy(lab.drain_pod("plain"))
    pod["metadata"]["name"], pod["spec"]["nodeName"] = "plain-copy", "scratch"
    target.kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(pod))
    _taint_and_watch(env, node="scratch", pod="plain-copy", taint="drain=test:NoExecute")
    target.kubectl("delete", "pod", "plain-copy", "-n", "sched", "--force", "--grace-period=0", "--ignore-not-found")
    target.kubectl("delete", "node", "scratch")
    _predict(env)


@mistake("tried the experiment", "after")
def schedules_a_copy_first(env):
    """Registers a scratch Node tainted drain=x:NoExecute and creates a Pod with patient's
    toleration and no node: the lab's scheduler decides it next to that taint (where it may go,
    `kubectl describe pod` and `labkit scheduler explain` say why); deletes both again, then
    writes the right prediction."""
    import json

    from labkit.apiserver.target import for_env
    from labkit.exercises import wait_for
    from labkit.nodes import ready_node
    target = for_env(env)
    lab = env.lab.environment_module()
    node = ready_node("scratch", {"cpu": "4", "memory": "8Gi", "pods": "110"}, {},
                      [{"key": "drain", "value": "x", "effect": "NoExecute"}])
    target.kubectl("create", "-f", "-", input=json.dumps(node))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "patient-copy"},
           "spec": {"tolerations": lab.drain_pod("patient")["spec"]["tolerations"],
                    "containers": lab.drain_pod("patient")["spec"]["containers"]}}
    target.kubectl("create", "-n", "default", "-f", "-", input=json.dumps(pod))
    client = target.client()
    assert wait_for(lambda: (client.get_or_none("v1", "pods", "patient-copy", "default") or {"spec": {}})["spec"]
                    .get("nodeName"), timeout=30, interval=0.1)
    target.kubectl("delete", "pod", "patient-copy", "-n", "default", "--force", "--grace-period=0")
    target.kubectl("delete", "node", "scratch")
    _predict(env)


@mistake("tried the experiment", "after")
def watches_a_renamed_copy_elsewhere(env):
    """Copies other-value onto a scratch Node of its own with its toleration of drain renamed to
    retire, taints that Node retire=now:NoExecute (the drain taint, renamed), watches the copy go,
    deletes the scratch Node and Pod again, and writes the right prediction: the controller treats
    the copy as it treats other-value under the drain taint (this passed before: only a taint of
    the key drain counted as a try)."""
    import copy
    import json

    from labkit.apiserver.target import for_env
    from labkit.nodes import ready_node
    target = for_env(env)
    lab = env.lab.environment_module()
    target.kubectl("create", "-f", "-", input=json.dumps(ready_node("scratch", {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                                                    {}, [])))
    pod = copy.deepcopy(lab.drain_pod("other-value"))
    pod["metadata"]["name"], pod["spec"]["nodeName"] = "renamed-copy", "scratch"
    pod["spec"]["tolerations"] = [dict(t, key="retire") if t.get("key") == "drain" else t
                                  for t in pod["spec"].get("tolerations") or []]
    target.kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(pod))
    _taint_and_watch(env, node="scratch", pod="renamed-copy", taint="retire=now:NoExecute")
    target.kubectl("delete", "pod", "renamed-copy", "-n", "sched", "--force", "--grace-period=0", "--ignore-not-found")
    target.kubectl("delete", "node", "scratch")
    _predict(env)
