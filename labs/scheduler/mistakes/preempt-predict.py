"""Common wrong predictions in preempt-predict."""

from labkit.exercises import mistake, write_answer


@mistake("2 of the 2 parts", "wrong")
def ignores_the_budget(env):
    """Picks the node whose victims have the lowest priority, forgetting the PodDisruptionBudget."""
    write_answer(env, "preempt-predict", {"node": "node-2", "victims": ["etl-a", "etl-b"]})


@mistake("1 of the 2 parts", "wrong")
def no_reprieve(env):
    """Evicts every lower-priority Pod of the node, without putting back the ones that still fit."""
    write_answer(env, "preempt-predict", {"node": "node-1", "victims": ["batch-a", "batch-b", "web-a"]})


@mistake("1 of the 2 parts", "wrong")
def lowest_one_only(env):
    """Evicts only the first batch Pod, as if 2 CPUs freed were enough."""
    write_answer(env, "preempt-predict", {"node": "node-1", "victims": ["batch-a"]})
