"""attemptToDeleteItem classifies each owner reference by a live lookup of the owner's UID in the
dependent's namespace: the ghost owner is dangling, so `orphan` (no solid owner) is deleted and
`shared` keeps only its solid owner (the GC patches the dangling reference away); `stranger`'s
owner is not in its namespace, so it is dangling too, and the GC records OwnerRefInvalidNamespace."""

import yaml

from labkit.exercises import answer_path


def solve(env):
    path = answer_path(env.lab.id, "predict-dangling")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"orphan": "deleted", "shared": "kept", "shared_owners": ["anchor"],
                                    "stranger": "deleted", "stranger_event": "OwnerRefInvalidNamespace"}))
