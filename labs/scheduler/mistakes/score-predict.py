"""Common wrong predictions in score-predict."""

from labkit.exercises import mistake, write_answer


@mistake("prediction is not right")
def most_room_wins(env):
    """Thinks the node with the most free resources wins (forgets the PreferNoSchedule taint's weight)."""
    write_answer(env, "score-predict", {"node": "node-3", "fit": {"node-1": 50, "node-2": 49, "node-3": 93}})


@mistake("prediction is not right")
def without_the_incoming_pod(env):
    """Scores the nodes with what is on them, without the incoming Pod's requests."""
    write_answer(env, "score-predict", {"node": "node-1", "fit": {"node-1": 75, "node-2": 62, "node-3": 100}})


@mistake("prediction is not right")
def rounds_instead_of_truncating(env):
    """Averages the exact percentages (37.5 and 62.5) and rounds node-2's score."""
    write_answer(env, "score-predict", {"node": "node-1", "fit": {"node-1": 50, "node-2": 50, "node-3": 93}})
