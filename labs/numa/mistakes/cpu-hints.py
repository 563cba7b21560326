"""Common wrong answers to cpu-hints."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, hints):
    path = answer_path(env.lab.id, "cpu-hints")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"hints": hints}))


@mistake("prediction is not right", "by capacity, counting every CPU")
def preferred_from_free_cpus(env):
    """Calls the only hint preferred because no narrower mask has enough *free* CPUs (preference counts capacity)."""
    _write(env, [{"mask": [0, 1], "preferred": True}])


@mistake("prediction is not right", "free CPUs")
def ignores_running_pods(env):
    """Works out the hints of an empty node, forgetting the CPUs db and cache hold exclusively."""
    _write(env, [{"mask": [0], "preferred": True}, {"mask": [1], "preferred": True}, {"mask": [0, 1], "preferred": False}])


@mistake("prediction is not right")
def no_placement(env):
    """Concludes that no NUMA node has 5 free CPUs, so there is no hint at all."""
    _write(env, [])


@mistake("listed twice")
def same_mask_twice(env):
    """Lists the one hint twice, once preferred and once not, to cover both."""
    _write(env, [{"mask": [0, 1], "preferred": True}, {"mask": [1, 0], "preferred": False}])


@mistake("does not exist on lab-two-node")
def numa_node_of_another_machine(env):
    """Writes a hint for NUMA node 2, which lab-two-node does not have."""
    _write(env, [{"mask": [0, 1], "preferred": False}, {"mask": [2], "preferred": True}])


@mistake("prefered is not one a hint has (misspelled?)")
def preferred_misspelled(env):
    """Writes the hint's flag as `prefered`: the check names the key it does not know, in YAML, not as a Python dict."""
    _write(env, [{"mask": [0, 1], "prefered": False}])
