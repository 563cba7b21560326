"""Near-misses of binpack, on the observation of the solved lab: the profile bin-packer of the
configuration edited one field at a time (tree_edits: each field dropped or changed, the scoring
strategy among others); one whose labkit reconstruction can place the batch as the reference's does
and never on more nodes (loaded as kube-scheduler loads it, the default profile unchanged, the same
Pods per node when the six Pods are scheduled one after another on the pool, every node tied for
the highest score followed) is proven equivalent, every other must be killed. Besides: every Score
plugin of bin-packer disabled (all feasible nodes tie: a random pick, whatever it placed), the
default profile given MostAllocated, the configuration gone or refused, one Pod's schedulerName
changed, a Pod bound by hand, moved to another node or gone, its requests
changed, the pool's Nodes edited one step at a time. Two are also made live: the profile's
strategy LeastAllocated (the batch left as it is), and the ConfigMap's strategy misspelt."""

import copy

import yaml

from labkit.apiserver.target import for_env
from labkit.mutants import Mutant, tree_edits
from labkit.scheduler import config as schedconfig
from labkit.scheduler.profiles import make_profile


def _with(obs, **changes):
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def _config_with(obs, name: str, profile: dict | None) -> str:
    config = yaml.safe_load(obs["config"])
    config["profiles"] = [p for p in config["profiles"] if p.get("schedulerName") != name] + \
        ([profile] if profile is not None else [])
    return yaml.safe_dump(config, sort_keys=False)


def _live(strategy: str, again: bool):
    def apply(env):
        sol = env.lab._load("solutions/binpack.py")
        config = yaml.safe_load(env.lab.environment_module().SCHEDULER_CONFIG)
        packer = copy.deepcopy(sol.PROFILE)
        packer["pluginConfig"][0]["args"]["scoringStrategy"]["type"] = strategy
        config["profiles"] = [p if p["schedulerName"] != "bin-packer" else packer for p in config["profiles"]]
        sol.configure(env, config)
        if again:
            for_env(env).kubectl("delete", "pods", "-n", "sched", "-l", "app=batch", "--wait=false")
            from labkit.exercises import wait_for
            client = for_env(env).client()
            wait_for(lambda: not client.list("v1", "pods", "sched", label_selector="app=batch")[0], timeout=10)
            sol.create_batch(env)
    return apply


def mutants(ctx):
    lab = ctx.lab.environment_module()
    checks = ctx.lab._load("checks.py")
    obs = checks.observe_binpack(ctx)
    config = yaml.safe_load(obs["config"])
    packer = next(p for p in config["profiles"] if p.get("schedulerName") == "bin-packer")
    placed = [x["spec"]["nodeName"] for x in obs["pods"].values()]
    reference = tuple(sorted(checks.collections_count(placed), reverse=True))
    default = checks._profile_signature(make_profile("default"))

    def verdict(text: str) -> tuple[str, ...]:
        """() when the configuration places the batch as the reference does, else the words the
        check's failure names."""
        try:
            profiles = {p.name: p for p in schedconfig.load(text)[0]}
        except schedconfig.ConfigError:
            return ("would not start",)
        if "default-scheduler" not in profiles or checks._profile_signature(profiles["default-scheduler"]) != default:
            return ("default-scheduler",)
        if "bin-packer" not in profiles:
            return ("no profile bin-packer",)
        outcomes = checks.binpack_outcomes(lab, profiles["bin-packer"], list(obs["pods"].values()))
        if reference not in outcomes:
            return ("Pods per node",)
        if max(len(o) for o in outcomes) > len(reference):        # the reference uses the fewest nodes
            return ("at random",) if len(outcomes) > 1 else ("nodes of the pool",)
        return ()

    alternatives = {"pluginConfig[0].args.scoringStrategy.type": ["LeastAllocated", "MostAlocated", ""],
                    "pluginConfig[0].name": ["NodeResourceFit", "MostAllocated"],
                    "schedulerName": ["binpacker", "default-scheduler"]}
    for edit in tree_edits(packer, alternatives=alternatives):
        text = yaml.safe_dump({**config, "profiles": [p if p.get("schedulerName") != "bin-packer" else edit.value
                                                      for p in config["profiles"]]}, sort_keys=False)
        names = verdict(text)
        yield Mutant(f"config:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"the profile bin-packer: {edit.describe()}", names=names,
                     observation=_with(obs, config=text),
                     apply=_live("MostAlocated", False) if edit.after == "MostAlocated" else
                     _live("LeastAllocated", False) if edit.after == "LeastAllocated" else None,
                     equivalent="labkit's reconstruction loads it as kube-scheduler does and places the batch as "
                                "with the reference profile" if not names else None)
    unscored = {"schedulerName": "bin-packer", "plugins": {"score": {"disabled": [{"name": "*"}]}}}
    text = _config_with(obs, "bin-packer", unscored)
    yield Mutant("no-score", "every Score plugin of bin-packer disabled", names=("at random", "Score plugin"),
                 observation=_with(obs, config=text))
    default_packs = {**copy.deepcopy(packer), "schedulerName": "default-scheduler"}
    yield Mutant("default-packs", "the profile default-scheduler given MostAllocated too",
                 names=("default-scheduler",), observation=_with(obs, config=_config_with(obs, "default-scheduler",
                                                                                          default_packs)))
    yield Mutant("config:gone", "the ConfigMap deleted", names=("is gone",), observation=_with(obs, config=None))
    yield Mutant("config:not-yaml", "the configuration is not YAML", names=("would not start",),
                 observation=_with(obs, config="profiles: [\n"))
    first = sorted(obs["pods"])[0]
    for name in ("default-scheduler", "binpacker"):
        out = copy.deepcopy(obs)
        out["pods"][first]["spec"]["schedulerName"] = name
        yield Mutant(f"schedulerName={name}", f"{first} names the scheduler {name}", names=("schedulerName", name),
                     observation=out)
    yield Mutant("bound-by-hand", f"{first} bound by a binding sent by hand", names=("by hand",),
                 observation=_with(obs, bound_by={**obs["bound_by"], first: ["labkit-admin"]}))
    used = set(placed)
    spare = next(n for n in lab.PACK_NODES if n not in used)
    lone = next(n for n, x in obs["pods"].items()
                if sum(1 for y in obs["pods"].values() if y["spec"]["nodeName"] == x["spec"]["nodeName"]) == 2)
    out = copy.deepcopy(obs)
    out["pods"][lone]["spec"]["nodeName"] = spare
    yield Mutant(f"moved:{lone}:{spare}", f"{lone} on the empty node {spare}", names=("Pods per node",),
                 observation=out)
    out = copy.deepcopy(obs)
    out["pods"][first] = None
    yield Mutant("pod-gone", f"{first} deleted", names=("do not exist",), observation=out)
    out = copy.deepcopy(obs)
    out["pods"][first]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "500m", "memory": "1Gi"}
    yield Mutant("requests", f"{first} asks for half a CPU", names=("requests",), observation=out)
    out = copy.deepcopy(obs)
    out["pods"][first]["spec"]["tolerations"] = []
    yield Mutant("tolerations", f"{first} without its toleration", names=("tolerations",), observation=out)
    yield from ctx.lab._load("mutants/_nodes.py").node_mutants(
        obs, alternatives={"allocatable.cpu": ["8", "2"], "labels.pool": ["shop", ""], "unschedulable": [True]})
