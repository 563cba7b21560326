"""README, "Predictions": while an answer can still earn points, its feedback names neither which
of its few-valued cells (true/false, a small count, a choice among a handful, a probability
kube-proxy writes) are wrong nor how many. Each check's grading part is run in-process on wrong
answers that differ in which cell is wrong, or in how many: what the student reads (the message
and what was expected) must be the same for all of them, and must not carry the cell's name."""

from __future__ import annotations

from types import SimpleNamespace

from labkit.exercises import CheckContext, CheckFailed
from labkit.labs import get_lab


class Context(CheckContext):
    """A check's context without a lab's state: every wrong answer is the first one checked."""

    def count_wrong_answer(self) -> int:
        return 1


def context(lab_id: str, exercise_id: str):
    lab = get_lab(lab_id)
    return Context(SimpleNamespace(lab=lab), lab.exercise(exercise_id)), lab._load("checks.py")


def shown(result) -> str:
    """What the student reads of a failure but the answer they wrote (`observed`)."""
    assert result.status == "fail", result.message
    return f"{result.message}\nexpected: {result.expected}"


def failure(grade, *args) -> str:
    try:
        return shown(grade(*args))
    except CheckFailed as exc:
        return f"{exc.message}\nexpected: {exc.expected}"


def test_follow_the_chain_names_neither_the_wrong_jump_nor_the_number_of_jumps():
    ctx, checks = context("kube-proxy", "follow-the-chain")
    truth = [0.25, 0.3333333333, 0.5, 1]

    def grade(given, built=truth):
        return failure(checks.grade_probabilities, ctx, "node1", "KUBE-SVC-WEB", given, built)
    one = [grade(truth[:i] + [0.33] + truth[i + 1:]) for i in range(3)]
    both = grade([0.25, 0.33, 0.51, 1])
    assert len(set(one + [both])) == 1, one + [both]
    assert "jump" not in both.replace("per jump", "").replace("last jump", "")
    # too few probabilities: the chain's number of jumps (its endpoints) is not told
    assert grade([0.3333333333, 0.5, 1]) == grade([0.3333333333, 0.5, 1], [0.2, 0.25, 0.3333333333, 0.5, 1])
    assert ctx.exercise.points and checks.grade_probabilities(ctx, "node1", "KUBE-SVC-WEB", truth, truth).passed


def test_conditions_names_neither_the_wrong_entry_nor_counts_them():
    ctx, checks = context("namespace", "conditions")
    remaining = {"configmaps.": 2, "secrets.": 1, "widgets.example.com": 3}
    held = {"billing.example.com/audit": 2, "kubernetes.io/pvc-protection": 1}

    def grade(got_remaining, got_held, truth_remaining=remaining):
        return failure(checks.grade_conditions_answer, ctx, "billing", got_remaining, got_held, truth_remaining, held)
    flipped = [grade({**remaining, key: n + 1}, held) for key, n in remaining.items()]
    flipped += [grade(remaining, {**held, key: n + 1}) for key, n in held.items()]
    dropped = [grade({k: v for k, v in remaining.items() if k != key}, held) for key in remaining]
    dropped += [grade(remaining, {k: v for k, v in held.items() if k != key}) for key in held]
    extra = grade({**remaining, "deployments.apps": 1}, held)
    several = grade({**remaining, "secrets.": 5, "configmaps.": 0}, {})
    messages = flipped + dropped + [extra, several]
    # the student's own number of entries may be said (of its N entries), so compare like with like
    assert len(set(flipped)) == 1 and len(set(dropped[:3])) == 1 and len(set(dropped[3:])) == 1, messages
    for message in messages:
        assert not any(key in message for key in [*remaining, *held, "deployments.apps"]), message
        assert "count of" not in message and "missing" not in message, message
    # a count told by the truth: the same answer against another truth reads the same
    assert grade(remaining, held, {**remaining, "secrets.": 2}) == \
        grade(remaining, held, {**remaining, "secrets.": 4, "configmaps.": 1})
    # a key no condition writes is named: its form alone is wrong
    assert "'secrets' lacks the group" in grade({"secrets": 1}, held)


def test_force_finalize_does_not_name_visible_again_or_count_the_missing_objects():
    ctx, checks = context("namespace", "force-finalize")
    left = ["backups.example.com/weekly", "configmaps/app-config", "secrets/token"]

    def grade(got, visible_again, truth=left):
        return failure(checks.grade_force_finalize_answer, ctx, "legacy", got, visible_again, truth)
    flipped = grade(left, False)
    assert "visible_again" not in flipped and "true" not in flipped.lower() and "false" not in flipped.lower()
    assert "what a client sees in the new namespace legacy" in flipped
    missing = [grade(left[:1], True), grade(left[:2], True), grade([], True)]
    assert len(set(missing)) == 1 and "missing from your list" in missing[0], missing
    assert not any(ch.isdigit() for ch in missing[0]), missing[0]
    # an object the student listed wrongly is named: its name is found only by looking
    assert "secrets/tokens: not stored under legacy" in grade(left + ["secrets/tokens"], True)
    assert checks.grade_force_finalize_answer(ctx, "legacy", left, True, left).passed
