"""Near-misses of what the namespace lab's checks observe (labs/namespace/mutants/): the
generic one-step edits of labkit.mutants.tree_edits (every scalar changed, every list item dropped,
two items swapped), plus the two edits it leaves to labs: a whole part of the observation
replaced by another state (a namespace that still exists, an APIService that is not Available)
and an item added to a list (one more finalize request, one more object left in storage).

Paths are tuples of keys (keys of the observations contain dots: `backups.example.com`); a
mutant's name writes them joined with `/`.
"""

from __future__ import annotations

import copy
from typing import Callable, Iterator

from labkit.mutants import Edit, Mutant, tree_edits

Path = tuple


def _at(value, path: Path):
    for step in path:
        value = value[step]
    return value


def _with(value, path: Path, new=None, *, append=False):
    out = copy.deepcopy(value)
    parent = _at(out, path[:-1])
    if append:
        parent[path[-1]].append(new)
    else:
        parent[path[-1]] = new
    return out


def _name(path: Path) -> str:
    return "/".join(str(p) for p in path)


def observation_mutants(observation, *, names: Callable[[Edit], tuple | None],
                        equivalent: Callable[[Edit], str | None] = lambda e: None,
                        alternatives: dict | None = None, skip: Callable[[str], bool] | None = None,
                        replace: dict[Path, list] | None = None, add: dict[Path, list] | None = None,
                        apply: dict[str, Callable] | None = None) -> Iterator[Mutant]:
    """Every tree_edits near-miss of `observation` (keys are never dropped: an observation always
    has them), then each path of `replace` set to each of its states, then each item of `add`
    appended to the list at its path. `names(edit)` gives the words the check's failure must
    contain (None: leave that edit out, it is not a state the lab can be in); `equivalent(edit)`
    the proof that it behaves as the reference does. `apply` maps a mutant's name to the same
    change made live."""
    apply = apply or {}
    seen = set()

    def make(name, change, edit):
        if name in seen:
            return None
        seen.add(name)
        proof = equivalent(edit)
        words = () if proof else names(edit)
        if words is None:
            return None
        return Mutant(name, change, names=tuple(words), observation=edit.value, apply=apply.get(name),
                      equivalent=proof)

    for edit in tree_edits(observation, alternatives=alternatives, skip=skip, drop_keys=False):
        m = make(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                 f"observation: {edit.describe()}", edit)
        if m:
            yield m
    for path, states in (replace or {}).items():
        for state in states:
            before = _at(observation, path)
            if state == before:
                continue
            edit = Edit("set", _name(path), before, state, _with(observation, path, state))
            m = make(f"replace:{_name(path)}={state}", f"observation: {_name(path)} is {state}", edit)
            if m:
                yield m
    for path, items in (add or {}).items():
        for item in items:
            edit = Edit("add-item", _name(path), _at(observation, path), item,
                        _with(observation, path, item, append=True))
            m = make(f"add:{_name(path)}={item}", f"observation: {edit.describe()}", edit)
            if m:
                yield m


GONE_STILL_HELD = {"phase": "Terminating", "deleting": True, "held": 1, "held_by": ["configmaps/other"]}
GONE_NOTHING_HELD = {"phase": "Terminating", "deleting": True, "held": 0, "held_by": []}
GONE_ACTIVE = {"phase": "Active", "deleting": False, "held": 0, "held_by": []}


def gone_edits(prefix: Path, stored: str) -> tuple[dict, dict]:
    """The near-misses of a namespace that went away cleanly (checks.observe_gone): it still
    exists (held by a finalizer; held by nothing yet; not even deleted), someone force-finalized
    it, an object is still stored under its name. (replace, add) for observation_mutants."""
    return ({prefix + ("namespace",): [GONE_STILL_HELD, GONE_NOTHING_HELD, GONE_ACTIVE]},
            {prefix + ("forced",): [{"user": "kubernetes-admin", "finalizers": []}],
             prefix + ("stored",): [stored]})


def gone_names(edit: Edit, prefix: str = "gone/") -> tuple | None:
    """The words for a near-miss of observe_gone's part (None when the edit is not one)."""
    path = edit.path
    if not path.startswith(prefix):
        return None
    part = path[len(prefix):]
    if part == "namespace":
        after = edit.after or {}
        if after.get("held"):
            return ("still exists", "still carry finalizers")
        if after.get("deleting"):
            return ("still exists", "check again")
        return ("still exists",)
    if part == "forced":
        return ("force-finalized",)
    if part == "stored":
        return ("still stored",)
    return None


def gone_equivalent(edit: Edit, prefix: str = "gone/") -> str | None:
    if edit.path == prefix.replace("/", ".") + "spec_edit" or edit.path == prefix + "spec_edit":
        return ("a normal update or patch of the namespace keeps spec.finalizers as they are "
                "(pkg/registry/core/namespace/strategy.go, PrepareForUpdate), so it changed nothing of "
                "how the namespace went")
    return None
