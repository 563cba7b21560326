"""Programming a lab node's network namespace the way kube-proxy's iptables proxier does on a sync.

Kubernetes v1.34, pkg/proxy/iptables/proxier.go. When kube-proxy starts, NewProxier starts
`ipt.Monitor(KUBE-PROXY-CANARY, [mangle, nat, filter], forceSyncProxyRules, ...)`: the monitor
creates the empty canary chain in the three tables and, when the mangle one disappears (someone
flushed the tables), forces a full sync. On a full sync syncProxyRules first makes sure its chains
and the jump rules from the built-in chains exist (EnsureChain, then EnsureRule(Prepend):
`iptables -C`, and `-I CHAIN 1` when missing) and that its nfacct counters exist (a counter that
cannot be created is left out of the rules); then it lists the nat table's chains (iptables-save
-t nat) to find stale service chains, and loads the rendered text with `iptables-restore
--noflush --counters`. sync_node does the same inside a lab namespace, with the legacy backend.
The canaries, chains and jump rules go in with one iptables-restore --noflush of "-N" and
"-I CHAIN 1" lines, in kube-proxy's order, for the ones missing.
"""

from __future__ import annotations

from typing import Iterable

from labkit.kubeproxy.config import ProxierConfig
from labkit.kubeproxy.proxier import JUMP_CHAINS, jump_rules, render
from labkit.netfilter import load
from labkit.netfilter.ruleset import quote_word, parse, parse_rule, same_rule

CANARY = "KUBE-PROXY-CANARY"
CANARY_TABLES = ("mangle", "nat", "filter")


def canary_present(netns: str, family: str = "IPv4") -> bool:
    """What kube-proxy's iptables monitor polls: its canary chain in the mangle table."""
    return any(line.startswith(f":{CANARY} ") for line in load.save(netns, "mangle", family=family).splitlines())


def ensure_jump_rules(netns: str, config: ProxierConfig) -> list[str]:
    """Create kube-proxy's canary chains, its chains and its jump rules where missing; returns
    the rule lines added."""
    current = parse(load.save(netns, family=config.ip_family))
    lines_by_table: dict[str, list[str]] = {}
    for table in CANARY_TABLES:
        t = current.table(table)
        if t is None or CANARY not in t.chains:
            lines_by_table.setdefault(table, []).append(f"-N {CANARY}")
    for table, _src, dst, _comment, _extra in JUMP_CHAINS:
        t = current.table(table)
        if t is None or dst not in t.chains:
            lines = lines_by_table.setdefault(table, [])
            if f"-N {dst}" not in lines:
                lines.append(f"-N {dst}")
    added = []
    for table, chain, args in jump_rules():
        existing = current.chain(table, chain)
        wanted = parse_rule(f"-A {chain} " + " ".join(quote_word(a) for a in args))
        if existing is not None and any(same_rule(wanted, r) for r in existing.rules):
            continue
        line = f"-I {chain} 1 " + " ".join(quote_word(a) for a in args)
        lines_by_table.setdefault(table, []).append(line)
        added.append(line)
    text = "".join(f"*{table}\n" + "".join(l + "\n" for l in lines) + "COMMIT\n" for table, lines in lines_by_table.items())
    if text:
        load.restore(netns, text, noflush=True, family=config.ip_family)
    return added


def sync_node(netns: str, objects: Iterable[dict], config: ProxierConfig, *,
              changed_services: Iterable[str] | None = None) -> str:
    """A kube-proxy sync of `objects` into the lab namespace `netns` (full unless
    changed_services is given); returns the iptables-restore text it loaded."""
    family = config.ip_family
    if config.nfacct_counters:
        # On a full sync kube-proxy (re)creates its counters and remembers which exist; a partial
        # sync uses what the last full sync found. Asking the kernel again gives the same answer.
        config = config.with_overrides(nfacct_counters=load.available_nfacct(netns, config.nfacct_counters))
    if changed_services is None:
        ensure_jump_rules(netns, config)
    text = render(objects, config, existing_nat_chains=load.nat_chain_names(netns, family=family),
                  changed_services=changed_services)
    load.restore(netns, text, noflush=True, counters=True, family=family)
    return text
