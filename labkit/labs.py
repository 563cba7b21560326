"""Discovering labs under labs/ and loading their lab.yaml, checks.py, lab.py and solutions.

A lab is a directory `<id>/` holding:
  lab.yaml        id, title, summary, prerequisites, exercises (see `Exercise`)
  README.md       the student's instructions, printed by `labkit run`
  lab.py          the environment: up(env) builds it; optional is_up(env), access(env), hosts(env)
  checks.py       one function per check named in lab.yaml: check(ctx) -> CheckResult
  solutions/      <exercise-id>.py with solve(env): the reference solution
  mistakes/       <exercise-id>.py with common wrong solutions, each a function fn(env) marked
                  with @labkit.exercises.mistake("words", "the", "failure names")
  mutants/        <exercise-id>.py with the near-misses of the solution (labkit.mutants)
The last three are reference material: an installed labkit finds those of its built-in labs in
the instructor package (labkit.paths.reference_file).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable


from labkit import paths
from labkit.errors import ConfigError, LabNotFound
from labkit.inputs import load_yaml

ID_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$")
PARAM_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

# Prerequisite names a lab may list; `labkit doctor` checks each (labkit.doctor.CHECKS).
PREREQUISITES = (
    "root", "netns", "veth", "bridge", "iptables-legacy", "iptables-extensions",
    "mount-namespaces", "cgroup-cpuset", "cgroup-cpu-memory", "kubectl", "graphviz", "br_netfilter", "nfacct",
    "conntrack",
)


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    points: int
    prompt: str          # Markdown, with {{param}} already substituted
    hints: tuple[str, ...]
    check: str           # name of a function in the lab's checks.py
    params: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None   # for answer exercises: what the answer file must hold
    # what "solved" means as a whole, as the check judges it: `holds`, what must be true;
    # `unchanged`, what the solution must leave as it was (scope, least privilege, the workload)
    solved: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # for a prediction exercise: the labkit commands that can show its outcome, and withhold it
    # until the student's answer is recorded (labkit.predictions)
    withheld_by: tuple[str, ...] = ()
    # for answer exercises: the keys of the answer mapping the check reads (lab.yaml `answer_keys`,
    # {{param}} substituted); an answer with any other key is malformed (CheckContext.answer)
    answer_keys: tuple[str, ...] = ()

    @property
    def is_prediction(self) -> bool:
        return bool(self.withheld_by)


@dataclass(frozen=True)
class Mistake:
    """A common wrong solution of one exercise (see labkit.exercises.mistake)."""
    exercise: str
    name: str                   # the function's name
    description: str            # what the student did: the docstring's first paragraph
    names: tuple[str, ...]      # words the check's failure message must contain
    apply: Callable             # apply(env), on a lab where the exercise is fresh


@dataclass
class Lab:
    id: str
    title: str
    summary: str
    prerequisites: tuple[str, ...]
    exercises: tuple[Exercise, ...]
    directory: Path
    reveal_answers: bool = False    # lab.yaml: reports may carry right answers (after the deadline)
    _modules: dict[str, ModuleType] = field(default_factory=dict, repr=False)

    @property
    def yaml_path(self) -> Path:
        return self.directory / "lab.yaml"

    @property
    def instructions(self) -> str:
        readme = self.directory / "README.md"
        return readme.read_text() if readme.exists() else f"# {self.title}\n\n{self.summary}\n"

    def exercise(self, exercise_id: str) -> Exercise:
        """An exercise by id, or by its number as `labkit show LAB` lists them (1, 2, ...)."""
        for ex in self.exercises:
            if ex.id == exercise_id:
                return ex
        if str(exercise_id).isdigit() and 1 <= int(exercise_id) <= len(self.exercises):
            return self.exercises[int(exercise_id) - 1]
        known = ", ".join(f"{i} {e.id}" for i, e in enumerate(self.exercises, start=1))
        raise LabNotFound(f"lab {self.id} has no exercise {exercise_id!r} (exercises: {known})")

    # -- code that comes with the lab ------------------------------------------------------

    def _load(self, relpath: str, required: bool = True) -> ModuleType | None:
        if relpath in self._modules:
            return self._modules[relpath]
        path = paths.reference_file(self.directory, relpath)
        if not path.exists():
            if required:
                raise ConfigError(path, None, "file missing")
            return None
        modname = "labkit_lab_" + re.sub(r"\W", "_", f"{self.id}_{relpath[:-3]}")
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
        self._modules[relpath] = module
        return module

    def environment_module(self) -> ModuleType:
        module = self._load("lab.py")
        if not callable(getattr(module, "up", None)):
            raise ConfigError(self.directory / "lab.py", "up", "expected a function up(env)")
        return module

    def check_function(self, exercise: Exercise):
        module = self._load("checks.py")
        fn = getattr(module, exercise.check, None)
        if not callable(fn):
            index = self.exercises.index(exercise)
            raise ConfigError(
                self.yaml_path, f"exercises[{index}].check",
                f"checks.py has no function {exercise.check!r}",
            )
        return fn

    def solution_path(self, exercise: Exercise) -> Path:
        return paths.reference_file(self.directory, f"solutions/{exercise.id}.py")

    def solution_function(self, exercise: Exercise):
        path = self.solution_path(exercise)
        if not path.exists():
            raise LabNotFound(
                f"no reference solution for {self.id}/{exercise.id} ({path} is missing): an installed labkit "
                "carries none; instructors add them with `pip install 'labkit[instructor]'` (or run from a checkout)"
            )
        module = self._load(f"solutions/{exercise.id}.py")
        fn = getattr(module, "solve", None)
        if not callable(fn):
            raise ConfigError(path, "solve", "expected a function solve(env)")
        return fn

    def mistakes(self, exercise: Exercise) -> list[Mistake]:
        """The exercise's common wrong solutions, in the order its mistakes file defines them."""
        module = self._load(f"mistakes/{exercise.id}.py", required=False)
        if module is None:
            return []
        found = []
        for name, fn in vars(module).items():
            if callable(fn) and getattr(fn, "mistake_names", None) and getattr(fn, "__module__", None) == module.__name__:
                doc = (fn.__doc__ or "").strip().split("\n\n")[0]
                found.append(Mistake(exercise.id, name, " ".join(doc.split()), fn.mistake_names, fn))
        return found

    def mistake(self, exercise: Exercise, name: str) -> Mistake:
        for m in self.mistakes(exercise):
            if m.name == name:
                return m
        known = ", ".join(m.name for m in self.mistakes(exercise)) or "none"
        raise LabNotFound(f"{self.id}/{exercise.id} has no mistake {name!r} (mistakes: {known})")


# -- lab.yaml validation ------------------------------------------------------------------


def _expect_str(path, fieldname, value, allow_empty=False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ConfigError(path, fieldname, f"expected a non-empty string, got {_show(value)}")
    return value


def _show(value) -> str:
    if value is None:
        return "nothing"
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def _substitute(path, fieldname, text: str, params: dict) -> str:
    def repl(match):
        name = match.group(1)
        if name not in params:
            raise ConfigError(path, fieldname, f"uses {{{{{name}}}}} but params has no {name!r}")
        return str(params[name])

    return PARAM_RE.sub(repl, text)


def _parse_exercise(path, index: int, raw) -> Exercise:
    where = f"exercises[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(path, where, f"expected a mapping, got {_show(raw)}")
    known = {"id", "title", "points", "prompt", "hints", "check", "params", "answer", "answer_keys", "solved",
             "withheld_by"}
    unknown = sorted(set(raw) - known, key=str)
    if unknown:
        raise ConfigError(path, f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(known))})")
    ex_id = _expect_str(path, f"{where}.id", raw.get("id"))
    if not ID_RE.match(ex_id):
        raise ConfigError(path, f"{where}.id", f"expected lowercase letters, digits and dashes, got {ex_id!r}")
    title = _expect_str(path, f"{where}.title", raw.get("title"))
    points = raw.get("points")
    if not isinstance(points, int) or isinstance(points, bool) or points < 0:
        raise ConfigError(path, f"{where}.points", f"expected a non-negative integer, got {_show(points)}")
    params = raw.get("params") or {}
    if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
        raise ConfigError(path, f"{where}.params", f"expected a mapping of names to values, got {_show(params)}")
    prompt = _substitute(path, f"{where}.prompt", _expect_str(path, f"{where}.prompt", raw.get("prompt")), params)
    hints_raw = raw.get("hints", [])
    if not isinstance(hints_raw, list):
        raise ConfigError(path, f"{where}.hints", f"expected a list of strings, got {_show(hints_raw)}")
    hints = tuple(
        _substitute(path, f"{where}.hints[{i}]", _expect_str(path, f"{where}.hints[{i}]", h), params)
        for i, h in enumerate(hints_raw)
    )
    check = _expect_str(path, f"{where}.check", raw.get("check"))
    if not check.isidentifier():
        raise ConfigError(path, f"{where}.check", f"expected a Python function name, got {check!r}")
    answer = raw.get("answer")
    if answer is not None:
        answer = _substitute(path, f"{where}.answer", _expect_str(path, f"{where}.answer", answer), params)
    solved = _parse_solved(path, f"{where}.solved", raw.get("solved"), params)
    withheld_by = raw.get("withheld_by", [])
    if not isinstance(withheld_by, list) or not all(isinstance(t, str) and t.startswith("labkit ") for t in withheld_by):
        raise ConfigError(path, f"{where}.withheld_by",
                          f"expected a list of labkit commands (\"labkit LAB-TOOL COMMAND\"), got {_show(withheld_by)}")
    if withheld_by and answer is None:
        raise ConfigError(path, f"{where}.withheld_by", "only an exercise with an answer file withholds its outcome")
    keys_raw = raw.get("answer_keys", [])
    if not isinstance(keys_raw, list) or not all(isinstance(k, str) and k.strip() for k in keys_raw):
        raise ConfigError(path, f"{where}.answer_keys", f"expected a list of key names, got {_show(keys_raw)}")
    if keys_raw and answer is None:
        raise ConfigError(path, f"{where}.answer_keys", "only an exercise with an answer file has answer keys")
    answer_keys = tuple(_substitute(path, f"{where}.answer_keys[{i}]", k, params) for i, k in enumerate(keys_raw))
    if len(set(answer_keys)) != len(answer_keys):
        raise ConfigError(path, f"{where}.answer_keys", "a key is listed twice")
    return Exercise(ex_id, title, points, prompt, hints, check, dict(params), answer, solved, tuple(withheld_by),
                    answer_keys)


SOLVED_PARTS = ("holds", "unchanged")


def _parse_solved(path, where: str, raw, params: dict) -> dict[str, tuple[str, ...]]:
    """`solved: {holds: [...], unchanged: [...]}`: each a list of sentences."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(path, where, f"expected a mapping with {' and '.join(SOLVED_PARTS)}, got {_show(raw)}")
    unknown = sorted(set(raw) - set(SOLVED_PARTS), key=str)
    if unknown:
        raise ConfigError(path, f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(SOLVED_PARTS)})")
    out = {}
    for part in SOLVED_PARTS:
        items = raw.get(part)
        if not isinstance(items, list) or not items:
            raise ConfigError(path, f"{where}.{part}", f"expected a non-empty list of sentences, got {_show(items)}")
        out[part] = tuple(_substitute(path, f"{where}.{part}[{i}]", _expect_str(path, f"{where}.{part}[{i}]", item), params)
                          for i, item in enumerate(items))
    return out


def load_lab(directory: Path) -> Lab:
    path = directory / "lab.yaml"
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(path, None, f"expected a mapping at the top level, got {_show(raw)}")
    known = {"id", "title", "summary", "prerequisites", "exercises", "reveal_answers"}
    unknown = sorted(set(raw) - known, key=str)
    if unknown:
        raise ConfigError(path, unknown[0], f"unknown field (known: {', '.join(sorted(known))})")
    lab_id = _expect_str(path, "id", raw.get("id"))
    if lab_id != directory.name:
        raise ConfigError(path, "id", f"expected {directory.name!r} (the directory name), got {lab_id!r}")
    if not ID_RE.match(lab_id):
        raise ConfigError(path, "id", f"expected lowercase letters, digits and dashes, got {lab_id!r}")
    title = _expect_str(path, "title", raw.get("title"))
    summary = _expect_str(path, "summary", raw.get("summary"))
    prereq = raw.get("prerequisites", [])
    if not isinstance(prereq, list):
        raise ConfigError(path, "prerequisites", f"expected a list, got {_show(prereq)}")
    for i, p in enumerate(prereq):
        if p not in PREREQUISITES:
            raise ConfigError(path, f"prerequisites[{i}]", f"expected one of {', '.join(PREREQUISITES)}, got {_show(p)}")
    exercises_raw = raw.get("exercises")
    if not isinstance(exercises_raw, list) or not exercises_raw:
        raise ConfigError(path, "exercises", f"expected a non-empty list, got {_show(exercises_raw)}")
    reveal = raw.get("reveal_answers", False)
    if not isinstance(reveal, bool):
        raise ConfigError(path, "reveal_answers", f"expected true or false, got {_show(reveal)}")
    exercises = tuple(_parse_exercise(path, i, e) for i, e in enumerate(exercises_raw))
    seen = set()
    for i, ex in enumerate(exercises):
        if ex.id in seen:
            raise ConfigError(path, f"exercises[{i}].id", f"duplicate exercise id {ex.id!r}")
        seen.add(ex.id)
    return Lab(lab_id, title, summary, tuple(prereq), exercises, directory, reveal)


def discover() -> dict[str, Path]:
    """Lab id -> directory, for every directory with a lab.yaml on the labs path (first wins)."""
    found: dict[str, Path] = {}
    for root in paths.labs_path():
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            if (child / "lab.yaml").is_file() and child.name not in found:
                found[child.name] = child
    return found


def get_lab(lab_id: str) -> Lab:
    found = discover()
    if lab_id not in found:
        known = ", ".join(sorted(found)) or "none"
        raise LabNotFound(f"no lab named {lab_id!r} (labs: {known})")
    return load_lab(found[lab_id])
