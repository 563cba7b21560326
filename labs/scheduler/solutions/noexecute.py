"""Each Pod against the taint drain=now:NoExecute (taint_eviction.go processPodOnNode,
getMinTolerationTime): plain tolerates nothing and wrong-effect only NoSchedule, other-value
wants another value: all three are deleted at once; patient matches with tolerationSeconds 120;
stubborn and wildcard (an empty key with Exists tolerates every taint) match without
tolerationSeconds: never."""

from labkit.exercises import write_answer


def solve(env):
    write_answer(env, "noexecute", {"plain": 0, "patient": 120, "stubborn": "never", "wrong-effect": 0,
                                    "wildcard": "never", "other-value": 0})
