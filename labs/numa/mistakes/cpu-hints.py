"""Common wrong answers to cpu-hints."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, hints):
    path = answer_path(env.lab.id, "cpu-hints")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"hints": hints}))


@mistake("the preferred flag is wrong")
def preferred_from_free_cpus(env):
    """Calls the only hint preferred because no narrower mask has enough *free* CPUs (preference counts capacity)."""
    _write(env, [{"mask": [0, 1], "preferred": True}])


@mistake("not a hint", "free CPUs")
def ignores_running_pods(env):
    """Works out the hints of an empty node, forgetting the CPUs db and cache hold exclusively."""
    _write(env, [{"mask": [0], "preferred": True}, {"mask": [1], "preferred": True}, {"mask": [0, 1], "preferred": False}])


@mistake("a hint is missing")
def no_placement(env):
    """Concludes that no NUMA node has 5 free CPUs, so there is no hint at all."""
    _write(env, [])
