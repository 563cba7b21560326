"""Common wrong solutions of binpack."""

import copy

import yaml

from labkit.exercises import mistake


def _solution(env):
    return env.lab._load("solutions/binpack.py")


def _config(env, packer: dict | None = None, default: dict | None = None) -> dict:
    lab = env.lab.environment_module()
    config = yaml.safe_load(lab.SCHEDULER_CONFIG)
    profiles = []
    for p in config["profiles"]:
        if p["schedulerName"] == "bin-packer" and packer is not None:
            p = packer
        if p["schedulerName"] == "default-scheduler" and default is not None:
            p = default
        profiles.append(p)
    config["profiles"] = profiles
    return config


@mistake("schedulerName", "default-scheduler")
def forgets_the_scheduler_name(env):
    """Configures bin-packer right, then creates the batch as batch.yaml has it: the default
    profile schedules it."""
    sol = _solution(env)
    sol.configure(env, _config(env, packer=copy.deepcopy(sol.PROFILE)))
    sol.create_batch(env, scheduler_name=None)


@mistake("3 nodes", "bin-packer")
def leaves_the_profile_as_it_is(env):
    """Creates the batch with schedulerName bin-packer, the profile unchanged (LeastAllocated)."""
    _solution(env).create_batch(env)


@mistake("default-scheduler", "no longer schedules as the default profile")
def packs_with_the_default_profile(env):
    """Gives MostAllocated to the profile default-scheduler instead: every Pod of the lab would be
    packed."""
    sol = _solution(env)
    default = {**copy.deepcopy(sol.PROFILE), "schedulerName": "default-scheduler"}
    sol.configure(env, _config(env, default=default))
    sol.create_batch(env, scheduler_name=None)


@mistake("would not start", "scoringStrategy.type")
def misspells_the_strategy(env):
    """Writes MostAlocated: kube-scheduler would not start with it; labkit's keeps the profiles it
    had."""
    sol = _solution(env)
    packer = copy.deepcopy(sol.PROFILE)
    packer["pluginConfig"][0]["args"]["scoringStrategy"]["type"] = "MostAlocated"
    sol.configure(env, _config(env, packer=packer))
    sol.create_batch(env)


@mistake("schedulerName", "no profile has")
def names_a_scheduler_no_profile_has(env):
    """Configures bin-packer right and creates the batch with schedulerName binpacker: no profile
    of that name, so no scheduler takes the Pods."""
    sol = _solution(env)
    sol.configure(env, _config(env, packer=copy.deepcopy(sol.PROFILE)))
    sol.create_batch(env, scheduler_name="binpacker")


@mistake("Score plugin", "at random")
def disables_every_score_plugin(env):
    """Disables every Score plugin of bin-packer, so that nothing favours the emptiest node: every
    feasible node then scores alike and kube-scheduler picks one at random; the batch may even
    land on two nodes by chance, but the profile does not pack."""
    sol = _solution(env)
    sol.configure(env, _config(env, packer={"schedulerName": "bin-packer",
                                            "plugins": {"score": {"disabled": [{"name": "*"}]}}}))
    sol.create_batch(env)


@mistake("configuration change")
def creates_the_batch_first(env):
    """Creates the batch with schedulerName bin-packer, then changes the profile: the Pods were
    placed by the profile as it was."""
    sol = _solution(env)
    sol.create_batch(env)
    from labkit.apiserver.target import for_env
    from labkit.exercises import wait_for
    client = for_env(env).client()
    wait_for(lambda: all((client.get("v1", "pods", f"batch-{i}", "sched")["spec"].get("nodeName"))
                         for i in range(1, 7)), timeout=10, interval=0.05)
    sol.configure(env, _config(env, packer=copy.deepcopy(sol.PROFILE)))


@mistake("by hand", "spec.nodeName")
def pins_the_batch_by_node_name(env):
    """Configures bin-packer right, then creates the batch with schedulerName bin-packer and
    spec.nodeName set as packing would place it (four on pack-1, two on pack-2): no scheduler
    placed them, though the count per node is the profile's."""
    import json

    from labkit.apiserver.target import for_env
    sol = _solution(env)
    sol.configure(env, _config(env, packer=copy.deepcopy(sol.PROFILE)))
    lab = env.lab.environment_module()
    pods = [lab.batch_pod(i) for i in range(1, lab.BATCH + 1)]
    for i, pod in enumerate(pods):
        pod["spec"]["schedulerName"] = "bin-packer"
        pod["spec"]["nodeName"] = "pack-1" if i < 4 else "pack-2"
    for_env(env).kubectl("create", "-n", "sched", "-f", "-",
                         input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
