"""Common wrong predictions in predict-dangling."""

from labkit.exercises import mistake, write_answer


def _predict(env, **changes):
    answer = {"orphan": "deleted", "shared": "kept", "shared_owners": ["anchor"], "stranger": "deleted",
              "stranger_event": "OwnerRefInvalidNamespace"}
    answer.update(changes)
    write_answer(env, "predict-dangling", answer)


@mistake("prediction is not right")
def one_dangling_owner_deletes(env):
    """Thinks one dangling owner reference is enough to delete an object."""
    _predict(env, shared="deleted", shared_owners=[])


@mistake("prediction is not right")
def owner_in_another_namespace_counts(env):
    """Thinks an owner reference reaches the anchor of the other namespace, so stranger is kept."""
    _predict(env, stranger="kept", stranger_event="none")


@mistake("prediction is not right")
def dangling_reference_stays(env):
    """Predicts shared is kept with both owner references."""
    _predict(env, shared_owners=["anchor", "ghost"])


@mistake("prediction is not right")
def flips_one_cell(env):
    """Predicts that the orphan, whose only owner never existed, is kept."""
    _predict(env, orphan="kept")
