"""The chain graph of a ruleset: which chain jumps where, under which conditions.

    graph = ChainGraph.build(table, roots=["PREROUTING", "OUTPUT"], keep=lambda chain, rule: True)
    graph.tree()  -> str     a terminal tree, depth first from each root
    graph.dot()   -> str     Graphviz source (render it with `dot -Tsvg` / `-Tpng`)

Chains are the graph's nodes; every rule with a target is an edge from its chain to the target,
labelled with the rule's conditions (addresses, ports, `statistic` probabilities, `recent`
lists, marks). Targets that are not chains (DNAT, MARK, MASQUERADE, ACCEPT, REJECT, ...) are
leaves showing their arguments. `keep(chain, rule)` can leave rules out; chains that nothing kept
reaches are not drawn.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Callable

from labkit.netfilter.ruleset import Rule, Table

LABEL_WIDTH = 40        # characters per line of an edge's label in the Graphviz drawing


@dataclass
class Edge:
    source: str
    target: str            # a chain name, or a leaf id (see ChainGraph.leaves)
    label: str             # the rule's conditions
    comment: str | None
    position: int          # the rule's number in its chain (1-based)


@dataclass
class ChainGraph:
    table: str
    roots: list[str]
    edges: dict[str, list[Edge]] = field(default_factory=dict)      # chain -> its kept rules, in order
    leaves: dict[str, str] = field(default_factory=dict)            # leaf id -> text, e.g. "DNAT 10.244.1.2:8080"

    @classmethod
    def build(cls, table: Table, roots: list[str], keep: Callable[[str, Rule], bool] = lambda c, r: True) -> "ChainGraph":
        graph = cls(table.name, [r for r in roots if table.chain(r)])
        pending = list(graph.roots)
        while pending:
            name = pending.pop()
            if name in graph.edges:
                continue
            graph.edges[name] = []
            for position, rule in enumerate(table.chain(name).rules, 1):
                if rule.target is None or not keep(name, rule):
                    continue
                if table.chain(rule.target) is not None:
                    target = rule.target
                    pending.append(target)
                else:
                    text = " ".join([rule.target, *rule.target_args])
                    target = f"leaf{len(graph.leaves)}"
                    graph.leaves[target] = text
                graph.edges[name].append(Edge(name, target, conditions(rule), rule.comment, position))
        return graph

    def tree(self) -> str:
        lines: list[str] = []
        shown: set[str] = set()

        def walk(chain: str, prefix: str) -> None:
            edges = self.edges.get(chain, [])
            for i, edge in enumerate(edges):
                last = i == len(edges) - 1
                branch, below = ("└─ ", "   ") if last else ("├─ ", "│  ")
                name = self.leaves.get(edge.target, edge.target)
                detail = "  ".join(x for x in (edge.label, f'"{edge.comment}"' if edge.comment else "") if x)
                again = edge.target in shown and edge.target in self.edges and self.edges[edge.target]
                lines.append(f"{prefix}{branch}{name}" + (f"  [{detail}]" if detail else "") + ("  (see above)" if again else ""))
                if edge.target in self.edges and edge.target not in shown:
                    shown.add(edge.target)
                    walk(edge.target, prefix + below)

        for root in self.roots:
            lines.append(f"{self.table} {root}")
            shown.add(root)
            walk(root, "")
        return "\n".join(lines) + "\n"

    def dot(self) -> str:
        out = ["digraph chains {", "  rankdir=LR;", '  node [fontname="monospace", fontsize=10];',
               '  edge [fontname="monospace", fontsize=9];']
        for chain in self.edges:
            shape = "ellipse, style=filled, fillcolor=lightgrey" if chain in self.roots else "box"
            out.append(f'  "{chain}" [shape={shape}, label="{_esc(chain)}"];')
        for leaf, text in self.leaves.items():
            out.append(f'  "{leaf}" [shape=note, label="{_esc(text)}"];')
        for edges in self.edges.values():
            for edge in edges:
                # long conditions and comments wrap, so the drawing stays a few screens wide
                parts = (f"#{edge.position} {edge.label}".strip(), edge.comment or "")
                lines = [line for x in parts if x for line in textwrap.wrap(x, LABEL_WIDTH, break_long_words=False,
                                                                           break_on_hyphens=False)]
                label = "\\n".join(_esc(line) for line in lines)
                out.append(f'  "{edge.source}" -> "{edge.target}" [label="{label}"];')
        out.append("}")
        return "\n".join(out) + "\n"


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def conditions(rule: Rule) -> str:
    """A rule's conditions in short form: addresses, protocol, ports, probability, recent, marks."""
    words = []
    for c in rule.conds:
        neg = "! " if c.negated else ""
        if c.kind in ("comment", "nfacct"):
            continue
        if c.kind == "statistic":
            v = c.value
            # every digit the rule has (iptables-save prints the kernel's 11 decimals): a rounded
            # value would be a wrong answer where the exact probability is asked
            words.append(f"{neg}probability {v['probability']}" if "probability" in v
                         else f"{neg}statistic {' '.join(f'{k} {x}' for k, x in v.items())}")
        elif c.kind == "recent":
            v = c.value
            seconds = f" {v['seconds']}s" if v.get("seconds") else ""
            words.append(f"{neg}recent {v.get('action')} {v.get('name')}{seconds}")
        else:
            words.append(c.text)
    return " ".join(words)
