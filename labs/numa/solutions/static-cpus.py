"""Reference solution, worked out by hand.

dual-socket-ht: node 0 = cores (0,6) (2,8) (4,10), node 1 = cores (1,7) (3,9) (5,11).
kubeReserved cpu 1 -> takeByTopology(all, 1) = CPU 0.
alpha 2 -> node 0, a whole free core: 2,8. beta/a 1 -> node 0, the half-used core 0 first: 6;
beta/b 500m -> shared. gamma 4 -> node 0 has only 4,10 left: node 1, whole cores 1,7 and 3,9.
delta is Burstable -> shared. epsilon 3 -> no node has 3 free: {0,1}; whole core 4,10, then one
more CPU: 5. Left in the pool: 0 (reserved, still shared) and 11.
"""

import yaml

from labkit.exercises import answer_path

ANSWER = {"cpus": {"alpha/main": "2,8", "beta/a": "6", "beta/b": "shared", "gamma/main": "1,3,7,9",
                   "delta/web": "shared", "epsilon/main": "4-5,10"},
          "defaultCpuSet": "0,11"}


def solve(env):
    path = answer_path(env.lab.id, "static-cpus")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ANSWER))
