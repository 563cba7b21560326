"""The live tables of a lab network namespace, as iptables-legacy-save prints them inside it.

Why not python-iptables (libiptc through ctypes), although it reads a namespace's tables without a
process: the tracer reads rules in iptables-save's form, one parser for saved files, kube-proxy's
restore input and live tables. libiptc hands out its structures; labkit would have to print each
match and target back into that form, which is what iptables-legacy-save does with every
extension's own printer, exactly. The labs already run iptables-legacy-save and -restore in their
nodes (kube-proxy's sync, labkit.netfilter.load), so this reading needs nothing more, while
python-iptables had to be compiled at every install (PyPI has no wheel of it: a C compiler and
Python's headers on every student machine).
"""

from __future__ import annotations

from labkit.netfilter.load import save
from labkit.netfilter.ruleset import Ruleset, parse


def read_live_text(netns: str, tables: tuple[str, ...] = ("filter", "nat"), *, family: str = "IPv4") -> str:
    """The namespace's tables as iptables-legacy-save prints them (inside the namespace)."""
    return "".join(save(netns, table, family=family) for table in tables)


def read_live(netns: str, tables: tuple[str, ...] = ("filter", "nat"), *, family: str = "IPv4") -> Ruleset:
    """The namespace's live tables as a Ruleset."""
    return parse(read_live_text(netns, tables, family=family))
