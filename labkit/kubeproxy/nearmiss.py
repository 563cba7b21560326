"""Near-misses of the kube-proxy lab's reference solutions (labs/kube-proxy/mutants/*.py), built
with labkit.mutants' generators and judged against labkit's reconstruction.

- `service_mutants`: every one-step edit of a Service (tree_edits), applied in-process as the API
  server would store it (labkit.kubeproxy.cluster_state: defaults, allocations, validation; an
  edit the API server refuses is no near-miss a student can reach and is left out), with each
  node's rules as kube-proxy would sync them. An edit the API server defaults back is proven
  equivalent.
- `rule_mutants`: every one-step edit of some chains' rules (iptables_edits) on one node, loaded
  into that node's live rules as iptables-restore --noflush would; an edit whose rules treat every
  probe of the packet space as the reference does (labkit.kubeproxy.judge) is proven equivalent.
"""

from __future__ import annotations

import copy
import hashlib
import shlex
from typing import Callable, Iterable

from labkit.errors import LabkitError
from labkit.kubeproxy import live
from labkit.mutants import Mutant, iptables_edits, tree_edits
from labkit.netfilter import parse, restore
from labkit.netfilter.ruleset import quote_word

SERVICE_ALTERNATIVES = {
    "spec.type": ["ClusterIP", "NodePort", "LoadBalancer"],
    "spec.sessionAffinity": ["None", "ClientIP"],
    "spec.externalTrafficPolicy": ["Cluster", "Local"],
    "spec.internalTrafficPolicy": ["Cluster", "Local"],
    "spec.ports[].protocol": ["TCP", "UDP", "SCTP"],
    "spec.ports[].targetPort": [8080, 8081, 9376, "http", "api"],
    "spec.ports[].port": [81, 8080],
    "spec.selector.app": ["web", "api", "shop"],
    "spec.sessionAffinityConfig.clientIP.timeoutSeconds": [60, 10799, 10801, 86400],
}
IMMUTABLE = ("spec.clusterIP", "spec.clusterIPs", "spec.ipFamilies", "spec.ipFamilyPolicy")


def settled(observation: dict) -> dict:
    """The observation with its deferred traffic sent (mutants reuse the reference's)."""
    out = dict(observation)
    value = out.get("traffic")
    if callable(value):
        out["traffic"] = value()
    return out


def restore_block(table: str, chains: list[str], rules: list[list[str]]) -> str:
    lines = [f"*{table}"] + [f":{c} - [0:0]" for c in chains]
    for rule in rules:
        if rule[0] == "-I" and not (len(rule) > 2 and rule[2].isdigit()):
            rule = [rule[0], rule[1], "1", *rule[2:]]
        lines.append(" ".join(quote_word(a) for a in rule))
    return "\n".join(lines) + "\nCOMMIT\n"


def rule_args(rule) -> list[str]:
    return shlex.split(rule.text)


def service_mutants(ctx, observation: dict, name: str, reference_rules: Callable, *, extra_skip=(),
                    names: Callable | None = None, equivalent: Callable | None = None,
                    alternatives: dict | None = None) -> Iterable[Mutant]:
    """One Mutant per valid one-step edit of Service `name`'s spec (and labels)."""
    observation = settled(observation)
    state = observation["state"]
    svc = state.service(name)
    alternatives = {**SERVICE_ALTERNATIVES, **(alternatives or {})}
    skip = lambda p: p.startswith(IMMUTABLE) or p.startswith(tuple(extra_skip))
    edits = list(tree_edits(svc["spec"], "spec", alternatives=alternatives, skip=skip))
    for edit in edits:
        doc = copy.deepcopy(svc)
        doc["spec"] = edit.value
        changed = copy.deepcopy(state)
        try:
            changed.apply([doc], "mutant")
        except Exception:
            continue            # the API server refuses it: not a state a student can reach
        after = changed.service(name)
        mutant_name = f"service:{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
        rules = {node: reference_rules(changed, node) for node in changed.node_names()}
        obs = {**observation, "state": changed, "rules": rules}
        proof = None
        if after == svc:
            proof = "the API server stores the same Service (its defaults fill the field back in)"
        elif equivalent is not None:
            proof = equivalent(edit, svc, after)

        def apply(env, doc=doc):
            live.apply_documents(env, [doc], "mutant")
        yield Mutant(mutant_name, f"Service {name}: {edit.describe()}", names=tuple(names(edit) if names else (edit.key,)),
                     observation=obs, apply=apply, equivalent=proof)


def refused(rules: list[list[str]], text: str, table: str) -> str | None:
    """Why iptables would refuse the edited rules, or None: a port match without a protocol that
    has ports (`--dport` needs `-p tcp|udp|sctp`: "unknown option"), or jumps that loop (the
    kernel's mark_source_chains refuses them with ELOOP, whether or not a packet takes them)."""
    for rule in rules:
        protos = [rule[i + 1] for i, w in enumerate(rule[:-1]) if w == "-p" and (i == 0 or rule[i - 1] != "!")]
        has_ports = any(p in ("tcp", "udp", "sctp") for p in protos)
        if any(w in ("--dport", "--sport") for w in rule) and not has_ports:
            return "a port match without -p tcp|udp|sctp"
        # a target's options belong to it: another target refuses them ("unknown option --to-destination")
        target = rule[rule.index("-j") + 1] if "-j" in rule[:-1] else None
        if ("--to-destination" in rule and target != "DNAT") or ("--to-source" in rule and target != "SNAT"):
            return "a target option without its target"
        # the DNAT target: "Need TCP, UDP, SCTP or DCCP with port specification"
        targets = [rule[i + 1] for i, w in enumerate(rule[:-1]) if w == "--to-destination"]
        if any(":" in t for t in targets) and not has_ports:
            return "a DNAT to a port without -p tcp|udp|sctp"
    t = parse(text).table(table)
    graph = {name: {r.target for r in chain.rules if r.target and t.chain(r.target) is not None}
             for name, chain in t.chains.items()}
    state: dict[str, int] = {}

    def loops(name) -> bool:
        state[name] = 1
        for nxt in graph.get(name, ()):
            if state.get(nxt) == 1 or (state.get(nxt) is None and loops(nxt)):
                return True
        state[name] = 2
        return False
    return "jumps that loop" if any(state.get(n) is None and loops(n) for n in graph) else None


def rule_mutants(ctx, observation: dict, node: str, table: str, chains: list[str], rules: list[list[str]], *,
                 values: dict | None = None, keep: Callable | None = None, names=(), prefix: str = "",
                 equivalent_space: Callable | None = None) -> Iterable[Mutant]:
    """One Mutant per iptables_edits near-miss of `rules` (the whole content of `chains`, in
    order) on `node`: the chains reloaded with the edited rules (iptables-restore --noflush
    semantics). `equivalent_space(rules_text)` returns the differences from the reference over the
    packet space, [] proving the edit equivalent."""
    observation = settled(observation)
    base = observation["rules"][node]
    for edit in iptables_edits(rules, values=values or {}, keep=keep):
        block = restore_block(table, chains, edit.rules)
        text = base + block
        obs = {**observation, "rules": {**observation["rules"], node: text}}
        proof = None
        try:
            if refused(edit.rules, text, table):
                continue
            found = equivalent_space(text) if equivalent_space is not None else None
        except LabkitError:
            continue            # iptables-restore refuses it (a loop, say): not a state a student can reach
        if equivalent_space is not None and not found:
            proof = ("labkit's packet tracer finds every probe of the packet space (every protocol and port, every "
                     "kind of source) treated as kube-proxy's rules treat it")
        described = edit.describe(rules)
        option = (edit.option or "").replace(" ", "")

        def apply(env, block=block, node=node):
            restore(env.netns_name(node), block, noflush=True)
        digest = hashlib.sha256(block.encode()).hexdigest()[:8]
        yield Mutant(f"{prefix}{node}:{edit.op}:{edit.rule}:{option}:{digest}", f"on {node}: {described}", names=tuple(names),
                     observation=obs, apply=apply, equivalent=proof)


def chain_rules(text: str, table: str, chains: list[str]) -> list[list[str]]:
    """The rules of `chains` in a ruleset text, as iptables argument lists, chain by chain."""
    t = parse(text).table(table)
    return [rule_args(r) for c in chains if t.chain(c) for r in t.chain(c).rules]
