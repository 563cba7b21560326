"""Common wrong answers to static-cpus."""

import yaml

from labkit.exercises import answer_path, mistake

RIGHT = {"alpha/main": "2,8", "beta/a": "6", "beta/b": "shared", "gamma/main": "1,3,7,9", "delta/web": "shared",
         "epsilon/main": "4-5,10"}


def _write(env, pool="0,11", **cpus):
    path = answer_path(env.lab.id, "static-cpus")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"cpus": {**RIGHT, **{k.replace("_", "/"): v for k, v in cpus.items()}},
                                    "defaultCpuSet": pool}))


@mistake("alpha/main", "hyperthread siblings")
def splits_a_core(env):
    """Gives alpha two CPUs of different cores instead of both threads of one free core."""
    _write(env, alpha_main="2,4")


@mistake("beta/b: stays in the shared pool", "not a whole number")
def fractional_gets_exclusive(env):
    """Gives beta's 500m container an exclusive CPU too."""
    _write(env, beta_b="11", pool="0")


@mistake("the reserved CPU stays in the shared pool")
def reserved_leaves_the_pool(env):
    """Takes the reserved CPU out of the shared pool."""
    _write(env, pool="11")
