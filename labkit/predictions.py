"""Predictions come before the outcome: one mechanism for every lab's prediction exercises.

A prediction exercise (lab.yaml: `withheld_by`, the labkit commands that can show its outcome)
asks the student to work an outcome out before seeing it. The lab's own tools compute exactly that
outcome, so:

- a tool asks `reveal` (or a `Gate`) before it shows an exercise's outcome. While no answer is
  recorded, the tool withholds it and says so (`refusal`: which exercise, which answer file to
  write; never the answer);
- once an answer is recorded, the first time a tool shows the outcome the answer is kept as it is
  then (<lab state>/predictions/<exercise>.yaml, with which tool showed what situation, and when),
  and the exercise's check grades that kept copy (`graded_text`): a prediction rewritten after its
  outcome was shown is a copy of the outcome, not a prediction.

"Recorded" is, per exercise, one of two rules, chosen by the lab: `written` (the answer file holds
an answer the lab calls complete) or `checked` (the exercise's check has seen one whole, `record`,
and the answer file still holds it: `changed_since_checked`).

Which results are an exercise's outcome is the lab's to say, by what the result depends on rather
than the file it came from: a *situation key* (a JSON text of everything the outcome depends on
and nothing else: no names, no order that does not count). The lab computes the keys of the
exercise's own situation; a tool computes the key of what it is about to show; equal keys are the
same outcome, so a hand-made near-copy of the exercise's scenario is withheld as the scenario is
(`Gate.about`).

Reset rule (labkit.runner.reset, for every lab): a reset, of one exercise or of the whole lab,
keeps the answer file and the kept prediction, as it keeps recorded passes: what was shown cannot
be unseen, and a reset must not be a way to see the outcome and then answer again. Only an
explicit `labkit reset LAB EXERCISE --forget-prediction` forgets the kept copy (`forget`); it is
recorded (<lab state>/predictions/forgotten.json), and every later check result of the exercise
carries it (`grade_details`), so an instructor sees it in the grade report.

Trying the experiment by hand in the lab's own environment shows the outcome too (the gc lab's
cluster, say, whose logs say when). A lab keeps the first such try it finds (`keep_trial`: when,
and what), before a reset would clear the logs that show it; like a kept prediction it outlives
every reset, and only `--forget-prediction` forgets it (recorded as above).

The student is root on their machine and could read labkit's files: this keeps labkit's tools from
answering, it is not a security boundary.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import yaml

from labkit import paths

DIR = "predictions"
ANSWERED = "answered.json"      # the exercises whose check has seen an answer (rule `checked`)
FORGOTTEN = "forgotten.json"

WRITTEN, CHECKED_RULE = "written", "checked"


@dataclass(frozen=True)
class Kept:
    text: str           # the answer file as it was when a tool first showed the outcome
    tool: str           # the command that showed it
    at: float           # when (epoch seconds)
    situation: str | None = None    # what it showed, in the tool's words, when it said
    written: float | None = None    # when the answer file kept was last written (its mtime), when known


def _state_dir(lab_id: str) -> Path:
    from labkit.state import LabState
    return LabState(lab_id).dir


def directory(lab_id: str) -> Path:
    return _state_dir(lab_id) / DIR


def kept_path(lab_id: str, exercise_id: str) -> Path:
    return directory(lab_id) / f"{exercise_id}.yaml"


def _info_path(lab_id: str, exercise_id: str) -> Path:
    return directory(lab_id) / f"{exercise_id}.json"


def _checked_path(lab_id: str, exercise_id: str) -> Path:
    return directory(lab_id) / f"{exercise_id}.checked.yaml"


def kept(lab_id: str, exercise_id: str) -> Kept | None:
    """The prediction kept when a tool first showed the exercise's outcome, or None."""
    try:
        text = kept_path(lab_id, exercise_id).read_text()
        info = json.loads(_info_path(lab_id, exercise_id).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    written = info.get("written")
    return Kept(text, str(info.get("tool", "")), float(info.get("at", 0)), info.get("situation"),
                float(written) if isinstance(written, (int, float)) else None)


def answer_text(lab_id: str, exercise_id: str) -> str | None:
    """The answer file's text, or None when there is none (missing, unreadable, blank)."""
    try:
        text = paths.answer_path(lab_id, exercise_id).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.strip() else None


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def record(lab_id: str, exercise_id: str, text: str | None = None) -> None:
    """The exercise's check saw an answer (`text`; rule `checked`): its tools may show the outcome
    from now on. The text is kept aside as checked, so that an answer file removed before a tool
    shows the outcome still leaves the checked one to keep."""
    path = directory(lab_id) / ANSWERED
    done = _read_json(path, [])
    if exercise_id not in done:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(sorted(set(done) | {exercise_id})))
    if kept(lab_id, exercise_id) is None:
        if text is not None:
            _checked_path(lab_id, exercise_id).write_text(text)
        else:       # nothing to hold the answer file to (changed_since_checked)
            _checked_path(lab_id, exercise_id).unlink(missing_ok=True)


def checked(lab_id: str, exercise_id: str) -> bool:
    return exercise_id in _read_json(directory(lab_id) / ANSWERED, [])


def changed_since_checked(lab_id: str, exercise_id: str) -> bool:
    """Rule `checked`: the answer file holds another text than the one its check last saw whole
    (`record`). A tool shows the outcome, and keeps the answer file as it is then, only for an
    answer the check has seen: an answer changed since, half-written or misspelt, kept it could
    only fail. False when the check kept no text (the answer judged against a changed situation)
    or the answer file is gone (the checked text is kept)."""
    try:
        seen = _checked_path(lab_id, exercise_id).read_text()
    except (OSError, UnicodeDecodeError):
        return False
    text = answer_text(lab_id, exercise_id)
    return text is not None and text != seen


def recorded(lab_id: str, exercise_id: str, rule: str = WRITTEN,
             complete: Callable[[str], bool] | None = None) -> bool:
    """Whether the student's answer counts as recorded: kept already, or by `rule`."""
    if kept(lab_id, exercise_id) is not None:
        return True
    if rule == CHECKED_RULE:
        return checked(lab_id, exercise_id) and not changed_since_checked(lab_id, exercise_id)
    text = answer_text(lab_id, exercise_id)
    return text is not None and (complete is None or complete(text))


def keep(lab_id: str, exercise_id: str, tool: str, situation: str | None = None) -> Kept | None:
    """A tool is showing the exercise's outcome: keep the answer as it is now, the first time only
    (the one its check saw when the answer file is gone). The kept prediction, or None when there
    is no answer to keep."""
    found = kept(lab_id, exercise_id)
    if found is not None:
        return found
    text = answer_text(lab_id, exercise_id)
    written = None
    if text is None:
        try:
            text = _checked_path(lab_id, exercise_id).read_text()
        except OSError:
            return None
    else:
        try:       # a lab that sees when its experiment was tried can tell a prediction written before it
            written = paths.answer_path(lab_id, exercise_id).stat().st_mtime
        except OSError:
            written = None
    now = round(time.time(), 3)
    info = {"tool": tool, "at": now, **({"situation": situation} if situation else {}),
            **({"written": written} if written is not None else {})}
    directory(lab_id).mkdir(parents=True, exist_ok=True)
    _info_path(lab_id, exercise_id).write_text(json.dumps(info))
    kept_path(lab_id, exercise_id).write_text(text)
    return Kept(text, tool, now, situation, written)


def reveal(lab_id: str, exercise_id: str, tool: str, *, situation: str | None = None, rule: str = WRITTEN,
           complete: Callable[[str], bool] | None = None) -> bool:
    """A tool is about to show the exercise's outcome: True when it may (an answer is recorded; it
    is kept as it is now unless one was kept before), False when it must withhold it."""
    if not recorded(lab_id, exercise_id, rule, complete):
        return False
    keep(lab_id, exercise_id, tool, situation)
    return True


def reveal_or_refuse(lab_id: str, exercise_id: str, tool: str, situation: str, what: str) -> str | None:
    """A tool is about to play and show `situation` (a scenario file), which answers the exercise:
    None when it may (an answer is recorded, and is kept as it is now the first time), else what
    to say instead: `what` the situation is, where the exercise is shown, and how to record an
    answer."""
    if reveal(lab_id, exercise_id, tool, situation=situation):
        return None
    return f"{what} (`labkit show {lab_id} {exercise_id}`): " + how_to_record(lab_id, exercise_id)


def how_to_record(lab_id: str, exercise_id: str, rule: str = WRITTEN) -> str:
    """How the student records an answer, and what follows: for every refusal."""
    where = paths.answer_path(lab_id, exercise_id)
    record_it = (f"write your prediction to {where} and run `labkit check {lab_id} {exercise_id}`"
                 if rule == CHECKED_RULE else f"write your prediction to {where} first")
    if rule == CHECKED_RULE and checked(lab_id, exercise_id) and changed_since_checked(lab_id, exercise_id):
        record_it = (f"your {where} changed since `labkit check {lab_id} {exercise_id}` last read it whole: "
                     f"run it again")
    return f"{record_it}; from then on labkit shows it, and the check grades your prediction as it was at that moment"


def refusal(lab_id: str, exercise_id: str, what: str | None = None, rule: str = WRITTEN) -> str:
    """What a tool says instead of the outcome: which exercise, which answer file to write."""
    lead = f"{what} withheld: exercise" if what else "withheld: exercise"
    how = how_to_record(lab_id, exercise_id, rule)
    return f"{lead} {exercise_id} of lab {lab_id} asks you to work it out. {how[0].upper()}{how[1:]}"


def kept_note(lab_id: str, exercise_id: str) -> str:
    """A note for the student when a tool has just kept their answer."""
    return (f"labkit keeps your {exercise_id} answer as it is now ({kept_path(lab_id, exercise_id)}): that is what "
            f"`labkit check {lab_id} {exercise_id}` grades (changes after this do not count)")


class Gate:
    """Asked situation by situation while a tool computes results: which exercise, if any, a result
    about to be shown would answer while it is unanswered; an answered one's answer is kept as the
    result is shown. `keys(exercise)` gives the situation keys of the exercise's own scenario (built
    once, on first need)."""

    def __init__(self, lab_id: str, exercises: Iterable[str], tool: str, keys: Callable[[str], Iterable[str]],
                 rule: str = WRITTEN):
        self.lab_id, self.tool, self.rule, self._keys = lab_id, tool, rule, keys
        exercises = list(exercises)
        self.pending = [ex for ex in exercises if not recorded(lab_id, ex, rule)]
        # recorded exercises whose outcome no tool has shown yet: the first showing keeps the answer
        self.unkept = [ex for ex in exercises if ex not in self.pending and kept(lab_id, ex) is None]
        self._known: dict[str, set[str]] = {}

    def watching(self, exercise: str) -> bool:
        return exercise in self.pending or exercise in self.unkept

    def _own(self, exercise: str) -> set[str]:
        if exercise not in self._known:
            self._known[exercise] = set(self._keys(exercise))
        return self._known[exercise]

    def shown(self, exercise: str, situation: str | None = None) -> None:
        """The exercise's (recorded) outcome is about to be shown: keep its answer."""
        if exercise in self.unkept:
            keep(self.lab_id, exercise, self.tool, situation)
            self.unkept.remove(exercise)

    def about(self, key: Callable[[str], str] | str, exercises: Iterable[str] | None = None,
              situation: str | None = None) -> str | None:
        """The unanswered exercise whose outcome a result with situation `key` (a text, or a
        function of the exercise giving one) would show, or None; answered ones are kept."""
        found = []
        for ex in list(exercises if exercises is not None else (*self.pending, *self.unkept)):
            if not self.watching(ex):
                continue
            if (key(ex) if callable(key) else key) in self._own(ex):
                found.append(ex)
        for ex in found:
            if ex not in self.pending:
                self.shown(ex, situation)
        return next((ex for ex in found if ex in self.pending), None)


def _trial_path(lab_id: str, exercise_id: str) -> Path:
    return directory(lab_id) / f"{exercise_id}.tried.json"


def kept_trial(lab_id: str, exercise_id: str) -> dict | None:
    """The first try of the exercise's experiment in the lab's own environment that the lab kept
    (keep_trial), or None: {at (epoch seconds), and the lab's own fields (what, how, ...)}."""
    found = _read_json(_trial_path(lab_id, exercise_id), None)
    return found if isinstance(found, dict) and "at" in found else None


def keep_trial(lab_id: str, exercise_id: str, trial: dict) -> dict:
    """The lab found that the student tried the exercise's experiment by hand (its logs say when:
    trial["at"], epoch seconds): keep the earliest such try, so that a reset, which clears or
    skips those logs, cannot unsee it. Returns the try kept."""
    found = kept_trial(lab_id, exercise_id)
    if found is not None and float(found["at"]) <= float(trial["at"]):
        return found
    directory(lab_id).mkdir(parents=True, exist_ok=True)
    _trial_path(lab_id, exercise_id).write_text(json.dumps(trial))
    return trial


class TrialNote(str):
    """A line of a lab's keep_student_work saying that it kept a try of `exercise`'s experiment
    (keep_trial). A reset with --forget-prediction forgets that try in the same breath, so the
    runner says that it was forgotten instead of this line (labkit.runner.reset)."""
    exercise: str


def trial_note(exercise_id: str, text: str) -> TrialNote:
    note = TrialNote(text)
    note.exercise = exercise_id
    return note


def mapping_problem(text: str) -> tuple[dict | None, str | None]:
    """A tool's first look at an answer text before it shows an outcome: (the mapping, None), or
    (None, what keeps the text from being one: not YAML, a key given twice, not a mapping). Each
    lab's prediction_problem goes on to the exercise's own parts; none says what is right."""
    from labkit.strict import key_positions

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        if getattr(exc, "problem", "") == "but found another document":     # as CheckContext.answer says
            return None, "it holds more than one YAML document (an answer is one document)"
        return None, "it is not valid YAML"
    for positions in key_positions(text)[:1]:
        if positions.duplicates:
            line, key = positions.duplicates[0]
            return None, f"it gives {key} twice (line {line + 1})"
    if not isinstance(data, dict):
        return None, "it is not a YAML mapping"
    return data, None


def graded_text(lab_id: str, exercise_id: str) -> tuple[str | None, str]:
    """The answer text the check grades, and a note: the kept prediction, when a tool has shown the
    outcome (note says so), else None (the check reads the answer file)."""
    found = kept(lab_id, exercise_id)
    if found is None:
        return None, ""
    return found.text, (f" (judged on your prediction as it was when `{found.tool}` first showed you the outcome; "
                        "changes after that do not count)")


def graded_answer(ctx) -> tuple[object, str]:
    """(the answer a prediction exercise's check grades, a note): the kept prediction, parsed, when
    a tool has shown the outcome; else the answer file (CheckContext.answer). A kept prediction
    that is not YAML, or gives a key twice, fails: it is what was predicted."""
    from labkit.errors import CheckFailed
    from labkit.strict import key_positions

    text, note = graded_text(ctx.lab.id, ctx.exercise.id)
    if text is None:
        return ctx.answer(), ""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if data is None:
        raise CheckFailed("your answer was not valid YAML when its outcome was shown" + note)
    for positions in key_positions(text)[:1]:
        if positions.duplicates:
            line, key = positions.duplicates[0]
            raise CheckFailed(f"your answer gave {key} twice (line {line + 1}) when its outcome was shown" + note)
    return data, note


def forget(lab_id: str, exercise_id: str, why: str) -> Kept | None:
    """Forget the kept prediction, the recorded answer and a kept try (`labkit reset ... --forget-prediction`):
    the tools withhold the outcome again until an answer is recorded. Recorded in forgotten.json,
    with the text forgotten, for the grade report. Returns what was kept, or None."""
    found = kept(lab_id, exercise_id)
    was_checked = checked(lab_id, exercise_id)
    trial = kept_trial(lab_id, exercise_id)
    for path in (kept_path(lab_id, exercise_id), _info_path(lab_id, exercise_id), _checked_path(lab_id, exercise_id),
                 _trial_path(lab_id, exercise_id)):
        path.unlink(missing_ok=True)
    marker = directory(lab_id) / ANSWERED
    done = _read_json(marker, [])
    if exercise_id in done:
        marker.write_text(json.dumps(sorted(set(done) - {exercise_id})))
    if found is not None or was_checked or trial is not None:
        log = _read_json(directory(lab_id) / FORGOTTEN, [])
        log.append({"exercise": exercise_id, "at": round(time.time(), 3), "why": why,
                    "kept_by": found.tool if found else None, "kept_at": found.at if found else None,
                    "kept_text": found.text if found else None, **({"tried": trial} if trial else {})})
        directory(lab_id).mkdir(parents=True, exist_ok=True)
        (directory(lab_id) / FORGOTTEN).write_text(json.dumps(log, indent=1))
    return found


def forgotten(lab_id: str, exercise_id: str) -> list[dict]:
    """Each time the exercise's kept prediction was forgotten, oldest first."""
    return [e for e in _read_json(directory(lab_id) / FORGOTTEN, []) if e.get("exercise") == exercise_id]


def grade_details(lab_id: str, exercise_id: str) -> dict:
    """What a check result of a prediction exercise carries for the grade report: the kept
    prediction's tool and time, and every time one was forgotten."""
    out: dict = {}
    found = kept(lab_id, exercise_id)
    if found is not None:
        out["prediction_kept"] = {"by": found.tool, "at": found.at, **({"situation": found.situation}
                                                                         if found.situation else {})}
    trial = kept_trial(lab_id, exercise_id)
    if trial is not None:
        out["experiment_tried"] = trial
    gone = forgotten(lab_id, exercise_id)
    if gone:
        out["predictions_forgotten"] = [{"at": e["at"], "why": e["why"], "kept_by": e.get("kept_by"),
                                         **({"tried": e["tried"]} if e.get("tried") else {})} for e in gone]
    return out
