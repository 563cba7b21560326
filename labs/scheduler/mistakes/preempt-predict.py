"""Common wrong predictions in preempt-predict."""

from labkit.exercises import mistake, write_answer


@mistake("prediction is not right")
def ignores_the_budget(env):
    """Picks the node whose victims have the lowest priority, forgetting the PodDisruptionBudget."""
    write_answer(env, "preempt-predict", {"node": "node-2", "victims": ["etl-a", "etl-b"]})


@mistake("prediction is not right")
def no_reprieve(env):
    """Evicts every lower-priority Pod of the node, without putting back the ones that still fit."""
    write_answer(env, "preempt-predict", {"node": "node-1", "victims": ["batch-a", "batch-b", "web-a"]})


@mistake("prediction is not right")
def lowest_one_only(env):
    """Evicts only the first batch Pod, as if 2 CPUs freed were enough."""
    write_answer(env, "preempt-predict", {"node": "node-1", "victims": ["batch-a"]})
