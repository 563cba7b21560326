"""Judging a node's live rules against what kube-proxy would write, over a packet space.

The kube-proxy lab's checks do not sample one or two requests: they ask, for every packet of a
generated space, whether the node's live rules treat it as kube-proxy's rules would, both followed
with labkit's packet tracer (labkit.netfilter.trace, which explores every statistic branch):

- the reference ruleset of a node is the node as the lab built it (its iptables-save right after
  `labkit run`, kubelet's and the CNI's rules included: `save_built`) with kube-proxy's sync of
  the objects that should be programmed loaded on top, as `iptables-restore --noflush` loads it
  (labkit.kubeproxy.proxier.render, the reconstruction of syncProxyRules in
  pkg/proxy/iptables/proxier.go, v1.34);
- the packet space (`probes`): tcp, udp and sctp; every Service's cluster IP on its ports and on
  other ports; every node address and 127.0.0.1 on every nodePort, on the Service's ports and on
  other ports; sent by the
  client outside the cluster, by a pod on the node, by a pod on another node, by the node itself,
  and by every endpoint pod on the node to its own Service (the hairpin);
- an outcome is the chance of each (DNAT target, dropped or not, masqueraded or not): two rulesets
  behave alike when every probe has the same outcomes within TOLERANCE.

Behaving alike is not all: `structure_differences` compares every chain and rule of a node's nat
and filter tables with the reference's, as the kernel keeps them (the way a rule is spelled aside),
so that rules added beside kube-proxy's, or a bypass in front of broken chains, are seen even where
the packets end up in the same places.

The lab also keeps a log of kube-proxy's syncs (`record_sync`, `syncs_since`), so that a check can
tell a repair made by hand from one kube-proxy made.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.kubeproxy.proxier import render
from labkit.netfilter import Packet, Tracer, parse

TOLERANCE = 1e-6
PROTOCOLS = ("tcp", "udp", "sctp")
BUILT_FILE = "built-{node}.rules"
SYNC_LOG = "syncs.jsonl"


# -- the node as built, and kube-proxy's syncs since ---------------------------------------------

def built_path(env, node: str) -> Path:
    return Path(env.dir) / BUILT_FILE.format(node=node)


def save_built(env, node: str, text: str) -> None:
    """Keep a node's iptables-save as the lab built it (before any exercise changes it)."""
    built_path(env, node).write_text(text)


def built_rules(env, node: str) -> str:
    try:
        return built_path(env, node).read_text()
    except OSError:
        from labkit.errors import LabkitError
        raise LabkitError(f"lab {env.lab.id} has no record of how {node} was built: `labkit reset {env.lab.id}` "
                          "rebuilds it")


def record_sync(env, node: str, services, programmed=()) -> None:
    """One kube-proxy sync of a node: `services` the "namespace/name"s rewritten, None for a full
    sync; `programmed` those of them kube-proxy wrote rules for (not left alone for their
    service-proxy-name label)."""
    with (Path(env.dir) / SYNC_LOG).open("a") as log:
        log.write(json.dumps({"time": time.time(), "node": node,
                              "services": None if services is None else sorted(services),
                              "programmed": sorted(programmed)}) + "\n")


def record_mark(env, mark: str) -> None:
    """A point in the sync log (e.g. "debug-ruleset broken"), for syncs_since."""
    with (Path(env.dir) / SYNC_LOG).open("a") as log:
        log.write(json.dumps({"time": time.time(), "mark": mark}) + "\n")


def _sync_log(env, mark: str) -> tuple[list[dict], int]:
    """The sync log's entries and the index of the last `mark` (-1 if it is not there)."""
    try:
        lines = (Path(env.dir) / SYNC_LOG).read_text().splitlines()
    except OSError:
        return [], -1
    entries = [json.loads(line) for line in lines if line.strip()]
    return entries, max((i for i, e in enumerate(entries) if e.get("mark") == mark), default=-1)


def syncs_since(env, mark: str) -> list[dict]:
    """The syncs logged after the last `mark` (all of them if the mark is not there)."""
    entries, last = _sync_log(env, mark)
    return [e for e in entries[last + 1:] if "node" in e]


def syncs_before(env, mark: str) -> list[dict]:
    """The syncs logged before the last `mark` (none if the mark is not there): what a reset that
    logged the mark started afresh from, kept for the grade report."""
    entries, last = _sync_log(env, mark)
    return [e for e in entries[:max(last, 0)] if "node" in e]


def kube_proxy_chain_names(state, exclude=()) -> set[str]:
    """Every per-service chain name kube-proxy could write for the cluster's Services on any node
    (KUBE-SVC/SVL/EXT/FW for each port, KUBE-SEP for each endpoint: labkit.kubeproxy.chains, the
    names of servicePortPolicyClusterChain & co. in proxier.go), but for the Services in `exclude`."""
    from labkit.kubeproxy.chains import (endpoint_chain, external_chain, firewall_chain, local_service_chain,
                                         service_chain, service_port_name)
    out = set()
    for svc in state.services:
        namespace, name = svc["metadata"].get("namespace", "default"), svc["metadata"]["name"]
        if name in exclude:
            continue
        for port in svc["spec"].get("ports") or []:
            spn = service_port_name(namespace, name, port.get("name", ""))
            proto = port.get("protocol", "TCP").lower()
            out |= {service_chain(spn, proto), local_service_chain(spn, proto), external_chain(spn, proto),
                    firewall_chain(spn, proto)}
            for sl in state.slices_of(namespace, name):
                for sl_port in sl.get("ports") or []:
                    if sl_port.get("name", "") == port.get("name", ""):
                        for ep in sl.get("endpoints") or []:
                            out.add(endpoint_chain(spn, proto, f"{ep['addresses'][0]}:{sl_port['port']}"))
    return out


# -- the reference --------------------------------------------------------------------------------

def reference_rules(built_text: str, objects, config) -> str:
    """The node as built with kube-proxy's full sync of `objects` loaded on top (restore input
    appended to save output: parse() applies its chain lines, flushes and -X as restore does)."""
    existing = parse(built_text).chain_names("nat")
    return built_text + render(objects, config, existing_nat_chains=existing)


# -- the packet space --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Probe:
    who: str            # "the client", "pod web-1", "node1 itself"
    src: str
    dst: str
    dport: int
    proto: str
    service: str | None  # the Service whose address/port the probe is aimed at (None: other ports)

    def describe(self) -> str:
        return f"{self.proto} from {self.who} ({self.src}) to {self.dst}:{self.dport}"


def service_addresses(svc: dict) -> list[str]:
    spec = svc.get("spec") or {}
    out = [spec.get("clusterIP")] + list(spec.get("externalIPs") or [])
    out += [i.get("ip") for i in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []]
    return [a for a in out if a and a != "None"]


def probes(state, node: str, services: list[dict], *, other_ports=(80, 8080, 30080)) -> list[Probe]:
    """The packet space of `services` as seen by `node` (see the module's docstring)."""
    pods_here = [p for p in state.pods if p["spec"]["nodeName"] == node]
    pods_there = [p for p in state.pods if p["spec"]["nodeName"] != node]
    client = next((h for h in state.hosts if h["name"] == "client"), state.hosts[0] if state.hosts else None)
    senders = []
    if client:
        senders.append(("the client", client["addresses"][0]))
    if pods_here:
        senders.append((f"pod {pods_here[0]['metadata']['name']}", pods_here[0]["status"]["podIP"]))
    if pods_there:
        senders.append((f"pod {pods_there[0]['metadata']['name']}", pods_there[0]["status"]["podIP"]))
    own = (f"{node} itself", state.node_address(node))
    senders.append(own)
    node_addresses = [state.node_address(n) for n in state.node_names()]
    out: list[Probe] = []
    seen = set()

    def add(who, src, dst, port, name):
        for proto in PROTOCOLS:
            key = (src, dst, port, proto)
            if key not in seen:
                seen.add(key)
                out.append(Probe(who, src, dst, port, proto, name))

    for svc in services:
        name = f"{svc['metadata'].get('namespace', 'default')}/{svc['metadata']['name']}"
        ports = svc["spec"].get("ports") or []
        service_ports = sorted({p["port"] for p in ports})
        extra = sorted({p + 1 for p in service_ports} | set(other_ports))
        node_ports = sorted({p["nodePort"] for p in ports if p.get("nodePort")})
        extra_node_ports = sorted({p + 1 for p in node_ports} | {30000})
        for address in service_addresses(svc):
            for who, src in senders:
                for port in service_ports:
                    add(who, src, address, port, name)
                for port in extra:
                    add(who, src, address, port, None)
        for address in node_addresses:
            mine = address == state.node_address(node)
            for who, src in senders:
                if (who, src) == own and not mine:
                    continue
                for port in node_ports:
                    add(who, src, address, port, name)
                # a node's addresses on the Service's ports: kube-proxy answers there only for
                # externalIPs and load balancers (a node port is the only way in through a node)
                for port in extra_node_ports + service_ports:
                    add(who, src, address, port, None)
        for port in node_ports:
            add(*own, "127.0.0.1", port, name)
        # the hairpin: each endpoint pod on this node to its own Service
        endpoints = {ep["addresses"][0] for sl in state.slices_of(svc["metadata"].get("namespace", "default"),
                                                                   svc["metadata"]["name"])
                     for ep in sl.get("endpoints") or []}
        for pod in pods_here:
            if pod["status"]["podIP"] in endpoints:
                for address in service_addresses(svc)[:1]:
                    for port in service_ports:
                        add(f"endpoint pod {pod['metadata']['name']}", pod["status"]["podIP"], address, port, name)
    return out


# -- outcomes and their comparison ------------------------------------------------------------------

def outcome(tracer: Tracer, probe: Probe) -> dict[tuple, float]:
    """{(DNAT target or None, "dropped"/"rejected"/"passes", masqueraded, recent lists the client
    is added to): probability}."""
    result = tracer.trace(Packet(src=probe.src, dst=probe.dst, dport=probe.dport, proto=probe.proto),
                          kube_proxy_test=False)
    out: dict[tuple, float] = {}
    for b in result.branches:
        verdict = {"DROP": "dropped", "REJECT": "rejected"}.get(b.verdict, "passes")
        key = (b.dnat, verdict, bool(b.masquerade), tuple(sorted(set(b.recent_set))))
        out[key] = out.get(key, 0.0) + b.probability
    return out


def same(a: dict, b: dict) -> bool:
    return all(abs(a.get(k, 0.0) - b.get(k, 0.0)) <= TOLERANCE for k in a.keys() | b.keys())


@dataclass
class Difference:
    node: str
    probe: Probe
    expected: dict
    got: dict

    def what(self) -> str:
        """How the live rules treat the probe differently, in words (the live side only)."""
        def targets(o):
            t: dict = {}
            for (dnat, _v, _m, _r), p in o.items():
                if dnat:
                    t[dnat] = t.get(dnat, 0.0) + p
            return t

        def fates(o, index):
            return {k[index] for k, p in o.items() if p > TOLERANCE}

        te, tg = targets(self.expected), targets(self.got)
        if set(te) != set(tg):
            if not tg:
                return "is not DNATed to any endpoint (kube-proxy's rules send it to one)"
            if not te:
                return (f"is DNATed (to {', '.join(sorted(tg))}) where kube-proxy's rules leave it alone")
            extra = sorted(set(tg) - set(te))
            if extra:
                return f"can be DNATed to {', '.join(extra)}, where kube-proxy's rules never send it"
            return (f"never reaches {len(set(te) - set(tg))} of the endpoints kube-proxy's rules send it to "
                    f"(yours reach {', '.join(sorted(tg))})")
        if not same({(k,): v for k, v in te.items()}, {(k,): v for k, v in tg.items()}):
            shares = ", ".join(f"{t} {p:.12g}" for t, p in sorted(tg.items()))
            return f"picks the endpoints with other chances than kube-proxy's rules (yours: {shares})"
        # a packet dropped or rejected never reaches POSTROUTING: its verdict is the difference, and
        # the masquerade it then misses only follows from it
        ve, vg = fates(self.expected, 1), fates(self.got, 1)
        if ve != vg:
            def words(fates_):
                return " or ".join({"passes": "let through"}.get(v, v) for v in sorted(fates_))
            # on some branches only (one endpoint's path, say): the fate kube-proxy's rules do not give,
            # then what the other branches get
            odd, rest = (vg - ve or vg), vg - (vg - ve or vg)
            shown = words(odd) + (f" on some of its branches ({words(rest)} on the others)" if rest else "")
            return f"is {shown} where kube-proxy's rules {'let it pass' if 'passes' in ve else 'stop it'}"
        me, mg = fates(self.expected, 2), fates(self.got, 2)
        if me != mg:
            if True in mg and True not in me:
                return "is masqueraded (source NAT) where kube-proxy's rules do not masquerade it"
            return "is not masqueraded where kube-proxy's rules masquerade it (KUBE-MARK-MASQ)"
        re_, rg = fates(self.expected, 3), fates(self.got, 3)
        if re_ != rg:
            return ("is remembered for session affinity differently from kube-proxy's rules (the `recent --set` "
                    "of the KUBE-SEP chain that DNATs it)")
        return "is treated differently from kube-proxy's rules (masquerade or verdict on some branches)"

    memory: tuple = ()

    def sentence(self) -> str:
        remembered = (f" (a client the node's recent list {self.memory[0]} remembers)" if self.memory else "")
        return f"on {self.node}, {self.probe.describe()}{remembered} {self.what()}"


def recent_lists(text: str) -> list[str]:
    """The `recent` list names a ruleset's nat rules use (kube-proxy: one per KUBE-SEP chain of a
    Service with ClientIP affinity, named like the chain)."""
    nat = parse(text).table("nat")
    names = set()
    for chain in (nat.chains.values() if nat else []):
        for rule in chain.rules:
            cond = rule.cond("recent")
            if cond is not None and cond.value.get("name"):
                names.add(cond.value["name"])
    return sorted(names)


@functools.lru_cache(maxsize=512)
def _reference_tracer(reference_text: str, local: tuple, memory: tuple) -> tuple[Tracer, dict]:
    """A tracer of the rules and the outcomes it gave, by probe: a check compares the live rules of
    each node with one reference, and the mutant run hundreds of near-misses (each of which its
    generator and the judge compare: the live side is kept too)."""
    return Tracer(parse(reference_text), list(local), affinity=memory), {}


def _reference_outcome(reference_text: str, local: tuple, memory: tuple, probe: Probe) -> dict:
    tracer, known = _reference_tracer(reference_text, local, memory)
    if probe not in known:
        known[probe] = outcome(tracer, probe)
    return dict(known[probe])


def compare(node: str, live_text: str, reference_text: str, local_addresses, space: list[Probe],
            limit: int = 1, affinity: bool = False) -> list[Difference]:
    """The probes the live rules treat differently from the reference (at most `limit`). With
    `affinity`, also for a client that each `recent` list of either ruleset already remembers
    (the xt_recent state session affinity keeps: a remembered client skips the statistic rules)."""
    local = tuple(local_addresses)
    _reference_tracer(live_text, local, ())      # the live rules parse (or raise), whatever the space
    memories = [()]
    if affinity:
        memories += [(name,) for name in sorted(set(recent_lists(live_text)) | set(recent_lists(reference_text)))]
    out = []
    for memory in memories:
        for probe in space:
            expected = _reference_outcome(reference_text, local, memory, probe)
            got = _reference_outcome(live_text, local, memory, probe)
            if not same(expected, got):
                diff = Difference(node, probe, expected, got)
                diff.memory = memory
                out.append(diff)
                if len(out) >= limit:
                    return out
    return out


# -- the rules themselves: every chain and rule of a table, as kube-proxy would have it ---------------

# The tables kube-proxy's iptables mode writes (proxier.go: syncProxyRules writes filter and nat;
# the mangle and nat/filter canaries are KUBE-PROXY-CANARY, compared too).
STRUCTURE_TABLES = ("nat", "filter")
# Chains whose rules kube-proxy writes in Go map order (one rule per Service, each with its own
# comment): their order carries no meaning but for nat KUBE-SERVICES' last rule (canonical.py's
# sortIPTablesRules sorts exactly these), so they are compared as multisets and that rule's place apart.
UNORDERED_CHAINS = {("nat", "KUBE-SERVICES"), ("nat", "KUBE-NODEPORTS"), ("filter", "KUBE-SERVICES"),
                    ("filter", "KUBE-NODEPORTS"), ("filter", "KUBE-EXTERNAL-SERVICES"),
                    ("filter", "KUBE-PROXY-FIREWALL")}


def _mark_value(args: list[str]) -> tuple | None:
    """MARK's target options as (value, mask) the way iptables-save prints them (--set-xmark):
    --or-mark X is X/X, --xor-mark X is X/0, --and-mark X is 0/~X, --set-mark X[/M] is X/(M or ~0)."""
    for i, word in enumerate(args[:-1]):
        value, _, mask = args[i + 1].partition("/")
        v = int(value, 0)
        if word == "--set-xmark":
            return (v, int(mask, 0) if mask else 0xFFFFFFFF)
        if word == "--set-mark":
            return (v, int(mask, 0) if mask else 0xFFFFFFFF)
        if word == "--or-mark":
            return (v, v)
        if word == "--xor-mark":
            return (v, 0)
        if word == "--and-mark":
            return (0, (~v) & 0xFFFFFFFF)
    return None


def _target_key(rule) -> tuple:
    args = list(rule.target_args)
    if rule.target == "MARK":
        return ("MARK", _mark_value(args))
    if rule.target == "REJECT" and "--reject-with" not in args:
        args += ["--reject-with", "icmp-port-unreachable"]       # iptables' default, printed by iptables-save
    return (rule.target, rule.goto, tuple(args))


def _cond_key(cond) -> tuple:
    value = cond.value
    if cond.kind == "statistic":
        value = tuple(sorted((k, v) for k, v in value.items() if k not in ("probability", "p")))
    elif cond.kind == "recent":
        value = tuple(sorted((k, v) for k, v in value.items() if k != "mask" or v != "255.255.255.255"))
    elif cond.kind in ("src", "dst"):
        value = str(value)
    elif cond.kind in ("dport", "sport"):
        value = tuple(value)
    elif cond.kind in ("src-type", "dst-type", "ctstate"):
        value = tuple(sorted(value))
    elif cond.kind == "other":
        value = (value[0], value[1], tuple(value[2]))
    return (cond.kind, cond.negated, repr(value))


def rule_key(rule) -> tuple:
    """A rule as the kernel keeps it, whichever way it was written (kube-proxy's restore input or
    iptables-save's output: option order, /32, MARK's spellings, REJECT's default), but for its
    statistic probability (probability_of) and its comment (a label for people: a rule typed
    without kube-proxy's comment is still kube-proxy's rule)."""
    return (tuple(sorted(_cond_key(c) for c in rule.conds)), _target_key(rule))


def probability_of(rule) -> float | None:
    cond = rule.cond("statistic")
    return None if cond is None else float(cond.value.get("p", 1.0))


def _same_rule(a, b) -> bool:
    if rule_key(a) != rule_key(b):
        return False
    pa, pb = probability_of(a), probability_of(b)
    return pa == pb or (pa is not None and pb is not None and abs(pa - pb) <= TOLERANCE)


def same_rules(a: list, b: list) -> bool:
    """Two chains' rules are the same, in order, as the kernel keeps them (rule_key; probabilities
    within TOLERANCE)."""
    return len(a) == len(b) and all(_same_rule(x, y) for x, y in zip(a, b))


@dataclass
class RuleDifference:
    """One place where a node's live rules are not what kube-proxy would have there."""
    node: str
    table: str
    chain: str
    kind: str           # "extra chain", "missing chain", "extra rule", "missing rule", "order", "comment"
    rule: str | None = None     # the live rule (extra, order) or kube-proxy's (missing)

    def sentence(self, hide_chain: bool = False) -> str:
        """In words; with `hide_chain`, a missing chain is not named (naming it would give away
        what the student is to work out)."""
        where = f"{self.node}'s {self.table} table"
        if self.kind == "extra chain":
            return f"{where} has chain {self.chain}, which kube-proxy does not write there"
        if self.kind == "missing chain":
            return (f"{where} lacks a chain kube-proxy writes there" if hide_chain
                    else f"{where} lacks chain {self.chain}, which kube-proxy writes there")
        if self.kind == "extra rule":
            return f"{where}, chain {self.chain}, has a rule kube-proxy does not write: {self.rule}"
        if self.kind == "missing rule":
            return f"{where}, chain {self.chain}, lacks one of the rules kube-proxy writes there"
        if self.kind == "comment":
            return (f"{where}, chain {self.chain}, has a rule without the comment kube-proxy gives it "
                    f"(or with another): {self.rule}")
        return f"{where}, chain {self.chain}: its rules are not in kube-proxy's order"

    def key(self) -> tuple:
        return (self.table, self.chain, self.kind, self.rule)


def structure_differences(node: str, live_text: str, reference_text: str, *, tables=STRUCTURE_TABLES,
                          ignore=lambda table, chain, rule: False) -> list[RuleDifference]:
    """Every chain and rule of `tables` in which the live rules differ from the reference, as the
    kernel sees them (rule_key; probabilities within TOLERANCE). Rules for which
    `ignore(table, chain, rule)` holds, on either side, are left out (another exercise's part)."""
    live_rules, ref_rules = parse(live_text), parse(reference_text)
    out: list[RuleDifference] = []
    for table in tables:
        lt, rt = live_rules.table(table), ref_rules.table(table)
        lchains = lt.chains if lt else {}
        rchains = rt.chains if rt else {}
        for name in lchains:
            if name not in rchains and not (ignore(table, name, None)):
                out.append(RuleDifference(node, table, name, "extra chain"))
        for name in rchains:
            if name not in lchains and not ignore(table, name, None):
                out.append(RuleDifference(node, table, name, "missing chain"))
        for name in lchains:
            if name not in rchains:
                continue
            got = [r for r in lchains[name].rules if not ignore(table, name, r)]
            want = [r for r in rchains[name].rules if not ignore(table, name, r)]
            unmatched = list(want)
            extra = []
            for rule in got:
                match = next((i for i, w in enumerate(unmatched) if _same_rule(rule, w)), None)
                if match is None:
                    extra.append(rule)
                else:
                    unmatched.pop(match)
            out += [RuleDifference(node, table, name, "extra rule", r.text) for r in extra]
            out += [RuleDifference(node, table, name, "missing rule", r.text) for r in unmatched]
            if extra or unmatched:
                continue
            ordered = (table, name) not in UNORDERED_CHAINS
            if ordered and not all(_same_rule(a, b) for a, b in zip(got, want)):
                out.append(RuleDifference(node, table, name, "order"))
            elif not ordered and got and want and not _same_rule(got[-1], want[-1]) and table == "nat" \
                    and name == "KUBE-SERVICES":
                out.append(RuleDifference(node, table, name, "order"))
    return out


def comment_differences(node: str, live_text: str, reference_text: str, chains: set[str], *,
                        table: str = "nat") -> list[RuleDifference]:
    """The rules of `chains`, and the rules elsewhere in `table` that jump to them, that are one of
    the reference's rules as the kernel keeps them (rule_key) but do not carry its comment.

    kube-proxy labels every rule it writes for a service port with `-m comment --comment`
    (proxier.go, syncProxyRules: appendServiceCommentLocked for the KUBE-SEP rules, the
    "<ns>/<svc>:<port> cluster IP" comment on the KUBE-SERVICES and masquerade rules,
    "<ns>/<svc>:<port> -> <endpoint>" in writeServiceToEndpointRules; left out only in
    large-cluster mode, above 1000 endpoints). rule_key leaves comments out, so that a repair typed
    without one still matches; an exercise that asks for kube-proxy's rules as written judges them
    here. A rule with no counterpart in the reference is structure_differences' to report."""
    live_t, ref_t = parse(live_text).table(table), parse(reference_text).table(table)
    out: list[RuleDifference] = []
    for name, chain in (live_t.chains.items() if live_t else []):
        ref_chain = ref_t.chain(name) if ref_t else None
        if ref_chain is None:
            continue
        unmatched = list(ref_chain.rules)
        for rule in chain.rules:
            if name not in chains and rule.target not in chains:
                continue
            candidates = [i for i, w in enumerate(unmatched) if _same_rule(rule, w)]
            if not candidates:
                continue
            exact = next((i for i in candidates if (unmatched[i].comment or "") == (rule.comment or "")), None)
            unmatched.pop(candidates[0] if exact is None else exact)
            if exact is None:
                out.append(RuleDifference(node, table, name, "comment", rule.text))
    return out
