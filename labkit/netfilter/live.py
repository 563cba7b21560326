"""The live tables of a lab network namespace, read with python-iptables.

python-iptables (libiptc, the legacy backend) works on the calling process's network namespace,
so the reading happens in a child process that has joined the lab's namespace with setns(2)
(labkit.netfilter.nsexec). Each rule is turned into a rule line (iptables-save style) and parsed
with the same parser as text files, so live rules and saved files read the same.
"""

from __future__ import annotations

import ipaddress

from labkit.netfilter.nsexec import call_in_netns
from labkit.netfilter.ruleset import Ruleset, parse


def _word(value: str) -> str:
    if value == "" or any(ch in value for ch in ' "\\\'\t'):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def _negatable(value: str | None) -> tuple[bool, str | None]:
    if value and value.startswith("!"):
        return True, value[1:]
    return False, value


def _address(flag: str, value: str | None, family: str) -> list[str]:
    negated, value = _negatable(value)
    if not value:
        return []
    net = ipaddress.ip_network(value, strict=False)
    if net.prefixlen == 0:
        return []
    return (["!"] if negated else []) + [flag, str(net)]


def _params(params: dict) -> list[str]:
    words: list[str] = []
    for key, values in params.items():
        values = list(values)
        if values and values[0] == "!":
            words.append("!")
            values = values[1:]
        words.append(f"--{key}")
        words += [_word(v) for v in values]
    return words


def _rule_words(rule, family: str) -> list[str]:
    words = _address("-s", rule.src, family) + _address("-d", rule.dst, family)
    negated, proto = _negatable(rule.protocol)
    if proto and proto not in ("ip", "all", "0", "ipv6"):
        words += (["!"] if negated else []) + ["-p", proto]
    for flag, iface in (("-i", rule.in_interface), ("-o", rule.out_interface)):
        negated, iface = _negatable(iface)
        if iface:
            words += (["!"] if negated else []) + [flag, iface]
    for match in rule.matches:
        words += ["-m", match.name] + _params(match.get_all_parameters())
    target = rule.target
    if target is not None and target.name:
        words += ["-g" if getattr(rule, "goto", False) else "-j", target.name] + _params(target.get_all_parameters())
    return words


def _dump(tables: tuple[str, ...], family: str) -> str:
    """In the current namespace: the tables as iptables-save style text."""
    import iptc

    lines = []
    table_class = iptc.Table6 if family == "IPv6" else iptc.Table
    for name in tables:
        table = table_class(name)
        table.refresh()
        lines.append(f"*{name}")
        chains = table.chains
        for chain in chains:
            policy = chain.get_policy().name if chain.is_builtin() else "-"
            lines.append(f":{chain.name} {policy} [0:0]")
        for chain in chains:
            for rule in chain.rules:
                lines.append(" ".join(["-A", chain.name] + _rule_words(rule, family)))
        lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def read_live_text(netns: str, tables: tuple[str, ...] = ("filter", "nat"), *, family: str = "IPv4") -> str:
    """The namespace's tables as rule text, read through python-iptables in a child that joined it."""
    return call_in_netns(netns, _dump, tuple(tables), family)


def read_live(netns: str, tables: tuple[str, ...] = ("filter", "nat"), *, family: str = "IPv4") -> Ruleset:
    """The namespace's live tables as a Ruleset."""
    return parse(read_live_text(netns, tables, family=family))
