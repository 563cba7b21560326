"""Common wrong solutions to oom."""

import yaml

from labkit.exercises import answer_path, mistake


def _answer(env, container, cause):
    path = answer_path(env.lab.id, "oom")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"container": container, "cause": cause}))


def _run(env, limit):
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "shop")
    limits = pod["spec"]["containers"][1]["resources"]["limits"]
    if limit is None:
        limits.pop("memory")
    else:
        limits["memory"] = limit
    lab.replace_pod(env, "node-1", pod)
    lab.wait_settled(env, "node-1", "shop")


@mistake("answer is not right", "oom_memcg")
def blamed_the_app(env):
    """Names the container that is still running, and fixes the right one."""
    _answer(env, "app", "limit")
    _run(env, "256Mi")


@mistake("answer is not right", "oom_memcg")
def blamed_the_node(env):
    """Says the node ran out of memory, although the container hit its own limit."""
    _answer(env, "indexer", "node")
    _run(env, "256Mi")


@mistake("keeps no memory limit")
def removed_the_limit(env):
    """Removes the indexer's memory limit instead of sizing it."""
    _answer(env, "indexer", "limit")
    _run(env, None)


@mistake("OOMKilled again")
def limit_just_above_the_index(env):
    """Raises the limit to 200Mi, the index's size, forgetting the process's own memory."""
    _answer(env, "indexer", "limit")
    _run(env, "200Mi")


@mistake("indexer's command", "workload")
def shrank_the_workload(env):
    """Makes the indexer allocate 100Mi instead of its 200Mi index and keeps the 160Mi limit: it
    runs, but it is no longer the workload the scenario gives."""
    _answer(env, "indexer", "limit")
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "shop")
    pod["spec"]["containers"][1]["command"] = ["workload", "alloc", "--to", "100Mi"]
    lab.replace_pod(env, "node-1", pod)
    lab.wait_settled(env, "node-1", "shop")


@mistake("app's resources")
def moved_memory_from_the_app(env):
    """Gives the indexer a 256Mi limit and takes the app's limit away to make up for it."""
    _answer(env, "indexer", "limit")
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "shop")
    pod["spec"]["containers"][1]["resources"]["limits"]["memory"] = "256Mi"
    del pod["spec"]["containers"][0]["resources"]["limits"]
    lab.replace_pod(env, "node-1", pod)
    lab.wait_settled(env, "node-1", "shop")


@mistake("far above what it uses")
def limit_of_a_gigabyte(env):
    """Gives the indexer a 1Gi limit, five times what it uses, to be safe."""
    _answer(env, "indexer", "limit")
    _run(env, "1Gi")


@mistake("hardly any room")
def limit_just_above_the_allocation(env):
    """Gives the indexer a 210Mi limit: the 200Mi it allocates fit, with the interpreter's few MiB,
    and nothing more — the next allocation would be killed again."""
    _answer(env, "indexer", "limit")
    _run(env, "210Mi")


@mistake("hardly any room", "labkit resources top")
def a_tenth_above_the_allocation(env):
    """Gives the indexer 220Mi: a tenth above the 200Mi its command allocates, but the interpreter
    running it holds a few MiB more, so the room is less than a tenth of what the container uses."""
    _answer(env, "indexer", "limit")
    _run(env, "220Mi")


@mistake("web was changed")
def made_room_elsewhere(env):
    """Fixes the indexer, and also takes the memory limit of Pod web away."""
    _answer(env, "indexer", "limit")
    _run(env, "256Mi")
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "web")
    del pod["spec"]["containers"][0]["resources"]["limits"]["memory"]
    lab.replace_pod(env, "node-1", pod)


@mistake("has no container")
def named_the_pod(env):
    """Names the Pod (shop) as the killed container, and fixes the right one."""
    _answer(env, "shop", "limit")
    _run(env, "256Mi")
