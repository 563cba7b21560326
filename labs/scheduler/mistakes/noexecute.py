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


@mistake("already deleted", "after")
def watches_first(env):
    """Adds the drain taint to node-e, watches the taint-eviction controller delete plain, then
    writes the right prediction: one made after watching earns nothing."""
    from labkit.apiserver.target import for_env
    from labkit.exercises import wait_for
    target = for_env(env)
    target.kubectl("taint", "node", "node-e", "drain=now:NoExecute")
    client = target.client()
    assert wait_for(lambda: (client.get_or_none("v1", "pods", "plain", "sched") or {"metadata": {"x": 1}})
                    ["metadata"].get("deletionTimestamp"), timeout=30, interval=0.1)
    _predict(env)
