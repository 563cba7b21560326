"""Near-misses of reference solutions, generated mechanically, and the run that judges them.

A check is trusted only if it fails every wrong solution, not just the ones somebody thought of.
So for every exercise, `labs/<lab>/mutants/<exercise>.py` derives near-misses of the reference
solution — one match, field, subject, selector, value or rule dropped, widened, narrowed or
swapped at a time — and the mutant run judges each one with the exercise's own check:

    def mutants(ctx) -> Iterable[Mutant]     # called on the lab with the exercise solved

and the check's verdict on an observation is `judge_<name>(ctx, observation)` beside
`check_<name>` in checks.py (or `judge` in the mutants module).

Three ways to judge a mutant, cheapest first:
  observation  the check's pure part, `judge_<name>(ctx, observation)`, on a mutated copy of what the
               check observes of the solved lab (the nodes' rules, the bindings, the Pods) —
               in-process, against labkit's reconstruction; the check itself is
               `judge(ctx, observe(ctx))`, so both see the same thing;
  answer       for exercises with an answer file: the mutated answer is written and the real
               check runs against the live lab;
  apply        the change made live (`apply(env)` on the freshly solved exercise), then the real
               check. Mutants judged by observation carry `apply` too: the run applies a sample of
               them live (every one with LABKIT_MUTANTS_LIVE=1) and requires the same verdict,
               which proves that judging observations is judging the lab.

A mutant is *killed* when the check fails and its message contains every word of `names`; it is
*equivalent* when the generator proved, with labkit's reconstruction over the whole space the
exercise covers, that it behaves as the reference does (`equivalent` says how) — then the
check must pass it. Anything else is a *survivor* or an *unnamed* kill, and a test failure.

The generators here are generic: `tree_edits` for YAML objects and answers, `iptables_edits` for
rules typed as iptables arguments. Labs add their own (the widening of an RBAC rule, say).
"""

from __future__ import annotations

import copy
import os
import re
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from labkit.exercises import CheckContext, CheckFailed, CheckResult, run_check, write_answer

LIVE_ENV = "LABKIT_MUTANTS_LIVE"        # 1: apply every mutant that can be applied live
                                        # otherwise one per exercise (live_sample)
KILLED, EQUIVALENT, SURVIVED, UNNAMED, FALSE_FAIL, BROKEN = (
    "killed", "equivalent", "survived", "unnamed", "false-fail", "broken")
OUTCOMES = (KILLED, EQUIVALENT, SURVIVED, UNNAMED, FALSE_FAIL, BROKEN)
_UNSET = object()


@dataclass(frozen=True)
class Mutant:
    name: str                               # unique within the exercise and stable across runs
    change: str                             # what the near-miss changes, in words
    names: tuple[str, ...] = ()             # words the failure message must contain
    observation: Any = _UNSET               # judged by the module's judge(ctx, observation)
    answer: Any = _UNSET                    # written as the answer file, judged by the real check
    apply: Callable | None = None           # apply(env): the change made live on the solved exercise
    equivalent: str | None = None           # how the reconstruction proves it behaves as the reference

    @property
    def judged_by(self) -> str:
        if self.observation is not _UNSET:
            return "observation"
        if self.answer is not _UNSET:
            return "answer"
        return "apply"


@dataclass
class Verdict:
    mutant: str
    change: str
    outcome: str                 # one of OUTCOMES
    judged_by: str
    status: str                  # the check's status (pass | fail | error), or "" when broken
    message: str
    live: dict | None = None     # the live application's verdict, when it was applied live

    def to_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass
class ExerciseReport:
    lab: str
    exercise: str
    verdicts: list[Verdict] = field(default_factory=list)
    problem: str | None = None   # the reference failed, or generating mutants crashed

    def count(self, outcome: str) -> int:
        return sum(1 for v in self.verdicts if v.outcome == outcome)

    @property
    def live_disagreements(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.live and v.live["outcome"] != v.outcome]

    def to_dict(self) -> dict:
        return {"lab": self.lab, "exercise": self.exercise, "problem": self.problem,
                "generated": len(self.verdicts), **{o: self.count(o) for o in OUTCOMES},
                "verdicts": [v.to_dict() for v in self.verdicts]}


def outcome_of(mutant: Mutant, result: CheckResult) -> str:
    """killed (failed, naming it), equivalent (proven so, and passed), survived (passed, not
    equivalent), unnamed (failed without the words), false-fail (equivalent, yet failed),
    broken (the check erred)."""
    if result.status == "error":
        return BROKEN
    if mutant.equivalent:
        return EQUIVALENT if result.status == "pass" else FALSE_FAIL
    if result.status == "pass":
        return SURVIVED
    message = result.message.lower()
    return KILLED if all(w.lower() in message for w in mutant.names) else UNNAMED


def judged(ctx: CheckContext, judge: Callable, observation) -> CheckResult:
    """`judge(ctx, observation)` as run_check runs a check: CheckFailed becomes a failure, a crash
    an error (never an exception)."""
    try:
        result = judge(ctx, observation)
        if not isinstance(result, CheckResult):
            return ctx.error(f"judge returned {type(result).__name__}, not a CheckResult")
        return result
    except CheckFailed as exc:
        return ctx.failed(exc.message, exc.expected, exc.observed, observed_in=exc.observed_in,
                          right_answer=exc.right_answer, **exc.details)
    except Exception as exc:
        return ctx.error(f"judge crashed: {type(exc).__name__}: {exc}", traceback=traceback.format_exc())


def kind_of(mutant_name: str) -> str:
    """The rule that made a mutant: the first part of its name (`drop`, `set`, `swap`, `drop-rule`,
    or a lab generator's own, e.g. `bypass`)."""
    return mutant_name.split(":", 1)[0]


def live_sample(mutants: list[Mutant], every: bool, applied: dict[str, int] | None = None) -> set[str]:
    """Which of the observation-judged mutants are also applied live: all of them with `every`;
    otherwise one, a fixed stratified sample over the lab: of the kinds of mutation (kind_of)
    among the candidates, the one applied live least often so far in this run of the lab
    (`applied`: kind -> count, updated here; ties go to the kind that comes first in the list),
    and of the mutants of that kind the middle one. The same ones on every run of the same tree,
    the kinds taking turns over the lab's exercises.

    One per exercise costs no second solving: the first live application finds the exercise
    still solved (run_exercise), each further one solves it again."""
    candidates = [m.name for m in mutants if m.judged_by == "observation" and m.apply is not None]
    if every or not candidates:
        return set(candidates)
    applied = {} if applied is None else applied
    kinds: dict[str, list[str]] = {}
    for name in candidates:
        kinds.setdefault(kind_of(name), []).append(name)
    kind = min(kinds, key=lambda k: applied.get(k, 0))       # min keeps the first of equals
    applied[kind] = applied.get(kind, 0) + 1
    names = kinds[kind]
    return {names[len(names) // 2]}


def module_of(lab, exercise):
    """The exercise's mutants module, or None."""
    return lab._load(f"mutants/{exercise.id}.py", required=False)


def judge_of(lab, exercise, module) -> Callable | None:
    """The exercise's judge: the mutants module's `judge`, else `judge_<name>` for the check
    `check_<name>` in checks.py."""
    found = getattr(module, "judge", None)
    if found is None and exercise.check.startswith("check_"):
        found = getattr(lab._load("checks.py"), "judge_" + exercise.check[len("check_"):], None)
    return found


def run_exercise(lab, exercise_id: str, *, live_all: bool | None = None,
                 applied: dict[str, int] | None = None) -> ExerciseReport:
    """Solve the exercise on the running lab, generate its mutants and judge every one; the
    exercise is reset afterwards. `live_all` defaults to LABKIT_MUTANTS_LIVE; `applied` counts
    the kinds of mutation applied live over the lab's exercises (live_sample), shared by the
    caller across them."""
    from labkit import runner
    from labkit.exercises import answer_path
    from labkit.state import LabEnv, LabState

    exercise = lab.exercise(exercise_id)
    report = ExerciseReport(lab.id, exercise.id)
    module = module_of(lab, exercise)
    if module is None:
        report.problem = f"labs/{lab.id}/mutants/{exercise.id}.py is missing"
        return report
    if live_all is None:
        live_all = os.environ.get(LIVE_ENV, "").strip() in ("1", "true", "yes")
    env = LabEnv(lab, LabState(lab.id))
    ctx = CheckContext(env, exercise)
    path = answer_path(lab.id, exercise.id)

    def solved() -> CheckResult:
        path.unlink(missing_ok=True)
        # a fresh start: also a prediction kept when a tool showed an earlier mutant's outcome is forgotten
        runner.reset(lab, exercise_id=exercise.id, forget_prediction=exercise.is_prediction)
        runner.solve(lab, exercise.id)
        return run_check(env, exercise)

    reference = solved()
    if reference.status != "pass":
        report.problem = f"the reference solution does not pass: {reference.message}"
        return report
    reference_answer = path.read_text() if path.exists() else None
    try:
        mutants = list(module.mutants(ctx))
    except Exception as exc:
        report.problem = f"generating the mutants crashed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        return report
    seen = set()
    for m in mutants:
        if m.name in seen:
            report.problem = f"two mutants are named {m.name!r}"
            return report
        seen.add(m.name)
    judge = judge_of(lab, exercise, module)
    if judge is None and any(m.judged_by == "observation" for m in mutants):
        report.problem = (f"mutants are judged by observation, but checks.py has no "
                          f"judge_{exercise.check.removeprefix('check_')}(ctx, observation)")
        return report
    sample = live_sample(mutants, live_all, applied)
    dirty = False        # the live lab differs from the solved one
    verdicts: dict[str, Verdict] = {}

    def live(m: Mutant) -> CheckResult:
        nonlocal dirty
        if dirty:
            solved()
        dirty = True
        m.apply(env)
        return run_check(env, exercise)

    # First every mutant judged on the solved lab as it stands (by observation, in-process, or by
    # its answer file), then those applied live, each on the exercise solved afresh (but the first,
    # which finds it solved still): solving again only between two live applications, not also
    # after each live one that an in-process judgement follows.
    for m in mutants:
        if m.judged_by == "apply":
            continue
        try:
            if dirty:
                solved()
                dirty = False
            if m.judged_by == "observation":
                result = judged(ctx, judge, m.observation)
            else:
                write_answer(env, exercise.id, m.answer)
                result = run_check(env, exercise)
                if reference_answer is not None:
                    path.write_text(reference_answer)
        except Exception as exc:
            verdicts[m.name] = Verdict(m.name, m.change, BROKEN, m.judged_by, "", f"{type(exc).__name__}: {exc}")
            dirty = True
            continue
        verdicts[m.name] = Verdict(m.name, m.change, outcome_of(m, result), m.judged_by, result.status,
                                   result.message)
    for m in mutants:
        if m.judged_by == "apply":
            try:
                result = live(m)
            except Exception as exc:
                verdicts[m.name] = Verdict(m.name, m.change, BROKEN, m.judged_by, "",
                                           f"{type(exc).__name__}: {exc}")
                dirty = True
                continue
            verdicts[m.name] = Verdict(m.name, m.change, outcome_of(m, result), m.judged_by, result.status,
                                       result.message)
        elif m.name in sample and verdicts[m.name].status:     # not when judging it in-process raised
            try:
                live_result = live(m)
                verdicts[m.name].live = {"outcome": outcome_of(m, live_result), "status": live_result.status,
                                         "message": live_result.message}
            except Exception as exc:
                verdicts[m.name].live = {"outcome": BROKEN, "status": "", "message": f"{type(exc).__name__}: {exc}"}
    report.verdicts = [verdicts[m.name] for m in mutants]
    path.unlink(missing_ok=True)
    runner.reset(lab, exercise_id=exercise.id)
    return report


# -- generic generators ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """One mechanical change of a nested value: `op` at `path`, giving `value` (a changed copy)."""
    op: str          # drop | set | drop-item | add-item | swap
    path: str        # `spec.ports[0].port`
    before: Any
    after: Any
    value: Any

    @property
    def key(self) -> str:
        """The last name on the path (`port`), for the words a failure must contain."""
        last = self.path.rsplit(".", 1)[-1]
        return last.split("[", 1)[0] or last

    def describe(self) -> str:
        if self.op == "drop":
            return f"{self.path} removed"
        if self.op == "drop-item":
            return f"{self.path} removed from its list"
        if self.op == "add-item":
            return f"{self.path}: {_short(self.after)} added"
        if self.op == "swap":
            return f"{self.path}: two items swapped"
        return f"{self.path}: {_short(self.before)} -> {_short(self.after)}"


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def scalar_alternatives(value) -> list:
    """Near values of a scalar: the other boolean; a number one more, one less, doubled, zero;
    a string with one character dropped, and empty."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return sorted({value + 1, value - 1, value * 2, 0} - {value})
    if isinstance(value, float):
        return [v for v in (value * 1.1, value * 0.9, 0.0, 1.0) if v != value]
    if isinstance(value, str):
        return [v for v in ({value[:-1], ""} if value else set()) if v != value]
    return []


def tree_edits(value, path: str = "", *, alternatives: dict[str, list] | None = None,
               skip: Callable[[str], bool] | None = None, drop_keys: bool = True,
               list_items: bool = True) -> Iterator[Edit]:
    """Every one-step near-miss of a nested value (mappings, lists, scalars): each key dropped,
    each scalar replaced by its `alternatives[path]` (the values that path may take, e.g. the
    other namespaces) or by `scalar_alternatives`, each list item dropped, a list's first two
    items swapped. Paths for which `skip(path)` is true are left alone (with what is below them)."""
    alternatives = alternatives or {}
    skip = skip or (lambda _p: False)

    def at(root, steps, new=_UNSET, drop=False):
        root = copy.deepcopy(root)
        parent = root
        for step in steps[:-1]:
            parent = parent[step]
        if drop:
            del parent[steps[-1]]
        else:
            parent[steps[-1]] = new
        return root

    def walk(node, steps, here):
        if here and skip(here):
            return
        if isinstance(node, dict):
            for key, item in node.items():
                child = f"{here}.{key}" if here else str(key)
                if skip(child):
                    continue
                if drop_keys:
                    yield Edit("drop", child, item, None, at(value, steps + [key], drop=True))
                yield from walk(item, steps + [key], child)
        elif isinstance(node, list):
            if list_items:
                for i, item in enumerate(node):
                    yield Edit("drop-item", f"{here}[{i}]", item, None, at(value, steps + [i], drop=True))
                if len(node) >= 2 and node[0] != node[1]:
                    swapped = [node[1], node[0], *node[2:]]
                    yield Edit("swap", here, node, swapped, at(value, steps, swapped) if steps else swapped)
            for i, item in enumerate(node):
                yield from walk(item, steps + [i], f"{here}[{i}]")
        else:
            choices = alternatives.get(here)
            if choices is None:
                choices = alternatives.get(_generic(here), scalar_alternatives(node))
            for alt in choices:
                if alt != node:
                    yield Edit("set", here, node, alt, at(value, steps, alt) if steps else alt)

    yield from walk(value, [], path)


def _generic(path: str) -> str:
    """`spec.ports[0].port` -> `spec.ports[].port`: alternatives may be given per list."""
    return re.sub(r"\[\d+\]", "[]", path)


# iptables options that take one value; `!` before one negates it
_IPT_VALUE_OPTIONS = {"-p", "-s", "-d", "-i", "-o", "--dport", "--sport", "--comment", "--mode", "--probability",
                      "--to-destination", "--to-source", "--name", "--mask", "--rsource", "--seconds", "--set-xmark",
                      "--dst-type", "--src-type", "--state", "--ctstate", "--mark", "--reap"}
_IPT_FLAG_OPTIONS = {"--rcheck", "--set", "--update", "--reap", "--rsource", "--random-fully", "--random"}


@dataclass(frozen=True)
class RuleEdit:
    """One near-miss of a list of iptables rules (each an argument list such as
    ["-A", "KUBE-SERVICES", "-d", "10.96.0.30/32", "-p", "tcp", "--dport", "80", "-j", "KUBE-SVC-X"])."""
    op: str                 # drop-rule | drop-option | negate | set | swap-rules
    rule: int               # the index of the rule changed (the first of two, for swap-rules)
    option: str | None      # the option dropped or changed (`--dport`), or None
    rules: list[list[str]]  # the changed rules

    def describe(self, original: list[list[str]]) -> str:
        shown = " ".join(original[self.rule])
        if self.op == "drop-rule":
            return f"rule `{shown}` left out"
        if self.op == "swap-rules":
            return f"rules {self.rule + 1} and {self.rule + 2} in the other order"
        if self.op == "drop-option":
            return f"{self.option} left out of `{shown}`"
        if self.op == "negate":
            return f"{self.option} negated in `{shown}`"
        return f"{self.option} changed in `{shown}`: `{' '.join(self.rules[self.rule])}`"


def option_spans(rule: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, option) of each option of an iptables rule after its chain: `-p tcp`,
    `! -s 10.0.0.0/8`, `-m statistic --mode random --probability 0.5` (a match module with its
    own options is one span), `-j TARGET ...` (the target with its options, last)."""
    spans = []
    i = 2 if rule and rule[0] in ("-A", "-I", "-C", "-D") else 0
    if i == 2 and len(rule) > 2 and rule[0] == "-I" and rule[2].isdigit():
        i = 3
    while i < len(rule):
        start = i
        if rule[i] == "!":
            i += 1
        opt = rule[i]
        if opt in ("-j", "-g"):
            spans.append((start, len(rule), opt))
            break
        if opt == "-m":
            i += 2
            while i < len(rule) and rule[i] not in ("-m", "-j", "-g", "!") and not (rule[i].startswith("-") and len(rule[i]) == 2):
                i += 1 if rule[i] in _IPT_FLAG_OPTIONS and (i + 1 >= len(rule) or rule[i + 1].startswith("-")) else 2
            spans.append((start, i, f"-m {rule[start + 1 + (rule[start] == '!')]}"))
            continue
        i += 2 if opt in _IPT_VALUE_OPTIONS or opt.startswith("-") else 1
        spans.append((start, i, opt))
    return spans


def iptables_edits(rules: list[list[str]], *, values: dict[str, list[str]] | None = None,
                   keep: Callable[[list[str]], bool] | None = None) -> Iterator[RuleEdit]:
    """Every one-step near-miss of `rules`: a rule left out; one option (or match module with its
    options) left out, negated, or given another value from `values[option]` (other ports,
    other addresses, other targets under "-j"); two neighbouring rules swapped. Rules for which
    `keep(rule)` is true are only reordered, never changed (rules the exercise does not ask for)."""
    values = values or {}
    keep = keep or (lambda _r: False)
    for r, rule in enumerate(rules):
        if keep(rule):
            continue
        yield RuleEdit("drop-rule", r, None, rules[:r] + rules[r + 1:])
        for start, end, opt in option_spans(rule):
            negated = rule[start] == "!"
            if opt not in ("-j", "-g"):
                yield RuleEdit("drop-option", r, opt, _replace(rules, r, rule[:start] + rule[end:]))
                if not opt.startswith("-m ") and end - start == 2 + negated:
                    flipped = rule[start + 1:end] if negated else ["!", *rule[start:end]]
                    yield RuleEdit("negate", r, opt, _replace(rules, r, rule[:start] + flipped + rule[end:]))
            head = start + 1 + negated
            for alt in values.get(opt, []):
                if head < len(rule) and alt != rule[head]:
                    changed = rule[:head] + [alt] + rule[head + 1:]
                    yield RuleEdit("set", r, opt, _replace(rules, r, changed))
    for r in range(len(rules) - 1):
        if rules[r][:2] == rules[r + 1][:2] and rules[r] != rules[r + 1]:
            swapped = rules[:r] + [rules[r + 1], rules[r]] + rules[r + 2:]
            yield RuleEdit("swap-rules", r, None, swapped)


def _replace(rules, index, rule):
    return rules[:index] + [rule] + rules[index + 1:]


def answer_mutants(answer, *, alternatives: dict[str, list] | None = None,
                   names: Callable[[Edit], tuple[str, ...]] | None = None,
                   skip: Callable[[str], bool] | None = None) -> Iterable[Mutant]:
    """The near-misses of a reference answer, as answer mutants: every key dropped, every value
    changed (`alternatives` per path, `[]` for any list index), list items dropped and swapped.
    `names(edit)` gives the words the failure must contain (default: the key changed)."""
    names = names or (lambda e: (e.key,))
    for edit in tree_edits(answer, alternatives=alternatives, skip=skip):
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"answer: {edit.describe()}", names=tuple(names(edit)), answer=edit.value)
