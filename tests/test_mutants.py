"""Mechanically generated near-misses of every reference solution (labs/<lab>/mutants/<exercise>.py,
run by labkit/mutants.py): each must fail its check with a message naming what is wrong, unless
labkit's reconstruction proves it equivalent (then it must pass). A survivor fails its exercise's
test here, as does a mutant the check fails without naming it, one proven equivalent that fails,
and a live application whose verdict differs from the in-process one.

Each lab is driven in its own labkit instance and process (`python test_mutants.py LAB` prints the
reports as JSON), the labs at the same time. Most mutants are judged in-process against the
check's own judge; one of each exercise's is also applied live, a fixed sample in which the kinds
of mutation take turns over the lab's exercises (labkit.mutants.live_sample), and
LABKIT_MUTANTS_LIVE=1 applies every one of them live. LABKIT_MUTANT_REPORT=FILE writes the
per-lab counts there (scripts/mutants prints them).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import TEST_LABS, drive_labs  # noqa: E402
from labkit import mutants  # noqa: E402
from labkit.labs import discover, load_lab  # noqa: E402
from support import REPO  # noqa: E402

# MUTANTS_AWAITED: exercises of the built-in labs that have no mutants yet, with the reason. Every
# other exercise must have labs/<lab>/mutants/<exercise>.py; an entry here whose exercise has its
# mutants now fails the test too (remove it).
MUTANTS_AWAITED: dict[tuple[str, str], str] = {}


@functools.cache
def _labs() -> dict:
    os.environ.setdefault("LABKIT_LABS_PATH", str(TEST_LABS))
    return {lab_id: load_lab(directory) for lab_id, directory in discover().items()}


def _cases():
    return [pytest.param(lab_id, ex.id, id=f"{lab_id}/{ex.id}")
            for lab_id, lab in _labs().items() for ex in lab.exercises if mutants.module_of(lab, ex) is not None]


def drive(lab_id: str) -> list[dict]:
    lab = _labs()[lab_id]
    reports = []
    applied: dict[str, int] = {}        # the kinds applied live so far, for the stratified sample
    for exercise in lab.exercises:
        if mutants.module_of(lab, exercise) is None:
            continue
        try:
            reports.append(mutants.run_exercise(lab, exercise.id, applied=applied).to_dict())
        except Exception as exc:
            import traceback
            reports.append({"lab": lab_id, "exercise": exercise.id, "verdicts": [],
                            "problem": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"})
    return reports


@pytest.fixture(scope="module")
def reports(request, tmp_path_factory):
    found = drive_labs(request, tmp_path_factory, __file__, "mutants", timeout=1500)
    out = {(r["lab"], r["exercise"]): r for records in found.values() for r in records}
    target = os.environ.get("LABKIT_MUTANT_REPORT")
    if target:
        Path(target).write_text(json.dumps(list(out.values()), indent=1))
    return out


def test_every_exercise_has_mutants():
    lacking = [(lab_id, ex.id) for lab_id, lab in _labs().items() if lab.directory.parent in (REPO / "labs", TEST_LABS)
               for ex in lab.exercises if mutants.module_of(lab, ex) is None]
    missing = [f"  {lab}/{ex}" for lab, ex in lacking if (lab, ex) not in MUTANTS_AWAITED]
    assert not missing, "exercises without mutants (labs/<lab>/mutants/<exercise>.py):\n" + "\n".join(missing)
    arrived = [f"{lab}/{ex}" for lab, ex in sorted(MUTANTS_AWAITED) if (lab, ex) not in lacking]
    assert not arrived, f"MUTANTS_AWAITED names exercises that have their mutants now (remove them): {arrived}"


@pytest.mark.parametrize("lab_id,exercise", _cases())
def test_every_mutant_is_killed_or_proven_equivalent(reports, lab_id, exercise):
    report = reports[(lab_id, exercise)]
    assert not report["problem"], f"{lab_id}/{exercise}: {report['problem']}"
    assert report["verdicts"], f"{lab_id}/{exercise}: no mutants were generated"
    bad = [v for v in report["verdicts"] if v["outcome"] not in (mutants.KILLED, mutants.EQUIVALENT)]
    lines = [f"  {v['outcome']}: {v['mutant']} ({v['change']}): {v['status']}: {v['message'][:300]}" for v in bad]
    assert not bad, f"{lab_id}/{exercise}: {len(bad)} of {len(report['verdicts'])} mutants not killed:\n" + "\n".join(lines)


@pytest.mark.parametrize("lab_id,exercise", _cases())
def test_mutants_applied_live_get_the_same_verdict(reports, lab_id, exercise):
    report = reports[(lab_id, exercise)]
    assert not report["problem"], f"{lab_id}/{exercise}: {report['problem']}"
    by_observation = [v for v in report["verdicts"] if v["judged_by"] == "observation"]
    live = [v for v in by_observation if v["live"]]
    assert live or not by_observation, f"{lab_id}/{exercise}: no mutant judged by observation was applied live"
    differ = [f"  {v['mutant']}: in-process {v['outcome']} ({v['message'][:200]}); live {v['live']['outcome']} "
              f"({v['live']['message'][:200]})" for v in live if v["live"]["outcome"] != v["outcome"]]
    assert not differ, f"{lab_id}/{exercise}: judged in-process and live differently:\n" + "\n".join(differ)


# -- the generators and the verdicts, on their own --------------------------------------------------

def test_tree_edits_drop_change_and_reorder_one_thing_at_a_time():
    value = {"a": {"b": 1, "c": [True, "x"]}}
    edits = list(mutants.tree_edits(value, alternatives={"a.c[1]": ["y"]}))
    described = {(e.op, e.path, str(e.after)) for e in edits}
    assert ("drop", "a.b", "None") in described and ("set", "a.b", "2") in described
    assert ("set", "a.c[0]", "False") in described and ("set", "a.c[1]", "y") in described
    assert ("swap", "a.c", "['x', True]") in described and ("drop-item", "a.c[1]", "None") in described
    for edit in edits:      # each a changed copy; the original stays as it was
        assert edit.value != value
    assert value == {"a": {"b": 1, "c": [True, "x"]}}
    assert not [e for e in mutants.tree_edits(value, skip=lambda p: p.startswith("a.c")) if e.path.startswith("a.c")]


def test_iptables_edits_treat_a_match_module_with_its_options_as_one_option():
    rule = ["-A", "KUBE-SERVICES", "-d", "10.96.0.30/32", "-p", "tcp", "-m", "comment", "--comment", "x y",
            "-m", "tcp", "--dport", "80", "-j", "KUBE-SVC-X"]
    assert [o for _s, _e, o in mutants.option_spans(rule)] == ["-d", "-p", "-m comment", "-m tcp", "-j"]
    edits = list(mutants.iptables_edits([rule], values={"--dport": ["8080"], "-j": ["KUBE-SVC-Y"]}))
    kinds = {(e.op, e.option) for e in edits}
    assert ("drop-rule", None) in kinds and ("drop-option", "-m tcp") in kinds and ("negate", "-d") in kinds
    dropped_port = next(e for e in edits if e.op == "drop-option" and e.option == "-m tcp")
    assert dropped_port.rules == [rule[:10] + rule[14:]]
    assert any(e.op == "set" and e.rules[0][-1] == "KUBE-SVC-Y" for e in edits)
    negated = next(e for e in edits if e.op == "negate" and e.option == "-d")
    assert negated.rules[0][2:5] == ["!", "-d", "10.96.0.30/32"]


def test_the_live_sample_is_one_per_exercise_and_the_kinds_take_turns():
    def m(name, observation=True):
        return mutants.Mutant(name, name, observation=1 if observation else mutants._UNSET, apply=lambda env: None)
    first = [m("set:a=1"), m("set:a=2"), m("set:b=0"), m("drop:a"), m("drop:b"), m("swap:c"), m("only-live", False)]
    applied: dict[str, int] = {}
    assert mutants.live_sample(first, False, applied) == {"set:a=2"}     # the first kind, its middle one
    assert mutants.live_sample(first, False, applied) == {"drop:b"}      # then a kind not applied yet
    assert mutants.live_sample(first, False, applied) == {"swap:c"}
    assert mutants.live_sample(first, False, applied) == {"set:a=2"}     # every kind once: round again
    assert applied == {"set": 2, "drop": 1, "swap": 1}
    assert mutants.live_sample(first, False, {}) == mutants.live_sample(first, False, {})    # fixed
    assert mutants.live_sample(first, True) == {m.name for m in first[:6]}                 # every one
    assert mutants.live_sample([m("only-live", False)], False, {}) == set()


def test_a_mutant_that_passes_is_a_survivor_unless_proven_equivalent():
    from labkit.exercises import CheckResult
    passed = CheckResult("x", "X", "pass", 1, 1, "fine")
    failed = CheckResult("x", "X", "fail", 0, 1, "the port is wrong")
    plain = mutants.Mutant("m", "changed", names=("port",))
    proven = mutants.Mutant("e", "same", equivalent="same packets")
    assert mutants.outcome_of(plain, passed) == mutants.SURVIVED
    assert mutants.outcome_of(plain, failed) == mutants.KILLED
    assert mutants.outcome_of(mutants.Mutant("m", "c", names=("address",)), failed) == mutants.UNNAMED
    assert mutants.outcome_of(proven, passed) == mutants.EQUIVALENT
    assert mutants.outcome_of(proven, failed) == mutants.FALSE_FAIL


if __name__ == "__main__":
    sys.stdout.write(json.dumps(drive(sys.argv[1])))
