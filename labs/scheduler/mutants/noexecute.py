"""Near-misses of the noexecute prediction: each Pod's entry dropped, or set to each other
outcome the six Pods can have (0, 120, 300, never), to a neighbour number, or to something that is
no outcome; and the right prediction written after the lab's taint-eviction controller decided
for a Pod of node-e under the drain taint (judged on the observation)."""

from labkit.apiserver.target import for_env
from labkit.exercises import wait_for, write_answer
from labkit.mutants import Mutant, answer_mutants

OUTCOMES = (0, 120, 300, "never")


def mutants(ctx):
    answer = ctx.answer()
    alternatives = {name: [v for v in (*OUTCOMES, 30, "soon") if v != value] for name, value in answer.items()}

    def names(edit):
        if edit.op == "drop" or edit.after == "soon":
            return (edit.key,)
        return ("prediction is not right",)
    yield from answer_mutants(answer, alternatives=alternatives, names=names)
    yield Mutant("extra-pod", "answer: a Pod that is not on the node added", names=("web", "does not read"),
                 answer={**answer, "web": 0})
    checks = ctx.lab._load("checks.py")
    obs = checks.observe_noexecute(ctx)

    def watch_first(env):
        """Taint node-e, wait for plain's eviction, then write the same prediction again."""
        target = for_env(env)
        target.kubectl("taint", "node", "node-e", "drain=now:NoExecute")
        client = target.client()
        assert wait_for(lambda: (client.get_or_none("v1", "pods", "plain", "sched") or {"metadata": {"x": 1}})
                        ["metadata"].get("deletionTimestamp"), timeout=30, interval=0.1)
        write_answer(env, "noexecute", answer)
    tried = {"at": 0.0, "time": "00:00:00", "pod": "sched/plain",
             "what": "the taint-eviction controller decided for the Pod sched/plain on node-e under the taint "
                     "drain=now:NoExecute"}
    yield Mutant("written-after-eviction", "the right prediction, written after the first eviction from node-e",
                 names=("tried the experiment", "after"), observation={**obs, "tried": tried}, apply=watch_first)
