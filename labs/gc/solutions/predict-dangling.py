"""attemptToDeleteItem classifies each owner reference by a live lookup of the owner's UID in the
dependent's namespace: the ghost owner is dangling, so `orphan` (no solid owner) is deleted and
`shared` keeps only its solid owner (the GC patches the dangling reference away); `stranger`'s
owner is not in its namespace, so it is dangling too, and the GC records OwnerRefInvalidNamespace."""

from labkit.exercises import write_answer


def solve(env):
    write_answer(env, "predict-dangling", {"orphan": "deleted", "shared": "kept", "shared_owners": ["anchor"],
                                           "stranger": "deleted", "stranger_event": "OwnerRefInvalidNamespace"})
