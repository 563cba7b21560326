"""Common wrong predictions in terminating-create."""

from labkit.exercises import mistake, write_answer


def _answer(env, error):
    write_answer(env, "terminating-create", {"error": error})


@mistake("403 (Forbidden)")
def thinks_it_is_gone(env):
    """Predicts a Terminating namespace answers as if it did not exist."""
    _answer(env, 'Error from server (NotFound): namespaces "attic" not found')


@mistake("close, but not the exact message")
def paraphrases(env):
    """Predicts the gist (forbidden, terminating) in words of its own."""
    _answer(env, 'Error from server (Forbidden): configmaps "late" is forbidden: namespace attic is terminating')
