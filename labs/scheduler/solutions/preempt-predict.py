"""urgent needs 3 CPUs. On node-1, without the lower-priority Pods there are 4 free; web-a
(priority 500) is put back first, then neither batch Pod fits besides it: victims batch-a and
batch-b. On node-2 both etl Pods must go, and the PodDisruptionBudget allows no disruption: two
violations. Fewest PDB violations comes first, so node-1 is nominated (without the budget node-2
would win, its victims having the lower priority)."""

from labkit.exercises import write_answer


def solve(env):
    write_answer(env, "preempt-predict", {"node": "node-1", "victims": ["batch-a", "batch-b"]})
