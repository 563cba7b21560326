"""Reference solution, worked out by hand.

trainer: gpu [{0,1} preferred] x cpu [{0} p, {1} p, {0,1}]. Every combination mixes different masks
or a non-preferred hint, so none is preferred: {0}, {1}, {0,1}. The most demanding provider (GPUs)
needs 2 nodes, so among non-preferred hints {0,1} wins. best-effort admits it, restricted rejects
it; single-numa-node drops the GPU hint (2 nodes), leaving no combination: nil, rejected.
feeder: nic [{0} p, {1} p] x cpu [...]: {0} and {1} are preferred; the narrowest tie goes to the
lower mask: {0}, preferred, admitted by all three policies.
"""

import yaml

from labkit.exercises import answer_path

ANSWER = {
    "trainer": {
        "best-effort": {"mask": [0, 1], "preferred": False, "admit": True},
        "restricted": {"mask": [0, 1], "preferred": False, "admit": False},
        "single-numa-node": {"mask": None, "preferred": False, "admit": False},
    },
    "feeder": {policy: {"mask": [0], "preferred": True, "admit": True}
               for policy in ("best-effort", "restricted", "single-numa-node")},
}


def solve(env):
    path = answer_path(env.lab.id, "merge")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ANSWER))
