"""nightly asks for 2 CPUs and was created with spec.nodeName node-c, a node of 1 CPU: no scheduler
saw it, and node-c's kubelet admission refused it (OutOfcpu, requested 2000, capacity 1000).
spec.nodeName cannot be updated and a Failed Pod never runs again: the Pod is made again, the
same but without nodeName, and the scheduler binds it to a node with 2 CPUs free (node-b or
node-e: node-a and node-d are tainted, node-c and node-f have too little CPU)."""

import copy
import json

from labkit.apiserver.target import for_env
from labkit.exercises import write_answer


def solve(env):
    # the Pod's status: reason OutOfcpu, "Pod was rejected: Node didn't have enough resource: cpu,
    # requested: 2000, used: 0, capacity: 1000"
    write_answer(env, "node-name", {"reason": "OutOfcpu", "requested": 2000, "used": 0, "capacity": 1000})
    target = for_env(env)
    pod = copy.deepcopy(env.lab.environment_module().NIGHTLY)
    del pod["spec"]["nodeName"]
    target.kubectl("delete", "pod", "nightly", "-n", "sched")
    target.kubectl("create", "-n", "sched", "-f", "-", input=json.dumps(pod))
