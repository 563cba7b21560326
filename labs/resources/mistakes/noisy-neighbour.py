"""Common wrong solutions to noisy-neighbour."""

from labkit.exercises import mistake


def _change(env, name, change):
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-2.yaml", name)
    change(pod["spec"]["containers"][0]["resources"])
    lab.replace_pod(env, "node-2", pod)
    lab.wait_settled(env, "node-2", name)


@mistake("has no memory limit")
def removed_the_limit(env):
    """Removes the cache's memory limit, thinking no limit means no trouble."""
    _change(env, "cache", lambda r: r["limits"].pop("memory"))


@mistake("storefront was changed")
def squeezed_the_neighbour(env):
    """Lowers the neighbour's limit instead of the noisy Pod's."""
    _change(env, "storefront", lambda r: r["limits"].update(memory="64Mi"))


@mistake("cache is not running", "OutOfmemory")
def requested_what_it_takes(env):
    """Raises the cache's memory request to what it fills (192Mi), keeping the 256Mi limit."""
    _change(env, "cache", lambda r: r["requests"].update(memory="192Mi"))


@mistake("cache/cache's command")
def smaller_cache_fraction(env):
    """Makes the cache fill a quarter of its limit instead of three quarters, keeping the 256Mi limit."""
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-2.yaml", "cache")
    pod["spec"]["containers"][0]["command"] = ["workload", "fill", "--fraction", "0.25"]
    lab.replace_pod(env, "node-2", pod)
    lab.wait_settled(env, "node-2", "cache")


@mistake("cron was changed")
def limited_the_cron(env):
    """Fixes the cache and also gives the neighbour cron a memory limit, to be safe."""
    _change(env, "cache", lambda r: r["limits"].update(memory="128Mi"))
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-2.yaml", "cron")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": "64Mi"}}
    lab.replace_pod(env, "node-2", pod)
    lab.wait_settled(env, "node-2", "cron")


@mistake("memory request is below")
def lowered_the_request_too(env):
    """Lowers the cache's limit to 128Mi and its request to 16Mi, thinking a smaller request frees
    memory for the neighbours."""
    _change(env, "cache", lambda r: (r["limits"].update(memory="128Mi"), r["requests"].update(memory="16Mi")))


@mistake("less than a third")
def shrank_the_cache_to_its_request(env):
    """Sets the cache's limit to its 32Mi request: the node is far above its threshold, but the
    cache now holds 24Mi where the node could hold several times that for it."""
    _change(env, "cache", lambda r: r["limits"].update(memory="32Mi"))
