"""Near-misses of a pool's Nodes, shared by the mutants of binpack and spread (loaded with
ctx.lab._load): each Node of the observation edited one step at a time (labkit.mutants.tree_edits,
with the exercise's alternatives), or deleted; each must be killed by a check that keeps the
Nodes as the lab built them."""

from __future__ import annotations

import copy

from labkit.mutants import Mutant, tree_edits


def with_(obs: dict, **changes) -> dict:
    """A copy of the observation with some of its entries replaced."""
    out = copy.deepcopy(obs)
    out.update(changes)
    return out


def node_mutants(obs: dict, alternatives: dict):
    """Every one-step edit of each Node in obs["nodes"] (but dropping spec.unschedulable, which
    the view leaves out when false), and each Node gone."""
    for node, view in obs["nodes"].items():
        for edit in tree_edits(view, alternatives=alternatives):
            if edit.value == view or (edit.op == "drop" and edit.path == "unschedulable"):
                continue
            yield Mutant(f"node:{node}:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                         f"{node}: {edit.describe()}", names=(node, "changed"),
                         observation=with_(obs, nodes={**obs["nodes"], node: edit.value}))
        yield Mutant(f"node:{node}:gone", f"{node} deleted", names=(node, "gone"),
                     observation=with_(obs, nodes={**obs["nodes"], node: None}))
