"""Lab lifecycle: run, check, hint, solve, reset, cleanup, list. The CLI is a thin layer on this."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from labkit import doctor, kmodules, paths, predictions
from labkit.errors import LabkitError
from labkit.exercises import CheckResult, run_check
from labkit.labs import Lab, discover, get_lab, load_lab
from labkit.state import LabEnv, LabState

Say = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


def require_prerequisites(lab: Lab) -> None:
    if not lab.prerequisites:
        return
    missing = doctor.failures(doctor.run_checks(lab.prerequisites))
    if missing:
        lines = "; ".join(f"{f.name}: {f.detail} (fix: {f.fix})" for f in missing)
        raise LabkitError(f"lab {lab.id} cannot run here: {lines}. See `labkit doctor`.")


def lab_is_up(env: LabEnv) -> bool:
    if env.state.phase != "up":
        return False
    is_up = getattr(env.lab.environment_module(), "is_up", None)
    return bool(is_up(env)) if callable(is_up) else True


def running_env(lab_id: str, what_belongs: str | None = None) -> LabEnv:
    """The env of a lab that is up, for a lab's own commands (`labkit resources …`, `labkit numa
    …`); else a LabkitError: "<what_belongs> to the <lab> lab, which is not running" (without
    what_belongs: "the <lab> lab is not running"), and how to start it."""
    lab = get_lab(lab_id)
    env = LabEnv(lab, LabState(lab.id))
    if env.state.phase != "up" or not lab_is_up(env):
        said = f"{what_belongs} to the {lab_id} lab, which is not running" if what_belongs else \
            f"the {lab_id} lab is not running"
        raise LabkitError(f"{said}: start it with `labkit run {lab_id}`")
    return env


def _check_options(lab: Lab, options: dict | None) -> dict:
    """Lab options (`labkit run LAB --kubeconfig FILE`) must be ones the lab's lab.py lists in OPTIONS."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    accepted = getattr(lab.environment_module(), "OPTIONS", ())
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise LabkitError(f"lab {lab.id} does not take --{unknown[0]}"
                          + (f" (it takes: {', '.join('--' + o for o in accepted)})" if accepted else ""))
    return options


def run(lab: Lab, say: Say = _quiet, options: dict | None = None) -> tuple[LabEnv, bool]:
    """Build the lab's environment unless it is already up and healthy. Returns (env, built).
    The lab's answers directory exists afterwards (paths.ensure_answers_dir).

    `options` (e.g. {"kubeconfig": path}) are kept in the lab's status for its whole life: lab
    code reads them as env.options."""
    require_prerequisites(lab)
    options = _check_options(lab, options)
    paths.ensure_answers_dir(lab.id)
    state = LabState(lab.id)
    with state.locked(waiting=_waiting_for(lab.id, say)):
        if state.phase == "up":
            env = LabEnv(lab, state)
            if lab_is_up(env):
                if options and options != env.options:
                    raise LabkitError(f"lab {lab.id} is already running with other options "
                                      f"({env.options or 'none'}): `labkit cleanup {lab.id}` first")
                return env, False
            say(f"lab {lab.id} was up but is damaged: rebuilding it")
        if state.ledger.entries():
            say(f"removing what a previous, unfinished `labkit run {lab.id}` left")
            _teardown(state, say)
        return _build(lab, state, say, options), True


def _build(lab: Lab, state: LabState, say: Say, options: dict | None = None) -> LabEnv:
    token = state.new_token()
    started = time.time()
    extra = {"options": options} if options else {}
    state.set_status(phase="building", token=token, started=started, **extra)
    env = LabEnv(lab, state, token)
    module = lab.environment_module()
    try:
        kmodules.hold(env)  # first in the ledger: given back last, after the lab's namespaces
        module.up(env)
    except BaseException as exc:
        problems = state.ledger.cleanup()
        state.clear_status()
        if isinstance(exc, KeyboardInterrupt):
            raise
        leftover = f"; cleanup problems: {'; '.join(problems)}" if problems else ""
        reason = str(exc) if isinstance(exc, LabkitError) else f"{type(exc).__name__}: {exc}"
        raise LabkitError(f"building lab {lab.id} failed: {reason}. Everything it had created was removed{leftover}.") from exc
    state.set_ready()
    state.set_status(phase="up", token=token, started=started, build_s=round(time.time() - started, 3), **extra)
    return env


def _teardown(state: LabState, say: Say) -> list[str]:
    problems = state.ledger.cleanup(log=say)
    if not problems:
        state.clear_status()
    return problems


def check(lab: Lab, exercise_id: str | None = None, say: Say = _quiet) -> list[CheckResult]:
    """Run the checks with the lab locked (a reset or another check of the lab waits; neither sees
    the other half done, nor loses the progress and credit the other records)."""
    state = LabState(lab.id)
    if not state.dir.exists():           # never started: nothing to lock, nothing recorded
        return _check(lab, state, exercise_id)
    with state.locked(waiting=_waiting_for(lab.id, say)):
        return _check(lab, state, exercise_id)


def _waiting_for(lab_id: str, say: Say) -> Callable[[], None]:
    return lambda: say(f"waiting for another labkit command on lab {lab_id} to finish (a run, reset, check, "
                       "solve or cleanup of it)")


def _check(lab: Lab, state: LabState, exercise_id: str | None) -> list[CheckResult]:
    env = LabEnv(lab, state)
    exercises = [lab.exercise(exercise_id)] if exercise_id else list(lab.exercises)
    down_reason = None
    if state.phase == "not started":
        down_reason = f"the lab is not running: start it with `labkit run {lab.id}`"
    elif state.phase == "building":
        down_reason = f"the lab is being built, or its build was interrupted: run `labkit run {lab.id}`"
    elif not lab_is_up(env):
        down_reason = f"the lab's environment is damaged or stopped: `labkit run {lab.id}` repairs it"
    results = [run_check(env, ex, down_reason) for ex in exercises]
    from labkit import predictions
    for ex, r in zip(exercises, results):
        if ex.is_prediction:      # the kept prediction, and any forgotten one, show in the grade report
            r.details.update(predictions.grade_details(lab.id, ex.id))
    if state.dir.exists():
        state.record_results(results)
        credit = state.credit
        for r in results:
            r.recorded = credit.get(r.exercise)
    return results


def next_hint(lab: Lab, exercise_id: str) -> tuple[int, int, str | None]:
    """(number shown, total, text) — after the last hint, the last one again."""
    ex = lab.exercise(exercise_id)
    if not ex.hints:
        return 0, 0, None
    state = LabState(lab.id)
    shown = state.hints_shown(ex.id)
    index = min(shown, len(ex.hints) - 1)
    state.ensure_dir()
    state.set_hints_shown(ex.id, index + 1)
    return index + 1, len(ex.hints), ex.hints[index]


def solve(lab: Lab, exercise_id: str) -> None:
    ex = lab.exercise(exercise_id)
    solution = lab.solution_function(ex)
    state = LabState(lab.id)
    with state.locked():
        env = LabEnv(lab, state)
        if not lab_is_up(env):
            raise LabkitError(f"lab {lab.id} is not running: start it with `labkit run {lab.id}`")
        solution(env)


def apply_mistake(lab: Lab, exercise_id: str, name: str) -> None:
    """Apply one of an exercise's common wrong solutions (for instructors and tests)."""
    mistake = lab.mistake(lab.exercise(exercise_id), name)
    state = LabState(lab.id)
    with state.locked():
        env = LabEnv(lab, state)
        if not lab_is_up(env):
            raise LabkitError(f"lab {lab.id} is not running: start it with `labkit run {lab.id}`")
        mistake.apply(env)


def work_at_risk(lab: Lab, exercise_id: str | None = None) -> list[str]:
    """What `reset` would revert of the student's work, one phrase each (`the Pod file
    pods/reader.yaml you edited`), from the lab's hook `student_work(env, exercise_id)` in lab.py
    (exercise_id None: the whole lab). Empty when the lab is not up, or nothing was changed (and
    for a lab without the hook: every shipped lab has one, tests/test_lab_definitions.py)."""
    state = LabState(lab.id)
    env = LabEnv(lab, state)
    if state.phase != "up":
        return []
    if exercise_id is not None:
        exercise_id = lab.exercise(exercise_id).id
    hook = getattr(lab.environment_module(), "student_work", None)
    return list(hook(env, exercise_id)) if callable(hook) else []


def _keep_student_work(lab: Lab, state: LabState, exercise_id: str | None) -> list[str]:
    """Before a reset reverts anything: the lab's hook `keep_student_work(env, exercise_id)` copies
    the student's work that the reset would revert out of the way (edited files, changed objects as
    YAML) and keeps a try of a prediction exercise's experiment; what it says of each, in order."""
    keeper = getattr(lab.environment_module(), "keep_student_work", None)
    if not callable(keeper) or state.phase != "up":
        return []
    if exercise_id is not None:
        exercise_id = lab.exercise(exercise_id).id
    return list(keeper(LabEnv(lab, state), exercise_id) or [])


def kept_predictions(lab: Lab, exercise_id: str | None = None) -> list[str]:
    """The prediction exercises (of `exercise_id`, or of the whole lab) whose answer labkit kept
    when a tool showed their outcome: what `--forget-prediction` would forget."""
    from labkit import predictions
    exercises = [lab.exercise(exercise_id)] if exercise_id is not None else list(lab.exercises)
    return [ex.id for ex in exercises if ex.is_prediction and predictions.kept(lab.id, ex.id) is not None]


def _forget_predictions(lab: Lab, exercise_id: str | None, say: Say) -> set[str]:
    """`labkit reset LAB [EXERCISE] --forget-prediction`: the prediction exercises' kept answers
    and kept tries are forgotten (recorded for the grade report), their outcomes withheld again.
    The exercises whose kept try was forgotten."""
    from labkit import predictions
    exercises = [lab.exercise(exercise_id)] if exercise_id is not None else list(lab.exercises)
    ours = [ex for ex in exercises if ex.is_prediction]
    if not ours:
        raise LabkitError(f"--forget-prediction: exercise {exercises[0].id} predicts nothing (no labkit tool withholds "
                          "its outcome)" if exercise_id else f"--forget-prediction: lab {lab.id} has no prediction exercise")
    tried = set()
    for ex in ours:
        trial = predictions.kept_trial(lab.id, ex.id)
        found = predictions.forget(lab.id, ex.id, "labkit reset --forget-prediction")
        if trial is not None:
            tried.add(ex.id)
            say(f"forgot that you tried the experiment of {ex.id} in the lab ({trial.get('what', 'by hand')}); the grade "
                "report says it was forgotten")
        if found is not None:
            say(f"forgot your {ex.id} answer as labkit kept it when `{found.tool}` showed the outcome; the tools "
                f"withhold it again until you record an answer, and the grade report says it was forgotten")
    return tried


def _before_reset(lab: Lab, state: LabState, exercise_id: str | None, forget_prediction: bool, say: Say) -> None:
    """What a reset does before it reverts anything, and says so once, in order: with
    `forget_prediction`, what is forgotten (after the lab's keep_student_work, so that a try of the
    experiment it has just kept is forgotten too, and its line that it keeps that try is not said);
    then where the student's work was copied."""
    kept_lines = _keep_student_work(lab, state, exercise_id)
    forgotten = _forget_predictions(lab, exercise_id, say) if forget_prediction else set()
    for line in kept_lines:
        if not (isinstance(line, predictions.TrialNote) and line.exercise in forgotten):
            say(line)


def reset(lab: Lab, say: Say = _quiet, exercise_id: str | None = None, forget_prediction: bool = False) -> LabEnv:
    """Rebuild the lab fresh; recorded passes, answer files and kept predictions stay.

    With `exercise_id`, only that exercise's part, through the lab's optional hook
    `reset_exercise(env, exercise_id)` in lab.py (the other exercises keep their state); a lab
    without the hook is rebuilt whole.

    The rule for prediction exercises is the same in every lab (labkit.predictions): a reset keeps
    the prediction kept when a tool showed its outcome, as it keeps recorded passes: what was shown
    cannot be unseen, and a reset must not be a way to see the outcome and then answer again. With
    `forget_prediction` the kept predictions of the exercise (or of the whole lab) are forgotten
    first, and that is recorded for the grade report.

    The prerequisites are probed (labkit doctor's checks) before a rebuild only: an exercise reset
    through the hook needs the lab up, built on them already."""
    hook = getattr(lab.environment_module(), "reset_exercise", None)
    if exercise_id is None or not callable(hook):
        require_prerequisites(lab)
    state = LabState(lab.id)
    with state.locked(waiting=_waiting_for(lab.id, say)):
        _before_reset(lab, state, exercise_id, forget_prediction, say)
        if exercise_id is not None and callable(hook):
            exercise_id = lab.exercise(exercise_id).id
            env = LabEnv(lab, state)
            if not lab_is_up(env):
                raise LabkitError(f"lab {lab.id} is not running: `labkit run {lab.id}` builds it")
            try:
                hook(env, exercise_id)
            except Exception as exc:
                reason = str(exc) if isinstance(exc, LabkitError) else f"{type(exc).__name__}: {exc}"
                raise LabkitError(f"resetting {lab.id}/{exercise_id} failed: {reason}. "
                                  f"`labkit reset {lab.id}` rebuilds the whole lab") from exc
            state.set_ready([exercise_id])
            state.clear_progress(exercise_id)
            say(f"exercise {exercise_id} of lab {lab.id} starts afresh; the others keep their state")
            return env
        if exercise_id is not None:
            lab.exercise(exercise_id)
            say(f"lab {lab.id} cannot reset one exercise: rebuilding all of it (recorded passes are kept)")
        options = state.status.get("options")
        problems = _teardown(state, say)
        if problems:
            raise LabkitError("could not tear the lab down: " + "; ".join(problems))
        state.clear_progress()
        env = _build(lab, state, say, options)
        say(f"lab {lab.id} was rebuilt")
        return env


def cleanup(lab_id: str, say: Say = _quiet) -> list[str]:
    """Remove everything the lab recorded. Works from the state directory alone (no lab.yaml needed)."""
    from labkit.errors import LabNotFound
    from labkit.labs import ID_RE

    if not ID_RE.match(lab_id):   # a lab id names a directory under the state root: nothing else
        raise LabNotFound(f"no lab named {lab_id!r}: lab ids are lowercase letters, digits and dashes")
    state = LabState(lab_id)
    if not state.dir.exists():
        return []
    with state.locked(waiting=_waiting_for(lab_id, say)):
        _keep_at_cleanup(lab_id, state, say)
        return _teardown(state, say)


def _keep_at_cleanup(lab_id: str, state: LabState, say: Say) -> None:
    """Before cleanup removes a lab's directory: the lab's optional hook `keep_at_cleanup(env)`
    copies the student's work that lives there (not in the answers directory) to where cleanup
    does not reach, and says where each piece went. Cleanup works without the lab's definition:
    a lab that cannot be loaded keeps nothing."""
    if state.phase != "up":
        return
    try:
        lab = get_lab(lab_id)
    except LabkitError:
        return
    keeper = getattr(lab.environment_module(), "keep_at_cleanup", None)
    if not callable(keeper):
        return
    try:
        lines = keeper(LabEnv(lab, state)) or []
    except Exception as exc:      # cleanup must go on, also for a damaged lab
        lines = [f"could not keep your work of lab {lab_id} before cleanup: {type(exc).__name__}: {exc}"]
    for line in lines:
        say(line)


def instances() -> list[str]:
    """Lab ids that have state on this machine (running, crashed or finished)."""
    root = paths.state_root()
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and (d / "lock").exists())


def cleanup_all(say: Say = _quiet) -> dict[str, list[str]]:
    return {lab_id: cleanup(lab_id, say) for lab_id in instances()}


@dataclass
class LabListing:
    id: str
    title: str
    status: str
    passed: int
    total: int
    error: str | None = None


def listing() -> list[LabListing]:
    out = []
    for lab_id, directory in discover().items():
        try:
            lab = load_lab(directory)
        except LabkitError as exc:
            out.append(LabListing(lab_id, "(invalid lab.yaml)", "invalid", 0, 0, str(exc)))
            continue
        state = LabState(lab.id)
        progress = state.progress
        credit = state.credit
        passed = sum(1 for ex in lab.exercises if ex.id in credit or progress.get(ex.id, {}).get("status") == "pass")
        phase = state.phase
        if phase == "up":
            status = f"running: {passed} of {len(lab.exercises)} exercises passed"
        elif phase == "building":
            status = "half-built (crashed?): run `labkit run` or `labkit cleanup`"
        else:
            status = "not started" if not (progress or credit) else f"stopped: {passed} of {len(lab.exercises)} exercises passed"
        out.append(LabListing(lab.id, lab.title, status, passed, len(lab.exercises)))
    return out


__all__ = ["run", "check", "next_hint", "solve", "reset", "cleanup", "cleanup_all", "listing", "get_lab"]
