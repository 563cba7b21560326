"""Common wrong answers to merge."""

import yaml

from labkit.exercises import answer_path, mistake


def _answer(**trainer):
    right_trainer = {
        "best-effort": {"mask": [0, 1], "preferred": False, "admit": True},
        "restricted": {"mask": [0, 1], "preferred": False, "admit": False},
        "single-numa-node": {"mask": None, "preferred": False, "admit": False},
    }
    right_trainer.update(trainer)
    return {"trainer": right_trainer,
            "feeder": {p: {"mask": [0], "preferred": True, "admit": True}
                       for p in ("best-effort", "restricted", "single-numa-node")}}


def _write(env, answer):
    path = answer_path(env.lab.id, "merge")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(answer))


@mistake("prediction is not right", "only a preferred best hint")
def restricted_admits_like_best_effort(env):
    """Thinks restricted admits whatever best-effort admits."""
    _write(env, _answer(restricted={"mask": [0, 1], "preferred": False, "admit": True}))


@mistake("prediction is not right", "all their masks are equal")
def preferred_if_all_preferred(env):
    """Calls the GPU hint {0,1} combined with the CPU hint {0} preferred because both were preferred."""
    _write(env, _answer(**{"best-effort": {"mask": [0], "preferred": True, "admit": True}}))


@mistake("prediction is not right", "spans several NUMA nodes")
def single_numa_keeps_wide_hints(env):
    """Lets single-numa-node merge the two-node GPU hint like the other policies do."""
    _write(env, _answer(**{"single-numa-node": {"mask": [0, 1], "preferred": False, "admit": False}}))


def _labkit(*args) -> str:
    """A labkit command as the student types it (the lab's own state, this Python)."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "labkit", *args], capture_output=True, text=True, check=True).stdout


@mistake("prediction is not right", "as it was when")
def copies_the_merge_after_a_placeholder(env):
    """Writes a placeholder (every decision null, not preferred, rejected) and checks it, so that the tools
    answer; then copies what `labkit numa merge` shows for the exercise's two hints files under each policy."""
    import json

    from labkit import runner

    _write(env, {c: {p: {"mask": None, "preferred": False, "admit": False}
                     for p in ("best-effort", "restricted", "single-numa-node")} for c in ("trainer", "feeder")})
    runner.check(env.lab, "merge")
    copied = {}
    for container in ("trainer", "feeder"):
        hints = env.dir / "scenarios" / f"merge-{container}.json"
        copied[container] = {}
        for policy in ("best-effort", "restricted", "single-numa-node"):
            shown = json.loads(_labkit("numa", "merge", "-f", str(hints), "--policy", policy, "-o", "json"))
            copied[container][policy] = {**shown["hint"], "admit": shown["admit"]}
    _write(env, copied)
