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


@mistake("static policy picks", "hyperthread siblings")
def splits_a_core(env):
    """Gives alpha two CPUs of different cores instead of both threads of one free core."""
    _write(env, alpha_main="2,4")


@mistake("shared-or-exclusive choices", "whole number")
def fractional_gets_exclusive(env):
    """Gives beta's 500m container an exclusive CPU too."""
    _write(env, beta_b="11", pool="0")


@mistake("the reserved CPU stays in the shared pool")
def reserved_leaves_the_pool(env):
    """Takes the reserved CPU out of the shared pool."""
    _write(env, pool="11")


@mistake("shared-or-exclusive choices", "Guaranteed Pods")
def burstable_gets_exclusive(env):
    """Gives the Burstable delta (requests only, 2 CPUs) exclusive CPUs too; the reported feedback then said which
    class its Pod is and that it stays shared."""
    _write(env, delta_web="11", pool="0")


@mistake("no such container")
def extra_container(env):
    """Adds a container that is not in the file."""
    _write(env, zeta_main="shared")


def _labkit(*args) -> str:
    """A labkit command as the student types it (the lab's own state, this Python)."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, check=True).stdout


@mistake("wrong CPU sets")
def copies_admit_on_a_handwritten_machine(env):
    """Before predicting anything, writes dual-socket-ht's MachineInfo by hand (other core ids, no NUMA
    distances) and copies what `labkit numa admit` shows for the exercise's Pods on it. Where admit withholds
    the outcome there is nothing to copy and the answer is a guess: every container in the shared pool."""
    import json
    import tempfile
    from pathlib import Path

    from labkit.numa.machine import load_machine

    machine = json.loads(json.dumps(load_machine("dual-socket-ht").to_dict()))
    for node in machine["topology"]:
        node.pop("distances", None)
        for core in node["cores"]:
            core["core_id"] = 100 + min(core["thread_ids"])
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "my-machine.json"
        copy.write_text(json.dumps(machine, indent=1))
        shown = json.loads(_labkit("numa", "admit", "-f", str(env.dir / "scenarios" / "static-pods.yaml"), "--machine",
                                   str(copy), "--config", str(env.dir / "scenarios" / "kubelet-static.yaml"),
                                   "-o", "json"))
    if isinstance(shown.get("shared_pool"), list):
        cpus = {f"{p['name']}/{c['name']}": (",".join(map(str, c["cpus"])) if c["exclusive"] else "shared")
                for p in shown["pods"] for c in p["containers"]}
        pool = ",".join(map(str, shown["shared_pool"]))
    else:
        cpus, pool = {key: "shared" for key in RIGHT}, "0-11"
    path = answer_path(env.lab.id, "static-cpus")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"cpus": cpus, "defaultCpuSet": pool}))
