"""Common wrong answers to memory."""

import yaml

from labkit.exercises import answer_path, mistake

RIGHT_ADMITTED = {"orders": True, "payments": True, "reports": False, "search": True}
RIGHT_MEMORY = {"orders/app": [0], "payments/app": [1], "search/app": [0]}


def _write(env, admitted=None, memory=None):
    path = answer_path(env.lab.id, "memory")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"admitted": {**RIGHT_ADMITTED, **(admitted or {})},
                                    "memory": {**RIGHT_MEMORY, **(memory or {})}}))


@mistake("prediction is not right", "cannot join a group")
def free_memory_adds_up(env):
    """Admits reports on both NUMA nodes because their free memory adds up to 4Gi."""
    _write(env, admitted={"reports": True}, memory={"reports/app": [0, 1]})


@mistake("prediction is not right", "lower nodes first")
def most_free_node(env):
    """Puts search on the node with more free memory instead of where the Memory Manager puts it."""
    _write(env, memory={"search/app": [1]})


@mistake("prediction is not right", "narrowest")
def spreads_over_nodes(env):
    """Spreads payments over both nodes instead of the one node that can hold it."""
    _write(env, memory={"payments/app": [0, 1]})


@mistake("given for a Pod your answer rejects")
def memory_for_a_rejected_pod(env):
    """Rejects reports but still gives it memory nodes."""
    _write(env, memory={"reports/app": [0, 1]})
