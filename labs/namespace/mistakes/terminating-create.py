"""Common wrong predictions in terminating-create."""

import yaml

from labkit.exercises import answer_path, mistake


def _answer(env, error):
    path = answer_path(env.lab.id, "terminating-create")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"error": error}))


@mistake("403 (Forbidden)")
def thinks_it_is_gone(env):
    """Predicts a Terminating namespace answers as if it did not exist."""
    _answer(env, 'Error from server (NotFound): namespaces "attic" not found')


@mistake("close, but not the exact message")
def paraphrases(env):
    """Predicts the gist (forbidden, terminating) in words of its own."""
    _answer(env, 'Error from server (Forbidden): configmaps "late" is forbidden: namespace attic is terminating')
