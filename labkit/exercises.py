"""The exercise/check model: CheckResult, the context a check gets, answer files, settling.

A check is a function `check(ctx) -> CheckResult` in the lab's checks.py. It inspects live state
(packets, mountinfo, API objects, audit log) or labkit's own reconstruction and says pass or
fail with a message the student can act on.

Feedback policy, the same in every check:
  expected      what the check wanted. For an exercise with an answer file (a finding, a
                prediction) it describes the kind of answer and where to find it, never the value:
                the message names which part is wrong and where to look.
  observed      what the check saw, and `observed_in` says where: in the student's answer
                (ANSWER) or in the live lab (LIVE). It defaults to ANSWER for exercises with an
                answer file and to LIVE for the others.
  right_answer  the value the student was asked to find, computed from live state. Never shown
                to the student: only reports made with answers revealed carry it (an instructor
                after the deadline: `reveal_answers: true` in lab.yaml, `labkit check
                --reveal-answers`, or LABKIT_REVEAL_ANSWERS=1).
Numbers compared with a tolerance show it (`approx`). Messages never print Python reprs of
dicts: reports render values themselves (labkit.grading.show_value).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from labkit import paths
from labkit.errors import CheckFailed

PASS, FAIL, ERROR = "pass", "fail", "error"
ANSWER, LIVE = "your answer", "the live lab"        # where a check observed what it reports
REVEAL_ENV = "LABKIT_REVEAL_ANSWERS"


@dataclass
class CheckResult:
    exercise: str
    title: str
    status: str                  # pass | fail | error
    points: int
    max_points: int
    message: str
    expected: Any = None
    observed: Any = None
    details: dict = field(default_factory=dict)
    duration_s: float = 0.0
    observed_in: str | None = None   # ANSWER or LIVE: where `observed` was seen
    right_answer: Any = None         # withheld unless answers are revealed (see the module docstring)
    recorded: dict | None = None     # the exercise's recorded pass (LabState.credit), if it has one

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_dict(self) -> dict:
        return asdict(self)


class AnswerMissing(CheckFailed):
    """No answer to judge: the file is missing or empty. Not a wrong answer: run_check does not
    count it as one (LabState.answer_tries)."""


class AnswerMalformed(CheckFailed):
    """An answer file that cannot be read as the exercise's answer: not a mapping, a key given
    twice, a key the check reads missing, a value of the wrong type. Its feedback says it is
    malformed; it is not counted as a wrong answer either (run_check)."""

    PREFIX = "your answer is malformed: "

    def __init__(self, message: str, **kwargs):
        super().__init__(message if message.startswith(self.PREFIX) else self.PREFIX + message, **kwargs)


class NotJudged(CheckFailed):
    """The answer cannot be judged yet: the situation it is about is not there (a namespace the
    exercise asks to delete first, a controller that has not finished its pass). The feedback says
    what to do before the answer can be judged; like a missing answer, it is no wrong answer and
    run_check does not count it (LabState.answer_tries)."""


class AnswerUnreadable(AnswerMalformed, AnswerMissing):
    """An answer file that is not YAML: malformed, and nothing of it can be read."""


@dataclass
class Settled:
    value: Any
    settled: bool
    waited_s: float


def settle(probe: Callable[[], Any], *, timeout: float, stable_for: float, interval: float = 0.1) -> Settled:
    """Poll `probe` until its value has stayed the same for `stable_for` seconds.

    For state that converges (controllers, traffic): a check must judge the settled value, never
    a transient one. If the value keeps changing until `timeout`, `settled` is False and the
    check should say the state is still changing rather than pass or fail on it.
    """
    start = time.monotonic()
    value = probe()
    since = time.monotonic()
    while True:
        now = time.monotonic()
        if now - since >= stable_for:
            return Settled(value, True, now - start)
        if now - start >= timeout:
            return Settled(value, False, now - start)
        time.sleep(interval)
        new = probe()
        if new != value:
            value, since = new, time.monotonic()


def wait_for(predicate: Callable[[], Any], *, timeout: float, interval: float = 0.1):
    """Poll until `predicate()` is truthy; returns its last value (falsy on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def approx(value: float, tolerance: float, unit: str = "") -> str:
    """A number as a check compares it: `0.25 ± 0.05` (for `expected`, and in messages)."""
    return f"{value:g} ± {tolerance:g}{' ' + unit if unit else ''}"


def reveal_answers(lab) -> bool:
    """Whether reports may carry right answers: lab.yaml's `reveal_answers`, or
    LABKIT_REVEAL_ANSWERS=1 (an instructor grading after the deadline)."""
    return bool(getattr(lab, "reveal_answers", False)) or \
        os.environ.get(REVEAL_ENV, "").strip().lower() in ("1", "true", "yes")


def mistake(*names: str):
    """Mark `fn(env)` in labs/<lab>/mistakes/<exercise>.py as a common wrong solution.

    Applied to a lab where the exercise is fresh, the exercise's check must fail, and its message
    must contain every one of `names` (compared case-insensitively): the words that tell the
    student which mistake this is. The function's docstring says what the student did.
    """
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError("mistake(...) needs at least one non-empty word the failure message must contain")

    def mark(fn):
        fn.mistake_names = tuple(names)
        return fn

    return mark


def _and(items) -> str:
    """`a`, `a and b`, `a, b and c`."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _yaml_type(value) -> str:
    """What a value (or a type) is called in YAML terms, for messages about answer files."""
    kind = value if isinstance(value, type) else type(value)
    names = {dict: "a mapping", list: "a list", str: "a string", int: "a whole number", float: "a number",
             bool: "true or false", type(None): "empty", object: "a value"}
    return names.get(kind, kind.__name__)


answer_path = paths.answer_path      # where callers have always found it


def write_answer(env, exercise_id: str, data) -> Path:
    """Write an answer file as a student would (reference solutions, common mistakes)."""
    path = answer_path(env.lab.id, exercise_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def failure_digest(message: str) -> str:
    """What tells two failures of an exercise apart (CheckContext.count_wrong_answer): a digest of
    the check's message with its numbers left out (times and process ids change by themselves,
    and a message that says how many wrong answers were checked would differ at every check).
    A digest: what is stored tells nothing of the answer or the feedback."""
    return hashlib.sha256(re.sub(r"\d+", "#", message).encode()).hexdigest()[:16]


class CheckContext:
    """What a check function receives."""

    def __init__(self, env, exercise):
        self.env = env
        self.lab = env.lab
        self.exercise = exercise
        self.params = dict(exercise.params)
        self.counted = False        # the check counted its wrong answer itself (count_wrong_answer)
        # the check found the answer right, or could not read it (missing, malformed), and fails on
        # something else (the live work of an exercise that asks for both): no wrong answer (run_check).
        # False: the check judged the answer apart and found it wrong; then it is counted by the answer
        # alone, as the feedback beside it may be about that work. None: not judged apart.
        self.answer_not_wrong: bool | None = None

    @property
    def answer_path(self) -> Path:
        return answer_path(self.lab.id, self.exercise.id)

    @property
    def ready_time(self) -> float:
        """When this exercise's part of the lab was last built (`labkit run`, `labkit reset`):
        what happened before is not the student's work on it."""
        return self.env.state.ready_time(self.exercise.id)

    def answer(self) -> Any:
        """The student's answer file, parsed; a missing or unreadable file fails the check."""
        path = self.answer_path
        what = f"\nIt must hold: {self.exercise.answer}" if self.exercise.answer else ""
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise AnswerMissing(f"no answer yet: write it to\n  {path}{what}")
        except (OSError, UnicodeDecodeError) as exc:
            raise AnswerMissing(f"cannot read your answer\n  {path}\n{exc}")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f" (line {mark.line + 1})" if mark else ""
            if getattr(exc, "problem", "") == "but found another document":
                # valid YAML, but a stream of several documents (a `---` between them): one is read
                at = f" at line {mark.line + 1}" if mark else ""
                raise AnswerUnreadable(f"it holds more than one YAML document (another starts{at}, after `---`): "
                                       f"an answer is one document\n  {path}{what}")
            raise AnswerUnreadable(f"it is not valid YAML{line}: {getattr(exc, 'problem', exc)}\n  {path}{what}")
        if data is None:
            raise AnswerMissing(f"your answer is empty\n  {path}{what}")
        # a key given twice in one mapping: YAML keeps only the last one, so the student's other
        # value would silently not count (and trying two values in one file would pass on either)
        from labkit.strict import key_positions
        for positions in key_positions(text)[:1]:
            if positions.duplicates:
                line, key = positions.duplicates[0]
                raise AnswerMalformed(f"it gives {key} twice (line {line + 1}): YAML keeps only the last one; "
                                      f"write each key once\n  {path}")
        self.refuse_unknown_keys(data)
        return data

    def refuse_unknown_keys(self, data: Any) -> None:
        """An answer mapping with a key the exercise does not read (lab.yaml `answer_keys`) is
        malformed, also beside all the keys it does read: a misspelled `reasn:` beside `reason:`, or a
        stray `nodes:`, would otherwise be silently ignored. The message names the unknown keys and
        the keys the exercise reads, never a value."""
        wanted = self.exercise.answer_keys
        if not wanted or not isinstance(data, dict):
            return
        unknown = [str(k) for k in data if k not in wanted]
        if not unknown:
            return
        must = f"\nIt must hold: {self.exercise.answer}" if self.exercise.answer else ""
        which = (f"the key {unknown[0]}, which this exercise does not read" if len(unknown) == 1 else
                 f"the keys {', '.join(unknown)}, which this exercise does not read")
        missing = [k for k in wanted if k not in data]
        spelled = " — is it misspelled?" if len(unknown) == 1 and missing else \
            " — is one of them misspelled?" if missing else ""
        reads = f"it reads {_and(wanted)}" if len(wanted) > 1 else f"it reads only {wanted[0]}"
        raise AnswerMalformed(f"it has {which}{spelled} ({reads}; remove or rename the others)\n  {self.answer_path}{must}")

    def answer_field(self, data: Any, key: str, kind: type | tuple = object) -> Any:
        """data[key] from an answer mapping, failing as malformed (AnswerMalformed: not counted as
        a wrong answer) when the answer is no mapping, the key is absent or its value mistyped. An
        absent key's message names the keys the answer has instead (a misspelled `finaliser:`
        for `finalizer:`), never a value; the exercise's `answer` text says which keys it wants."""
        must = f"\nIt must hold: {self.exercise.answer}" if self.exercise.answer else ""
        if not isinstance(data, dict):
            raise AnswerMalformed(f"it should be a YAML mapping with the key {key}, not "
                                  f"{_yaml_type(data)}\n  {self.answer_path}{must}")
        if key not in data:
            others = [str(k) for k in data]
            has = (f"; it has the key {others[0]} instead — is it misspelled?" if len(others) == 1 else
                   f"; it has the keys {', '.join(others)} instead — is one of them misspelled?" if others else "")
            raise AnswerMalformed(f"it has no key {key}{has}\n  {self.answer_path}{must}")
        value = data[key]
        if not isinstance(value, kind):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            if int in kinds and float in kinds:         # "a whole number or a number" says "a number"
                kinds = tuple(k for k in kinds if k is not int)
            raise AnswerMalformed(f"{key} should be {' or '.join(_yaml_type(k) for k in kinds)}, "
                                  f"not {_yaml_type(value)}\n  {self.answer_path}{must}")
        return value

    def graded_digest(self) -> str:
        """What tells different answers apart (LabState.answer_tries): a digest of the answer the
        check grades. That is the prediction labkit kept when a tool first showed the exercise's
        outcome, once there is one (labkit.predictions.graded_text): an answer file edited after that
        grades the kept copy again, and is no different answer. Otherwise the answer file as it is
        (line ends read as the kept copy reads them)."""
        from labkit import predictions
        text, _ = predictions.graded_text(self.lab.id, self.exercise.id)
        if text is not None:
            data = text.encode()
        else:
            try:
                data = self.answer_path.read_bytes()
            except OSError:
                data = b""
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return hashlib.sha256(data).hexdigest()[:16]

    def count_wrong_answer(self, failure: str | None = None) -> int:
        """Record the graded answer as a wrong one; how many different wrong answers were checked.

        A wrong answer is different when the answer graded differs or, with `failure` (the
        check's feedback on it), when that feedback differs (failure_digest): an answer that names
        live state (a kubeconfig's path) stays the same while the student changes what it names.
        A check that judges the answer apart from the live work of an exercise that asks for both
        (answer_not_wrong False) has it counted without its failure: the feedback beside it may be
        about that work (a deletion done another way), and the answer did not change.
        run_check counts a failure with its message; a check whose feedback says the count
        (grid_feedback) counts while it judges, before its message exists: the answer alone, its
        failure being that the answer is not right. run_check then does not count it again."""
        self.counted = True
        attempt = self.graded_digest()
        if failure is not None:
            attempt += "." + failure_digest(failure)
        return self.env.state.answer_tries(self.exercise.id, attempt)

    def grid_feedback(self, wrong: list[str], total: int, what: str = "entries",
                      advice: str = "observe each case in the live lab before you change it",
                      noun: str = "prediction", settled: bool = False) -> str:
        """Feedback on an answer of a few few-valued cells (a prediction, or the findings of a
        reading exercise) that does not let changing cells stand in for observing.

        While the answer can still earn its points, it says that the answer is not right and where
        to look (`advice`), but neither how many cells are wrong nor which: either would let a
        student find the answer by changing one cell at a time, in about as many checks as there
        are cells. The different wrong answers checked are counted (LabState.answer_tries) and a
        pass reports how many came before it (run_check), so an instructor sees an answer found by
        trying. Once the answer is `settled` (the lab froze it, so it can earn nothing more), the
        wrong cells are named, in `wrong`'s order: the feedback teaches without giving points."""
        if settled:
            return (f"{len(wrong)} of the {total} {what} of your {noun} {'is' if len(wrong) == 1 else 'are'} "
                    f"wrong: {', '.join(wrong)}")
        tries = self.count_wrong_answer()
        plural = noun.endswith("s") and not noun.endswith(("is", "ss"))     # findings; not diagnosis
        return (f"your {noun} {'are' if plural else 'is'} not right ({tries} different wrong "
                f"{'answer' if tries == 1 else 'answers'} checked; "
                f"labkit does not say how many of its {total} {what} are wrong, or which): {advice}")

    def passed(self, message: str, **details) -> CheckResult:
        return self._result(PASS, self.exercise.points, message, details=details)

    def failed(self, message: str, expected=None, observed=None, *, observed_in: str | None = None,
               right_answer=None, **details) -> CheckResult:
        """A failure. `observed_in` is ANSWER or LIVE (default: ANSWER for an exercise with an
        answer file, LIVE otherwise); `right_answer` is withheld unless answers are revealed."""
        result = self._result(FAIL, 0, message, expected, observed, details)
        if observed is not None:
            result.observed_in = observed_in or (ANSWER if self.exercise.answer else LIVE)
        result.right_answer = right_answer
        return result

    def error(self, message: str, **details) -> CheckResult:
        return self._result(ERROR, 0, message, details=details)

    def _result(self, status, points, message, expected=None, observed=None, details=None) -> CheckResult:
        return CheckResult(self.exercise.id, self.exercise.title, status, points, self.exercise.points,
                           message, expected, observed, details or {})


def run_check(env, exercise, down_reason: str | None = None) -> CheckResult:
    """Run one exercise's check, turning every outcome into a CheckResult (never an exception).

    With `down_reason` (the lab is not running), the check is not run and the result says why;
    its details carry `lab_running: false` (class grading reports such exercises as not attempted).
    """
    ctx = CheckContext(env, exercise)
    start = time.monotonic()
    if down_reason:
        result = ctx.error(down_reason, lab_running=False)
    else:
        try:
            fn = env.lab.check_function(exercise)
            result = fn(ctx)
            if not isinstance(result, CheckResult):
                result = ctx.error(f"check {exercise.check} returned {type(result).__name__}, not a CheckResult")
        except (AnswerMissing, AnswerMalformed) as exc:
            # nothing to judge, or an answer file that cannot be read as one: not a wrong answer
            result = ctx.failed(exc.message, exc.expected, exc.observed, observed_in=exc.observed_in,
                                right_answer=exc.right_answer, **exc.details)
            result.details["malformed" if isinstance(exc, AnswerMalformed) else "missing"] = True
        except CheckFailed as exc:
            result = ctx.failed(exc.message, exc.expected, exc.observed, observed_in=exc.observed_in,
                                right_answer=exc.right_answer, **exc.details)
            if isinstance(exc, NotJudged):
                result.details["not_judged"] = True
        except Exception as exc:  # a broken check must not hide the other results
            result = ctx.error(f"check {exercise.check} crashed: {type(exc).__name__}: {exc}",
                               traceback=traceback.format_exc())
    # an answer not judged (none to read, or NotJudged: what it is about is not there yet or still
    # going on, a deletion not finished) is no wrong answer
    unread = result.details.get("malformed") or result.details.get("missing") or result.details.get("not_judged")
    if result.status == FAIL and exercise.answer and ctx.answer_path.is_file() and not unread and not ctx.counted \
            and not ctx.answer_not_wrong:
        # every wrong answer checked is counted, with what it was told, unless the check judged the
        # answer apart (what it was told may be about the work beside it)
        ctx.count_wrong_answer(None if ctx.answer_not_wrong is False else result.message)
    if result.status == PASS and exercise.answer:
        tried = env.state.wrong_answers_checked(exercise.id)
        if tried:       # an answer found by trying shows in the report (CheckContext.grid_feedback)
            result.details["wrong_answers_checked_before"] = tried
            result.message = (f"{result.message} (passed after {tried} different wrong "
                              f"answer{'s' if tried != 1 else ''} had been checked)")
    result.duration_s = round(time.monotonic() - start, 3)
    return result
