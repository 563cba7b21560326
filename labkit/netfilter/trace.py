"""Follow a packet through a node's iptables rules the way the kernel would.

The packet is the first of a connection (conntrack state NEW) unless another state is given.
The kernel consults the nat table only for a connection's first packet: the translation chosen
then (DNAT by a KUBE-SEP chain, MASQUERADE in POSTROUTING) is stored in the connection's conntrack
entry and applied to every later packet without walking the nat chains again, so no statistic
match is rolled twice. For a later packet (ESTABLISHED, RELATED) the tracer therefore skips the
nat table and applies the translation of a given conntrack entry (`Conntrack`, read from a live
node's table by the trace command), or none.
Path, for the nat and filter tables (kube-proxy uses no others):
- arriving from outside the node: nat PREROUTING, routing, then filter INPUT (destination is a
  local address) or filter FORWARD + nat POSTROUTING;
- sent by the node itself (source is a local address): nat OUTPUT, filter OUTPUT, nat
  POSTROUTING, and filter INPUT when the destination is local (over loopback).
Matches follow the kernel modules: addresses and CIDRs, protocol, ports, interfaces (when given),
addrtype (LOCAL is the node's addresses, and the whole loopback prefix), mark, conntrack state
(NEW for a first packet, plus DNAT once translated), statistic (the tracer explores both outcomes
and carries the probability of each branch), recent (`--rcheck` matches only for a client already
in the list: pass its list names as `affinity`; otherwise the affinity branch is reported), and
negations. Targets: jumps and gotos, RETURN, ACCEPT, DROP, REJECT, MARK, DNAT, SNAT, MASQUERADE.

`kube_proxy_test_trace` is, separately, kube-proxy's own unit-test tracer (`tracePacket` in
pkg/proxy/iptables/proxier_test.go): nat PREROUTING then the four filter chains walked by hand,
rules with --rcheck / --mark / --ctstate never matching, every --probability branch collected.
Its one-line summary is what kube-proxy's packet-flow tests compare; TraceResult.output carries it.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field

from labkit.netfilter.ruleset import Chain, Rule, Ruleset

PROTOCOLS_WITH_PORTS = ("tcp", "udp", "sctp")


@dataclass
class Packet:
    src: str
    dst: str
    dport: int
    proto: str = "tcp"
    sport: int = 40000
    ctstate: str = "NEW"
    in_interface: str | None = None
    out_interface: str | None = None


@dataclass(frozen=True)
class Conntrack:
    """What a connection's conntrack entry does to its later packets: the destination its first
    packet was DNATed to ("ip:port"), and whether its source was masqueraded."""
    dnat: str | None = None
    masquerade: bool = False


@dataclass
class Step:
    depth: int
    text: str
    kind: str = "rule"            # phase, rule, note, route, policy, branch


@dataclass
class _State:
    src: ipaddress._BaseAddress
    dst: ipaddress._BaseAddress
    dport: int
    sport: int
    proto: str
    mark: int
    ctstate: set
    in_interface: str | None
    out_interface: str | None
    probability: float = 1.0
    dnat: str | None = None
    masquerade: bool = False
    marked: bool = False              # reached KUBE-MARK-MASQ (kube-proxy's "masq" in its tests)
    verdict: str | None = None
    verdict_rule: str | None = None
    steps: list = field(default_factory=list)
    recent_set: list = field(default_factory=list)

    def fork(self, probability: float) -> "_State":
        s = _State(**{k: getattr(self, k) for k in self.__dataclass_fields__})
        s.ctstate = set(self.ctstate)
        s.steps = list(self.steps)
        s.recent_set = list(self.recent_set)
        s.probability = probability
        return s


@dataclass
class Branch:
    probability: float
    dnat: str | None
    verdict: str                     # ACCEPT / DROP / REJECT from a filter rule or policy, or "none"
    masquerade: bool                 # SNATed by MASQUERADE in nat POSTROUTING
    marked_for_masquerade: bool
    steps: list[Step]
    recent_set: tuple = ()          # the `recent` lists a --set rule added the client to on the way

    def to_dict(self) -> dict:
        return {"probability": round(self.probability, 10), "dnat": self.dnat, "verdict": self.verdict,
                "masquerade": self.masquerade, "marked_for_masquerade": self.marked_for_masquerade,
                "steps": [{"depth": s.depth, "kind": s.kind, "text": s.text} for s in self.steps]}


@dataclass
class TraceResult:
    packet: Packet
    branches: list[Branch]
    affinity: list[dict]              # --rcheck rules passed without a match, and where they would lead
    output: str                       # kube-proxy's test-tracer summary
    test_tracer_masq: bool
    notes: list[str]

    @property
    def dnat(self) -> list[dict]:
        return [{"target": b.dnat, "probability": round(b.probability, 10)} for b in self.branches if b.dnat]

    @property
    def masquerade(self) -> bool:
        return any(b.masquerade for b in self.branches)

    @property
    def verdict(self) -> str:
        verdicts = {b.verdict for b in self.branches}
        return verdicts.pop() if len(verdicts) == 1 else "mixed"

    def to_dict(self) -> dict:
        p = self.packet
        return {
            "packet": {"src": p.src, "dst": p.dst, "proto": p.proto, "dport": p.dport, "sport": p.sport,
                       "ctstate": p.ctstate},
            "dnat": self.dnat, "masquerade": self.masquerade, "verdict": self.verdict, "output": self.output,
            "marked_for_masquerade": any(b.marked_for_masquerade for b in self.branches),
            "summary": self.summary(),
            "kube_proxy_test_tracer": {"output": self.output, "masq": self.test_tracer_masq,
                                       "meaning": "tracePacket of kube-proxy's unit tests: every DNAT target "
                                                  "reachable; masq if any branch reached KUBE-MARK-MASQ"},
            "affinity": self.affinity, "notes": self.notes,
            "branches": [b.to_dict() for b in self.branches],
        }

    def summary(self) -> str:
        """One line per outcome, from the branches themselves."""
        if not self.branches:
            return "summary: no path"
        parts = []
        for b in self.branches:
            where = f"DNAT to {b.dnat}" if b.dnat else "no DNAT"
            verdict = {"none": "passes", "ACCEPT": "accepted", "DROP": "dropped", "REJECT": "rejected"}.get(
                b.verdict, b.verdict)
            masq = "masqueraded" if b.masquerade else ("marked for masquerade, not masqueraded"
                                                       if b.marked_for_masquerade else "not masqueraded")
            chance = f"p={b.probability:.6g}: " if len(self.branches) > 1 else ""
            parts.append(f"{chance}{where}, {verdict}, {masq}")
        head = f"summary ({len(self.branches)} branches): " if len(self.branches) > 1 else "summary: "
        return head + "; ".join(parts)

    def tree(self) -> str:
        p = self.packet
        lines = [f"{p.proto} {p.src}:{p.sport} -> {p.dst}:{p.dport} (conntrack {p.ctstate})"]
        previous: list[Step] = []
        for n, b in enumerate(self.branches, 1):
            common = 0
            while common < min(len(previous), len(b.steps)) and previous[common] is b.steps[common]:
                common += 1
            if len(self.branches) > 1:
                lines.append(f"--- branch {n} of {len(self.branches)} (probability {b.probability:.4f})"
                             + (", same path as the branch above up to here" if common else ""))
            for step in b.steps[common:]:
                lines.append("  " * step.depth + (f"[{step.text}]" if step.kind == "phase" else step.text))
            outcome = f"=> DNAT to {b.dnat}" if b.dnat else "=> no DNAT"
            outcome += f", verdict {b.verdict}, " + ("masqueraded" if b.masquerade else "not masqueraded")
            lines.append(outcome)
            previous = b.steps
        for a in self.affinity:
            lines.append(f"affinity: a client already in recent list {a['list']} (within {a['seconds']} s) "
                         f"goes to {', '.join(a['dnat']) or 'no DNAT'}")
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append(self.summary())
        return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=4096)
def _ip(text: str) -> ipaddress._BaseAddress:
    """The address (immutable), parsed once: a trace asks about the same few addresses at every rule."""
    return ipaddress.ip_address(text)


class LocalAddresses:
    """The node's local addresses (addrtype LOCAL, and the routing decision)."""

    def __init__(self, entries):
        self.ips: set = set()
        self.nets: list = []
        for entry in entries:
            iface = ipaddress.ip_interface(entry.strip())
            self.ips.add(iface.ip)
            if iface.ip.is_loopback:
                self.nets.append(iface.network)     # the kernel routes the whole loopback prefix locally

    def __contains__(self, ip) -> bool:
        return ip in self.ips or any(ip.version == n.version and ip in n for n in self.nets)


class Tracer:
    def __init__(self, ruleset: Ruleset, local_addresses, affinity=(), conntrack: Conntrack | None = None):
        self.rules = ruleset
        self.local = LocalAddresses(local_addresses)
        self.affinity = set(affinity)
        self.conntrack = conntrack
        self.notes: list[str] = []
        self.affinity_report: list[dict] = []

    # -- public -------------------------------------------------------------------------------
    def trace(self, packet: Packet, kube_proxy_test: bool = True) -> TraceResult:
        """The packet's path; with `kube_proxy_test`, also what kube-proxy's own test tracer says of
        a first packet (TraceResult.output and .masq; a judge that compares branches only leaves
        it out: it is a second trace)."""
        start = _State(src=_ip(packet.src), dst=_ip(packet.dst), dport=packet.dport, sport=packet.sport,
                       proto=packet.proto.lower(), mark=0, ctstate={s.strip().upper() for s in packet.ctstate.split(",")},
                       in_interface=packet.in_interface, out_interface=packet.out_interface)
        local_origin = start.src in self.local
        self.first_packet = "NEW" in start.ctstate
        finished = self._path(start, local_origin)
        branches = [Branch(s.probability, s.dnat, s.verdict or "none", s.masquerade, s.marked, s.steps,
                           tuple(s.recent_set)) for s in finished]
        output, masq = "", False
        if self.first_packet and kube_proxy_test:      # kube-proxy's test tracer models first packets only
            output, masq = kube_proxy_test_trace(self.rules, packet.src, packet.proto.lower(), packet.dst,
                                                 str(packet.dport), [str(ip) for ip in self.local.ips])
        return TraceResult(packet, branches, self.affinity_report, output, masq, self.notes)

    # -- the kernel's path through the hooks ----------------------------------------------------
    def _path(self, st: _State, local_origin: bool) -> list[_State]:
        finished: list[_State] = []
        if local_origin:
            st.steps.append(Step(0, f"{st.src} is a local address: the node itself sends the packet", "route"))
            states = self._phase("filter", "OUTPUT", self._phase("nat", "OUTPUT", [st]))
            for s in self._phase("nat", "POSTROUTING", states):
                if s.verdict is None and s.dst in self.local:
                    s.steps.append(Step(0, f"{s.dst} is a local address: delivered over loopback", "route"))
                    finished += self._phase("filter", "INPUT", [s])
                else:
                    finished.append(s)
            return finished
        for s in self._phase("nat", "PREROUTING", [st]):
            if s.dst in self.local:
                s.steps.append(Step(0, f"routing: {s.dst} is a local address: delivered to the node", "route"))
                finished += self._phase("nat", "INPUT", self._phase("filter", "INPUT", [s]))
            else:
                s.steps.append(Step(0, f"routing: {s.dst} is not a local address: forwarded", "route"))
                finished += self._phase("nat", "POSTROUTING", self._phase("filter", "FORWARD", [s]))
        return finished

    def _phase(self, table: str, chain: str, states: list[_State]) -> list[_State]:
        out = []
        for s in states:
            if s.verdict in ("DROP", "REJECT"):
                out.append(s)
            elif table == "nat" and not self.first_packet:
                out.append(self._conntrack_nat(chain, s))
            else:
                out += self._run_builtin(table, chain, s)
        return out

    def _conntrack_nat(self, chain: str, st: _State) -> _State:
        """A later packet of a connection: no nat rule runs; conntrack applies the first packet's
        translation (DNAT before routing, source NAT after)."""
        st.steps.append(Step(0, f"nat {chain}", "phase"))
        ct = self.conntrack
        if chain in ("PREROUTING", "OUTPUT"):
            st.steps.append(Step(1, "not consulted: not the first packet of its connection; conntrack applies the "
                                    "translation its first packet got", "note"))
            if ct is None:
                self._note("no conntrack entry given for this connection: no translation applied (trace the first "
                           "packet with --ctstate NEW to see where it goes)")
            elif ct.dnat:
                ip, port = _split_host_port(ct.dnat, st.dport)
                st.dst, st.dport, st.dnat = _ip(ip), port, ct.dnat
                st.steps.append(Step(1, f"-> DNAT to {ct.dnat} (from the conntrack entry)", "note"))
        elif chain == "POSTROUTING":
            st.steps.append(Step(1, "not consulted: conntrack applies the connection's source NAT, if any", "note"))
            if ct is not None and ct.masquerade:
                st.masquerade = True
                st.steps.append(Step(1, "-> source NAT (from the conntrack entry)", "note"))
        else:
            st.steps.append(Step(1, "not consulted: not the first packet of its connection", "note"))
        return st

    def _run_builtin(self, table: str, chain_name: str, st: _State) -> list[_State]:
        chain = self.rules.chain(table, chain_name)
        st.steps.append(Step(0, f"{table} {chain_name}", "phase"))
        if chain is None:
            st.steps.append(Step(1, "(no such chain in the ruleset: accepted)", "policy"))
            return [st]
        out = []
        for s, verdict in self._walk(table, chain, st, 1):
            if verdict in (None, "RETURN"):
                policy = chain.policy or "ACCEPT"
                s.steps.append(Step(1, f"end of {chain_name}: policy {policy}", "policy"))
                if table == "filter":
                    s.verdict, s.verdict_rule = policy, f"policy of {chain_name}"
            elif verdict in ("DROP", "REJECT") or (verdict == "ACCEPT" and table == "filter"):
                s.verdict = verdict
            out.append(s)
        return out

    # -- chain walking ----------------------------------------------------------------------------
    def _walk(self, table: str, chain: Chain, st: _State, depth: int) -> list[tuple[_State, str | None]]:
        dst = int(st.dst)
        return self._walk_from(table, chain, chain.candidates(dst), 0, st, depth)

    def _walk_from(self, table, chain, positions, k, st, depth):
        out = []
        while k < len(positions):
            rule = chain.rule(positions[k])
            k += 1
            p = self._match(table, rule, st, depth)
            if p is None:
                continue
            if p < 1.0:
                taken = st.fork(st.probability * p)
                taken.steps.append(Step(depth, f"{rule.text}   [taken with probability {p:.10g}]", "rule"))
                for s2, verdict in self._target(table, rule, taken, depth):
                    if verdict is None:
                        out += self._walk_from(table, chain, positions, k, s2, depth)
                    else:
                        out.append((s2, None if verdict == "RETURN" else verdict))
                st = st.fork(st.probability * (1.0 - p))
                if st.probability <= 0.0:
                    return out
                continue
            st.steps.append(Step(depth, rule.text, "rule"))
            for s2, verdict in self._target(table, rule, st, depth):
                if verdict is None:
                    out += self._walk_from(table, chain, positions, k, s2, depth)
                else:
                    out.append((s2, None if verdict == "RETURN" else verdict))
            return out
        out.append((st, None))
        return out

    def _target(self, table: str, rule: Rule, st: _State, depth: int) -> list[tuple[_State, str | None]]:
        target = rule.target
        if target is None:
            return [(st, None)]
        if target in ("ACCEPT", "DROP", "REJECT", "RETURN"):
            return [(st, target)]
        if target == "MARK":
            _apply_mark(rule, st)
            return [(st, None)]
        if target == "DNAT":
            dest = rule.target_option("--to-destination") or ""
            ip, port = _split_host_port(dest, st.dport)
            st.dst, st.dport = _ip(ip), port
            st.dnat = dest if ":" in dest and not dest.endswith("]") else f"{dest}:{port}"
            st.ctstate.add("DNAT")
            st.steps.append(Step(depth + 1, f"-> DNAT to {st.dnat}", "note"))
            return [(st, "ACCEPT")]
        if target in ("MASQUERADE", "SNAT"):
            st.masquerade = True
            st.ctstate.add("SNAT")
            st.steps.append(Step(depth + 1, "-> source NAT (masquerade)", "note"))
            return [(st, "ACCEPT")]
        chain = self.rules.chain(table, target)
        if chain is None:
            if target not in ("LOG", "NFLOG", "TRACE", "CT", "NOTRACK", "CONNMARK"):
                self._note(f"target {target} is not modelled; treated as continuing")
            return [(st, None)]
        if target == "KUBE-MARK-MASQ":
            st.marked = True
        # The kernel refuses a ruleset whose jumps loop (mark_source_chains in
        # net/ipv4/netfilter/ip_tables.c: iptables-restore fails with ELOOP), so none is live.
        stack = getattr(self, "_stack", [])
        if (table, target) in stack:
            from labkit.errors import LabkitError
            raise LabkitError(f"the jumps from {rule.chain} to {target} loop: the kernel refuses such rules (ELOOP)")
        self._stack = stack + [(table, target)]
        results = []
        try:
            for s2, verdict in self._walk(table, chain, st, depth + 1):
                if verdict is None and rule.goto:
                    results.append((s2, "RETURN"))
                else:
                    results.append((s2, verdict))
        finally:
            self._stack = stack
        return results

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # -- matching -------------------------------------------------------------------------------
    def _match(self, table: str, rule: Rule, st: _State, depth: int) -> float | None:
        """None when the rule does not match; else the probability that it matches."""
        probability = 1.0
        for c in rule.conds:
            kind = c.kind
            if kind == "src":
                ok = st.src.version == c.value.version and st.src in c.value
            elif kind == "dst":
                ok = st.dst.version == c.value.version and st.dst in c.value
            elif kind == "proto":
                ok = c.value in ("all", "0") or c.value == st.proto
            elif kind in ("dport", "sport"):
                port = st.dport if kind == "dport" else st.sport
                ok = st.proto in PROTOCOLS_WITH_PORTS and any(lo <= port <= hi for lo, hi in c.value)
            elif kind in ("src-type", "dst-type"):
                ok = bool(self._addr_types(st.src if kind == "src-type" else st.dst) & c.value)
            elif kind == "mark":
                value, mask = c.value
                ok = (st.mark & mask) == value
            elif kind == "ctstate":
                ok = bool(st.ctstate & c.value)
            elif kind in ("in", "out"):
                iface = st.in_interface if kind == "in" else st.out_interface
                if iface is None:
                    self._note(f"rules matching {'-i' if kind == 'in' else '-o'} need the packet's interface; without it they do not match")
                    ok = False
                else:
                    ok = iface.startswith(c.value[:-1]) if c.value.endswith("+") else iface == c.value
            elif kind == "statistic":
                p = c.value["p"]
                probability *= (1.0 - p) if c.negated else p
                continue
            elif kind == "recent":
                ok = self._recent(table, rule, c, st, depth)
            elif kind == "nfacct":
                ok = True
            else:
                self._note(f"match {c.text!r} is not modelled; assumed to match")
                ok = True
            if ok == c.negated:
                return None
        return probability if probability > 0.0 else None

    def _addr_types(self, ip) -> set:
        if ip in self.local:
            return {"LOCAL"}
        if ip.is_multicast:
            return {"MULTICAST"}
        if ip.version == 4 and str(ip) == "255.255.255.255":
            return {"BROADCAST"}
        return {"UNICAST"}

    def _recent(self, table: str, rule: Rule, c, st: _State, depth: int) -> bool:
        info = c.value
        action, name = info["action"], info["name"]
        if action == "set":
            st.recent_set.append(name)
            return True
        if action == "remove":
            return name in self.affinity
        if name in self.affinity:
            return True
        # A first packet: the client is in no list. Report where the affinity branch leads.
        if not any(a["list"] == name for a in self.affinity_report):
            probe = st.fork(st.probability)
            targets = [s.dnat for s, _ in self._target(table, rule, probe, depth) if s.dnat]
            self.affinity_report.append({"list": name, "seconds": info.get("seconds"), "rule": rule.text,
                                         "dnat": targets})
        st.steps.append(Step(depth, f"{rule.text}   [no match: client not in recent list {name}]", "note"))
        return False


def _apply_mark(rule: Rule, st: _State) -> None:
    def num(text):
        v, _, m = text.partition("/")
        return int(v, 0), (int(m, 0) if m else 0xFFFFFFFF)
    args = rule.target_args
    for i, word in enumerate(args[:-1]):
        value = args[i + 1]
        if word == "--set-xmark":
            v, m = num(value)
            st.mark = (st.mark & ~m & 0xFFFFFFFF) ^ v
        elif word == "--set-mark":
            v, m = num(value)
            st.mark = (st.mark & ~m & 0xFFFFFFFF) | v
        elif word == "--or-mark":
            st.mark |= int(value, 0)
        elif word == "--xor-mark":
            st.mark ^= int(value, 0)
        elif word == "--and-mark":
            st.mark &= int(value, 0)


def _split_host_port(dest: str, default_port: int) -> tuple[str, int]:
    if dest.startswith("["):
        host, _, rest = dest[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if dest.count(":") == 1:
        host, port = dest.split(":")
        return host, int(port)
    return dest, default_port


# -- kube-proxy's unit-test tracer ---------------------------------------------------------------

def kube_proxy_test_trace(ruleset: Ruleset, src: str, proto: str, dst: str, dport: str,
                          node_ips) -> tuple[str, bool]:
    """tracePacket of pkg/proxy/iptables/proxier_test.go: (output, masq).

    nat PREROUTING first; then, with the destination replaced by the first DNAT target's IP,
    filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS and KUBE-PROXY-FIREWALL. A rule
    matches when its -s/-d (IP or CIDR), --src-type/--dst-type LOCAL (127.0.0.1, ::1 and the
    node IPs), -p and --dport (compared as strings) all hold; rules with --rcheck, --mark or
    --ctstate never match. KUBE-MARK-MASQ sets masq; ACCEPT/REJECT/DROP and DNAT are recorded and
    end the chain, unless the jump that led there had a --probability.
    """
    local = {"127.0.0.1", "::1", *node_ips}
    outputs: list[str] = []
    state = {"masq": False}
    src_ip = _ip(src)

    def address_ok(cond, ip) -> bool:
        inside = ip.version == cond.value.version and ip in cond.value
        return inside != cond.negated

    def matches(rule: Rule, dest: str, dest_ip) -> bool:
        for c in rule.conds:
            if c.kind == "src" and not address_ok(c, src_ip):
                return False
            if c.kind == "dst" and not address_ok(c, dest_ip):
                return False
            if c.kind in ("src-type", "dst-type"):
                ip = src if c.kind == "src-type" else dest
                addrtype = "LOCAL" if ip in local else "not-matched"
                if (addrtype in c.value) == c.negated or len(c.value) != 1:
                    return False
            if c.kind == "proto" and (c.value == proto) == c.negated:
                return False
            if c.kind == "dport" and not c.text.startswith("--dports"):
                if (c.text.split()[-1] == dport) == c.negated:
                    return False
            if c.kind == "mark" or (c.kind == "ctstate" and "--ctstate" in c.text):
                return False
            if c.kind == "recent" and c.value["action"] == "rcheck":
                return False
        return True

    def run(table: str, chain_name: str, dest: str) -> bool:
        chain = ruleset.chain(table, chain_name)
        if chain is None:
            return False
        dest_ip = _ip(dest)
        # Rules that require another single destination cannot match: skipping them (the chain's
        # index) changes nothing but the time a 10,000-service KUBE-SERVICES takes.
        for position in chain.candidates(int(dest_ip)):
            rule = chain.rule(position)
            if rule.target is None or not matches(rule, dest, dest_ip):
                continue
            if rule.target == "KUBE-MARK-MASQ":
                state["masq"] = True
                continue
            if rule.target in ("ACCEPT", "REJECT", "DROP"):
                outputs.append(rule.target)
                return True
            if rule.target == "DNAT":
                outputs.append(rule.target_option("--to-destination") or "")
                return True
            terminated = run(table, rule.target, dest)
            stat = rule.cond("statistic")
            if terminated and (stat is None or "probability" not in stat.value):
                return True
        return False

    run("nat", "PREROUTING", dst)
    dest = dst
    if outputs:
        dest = _split_host_port(outputs[0], 0)[0]
    for chain in ("KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL"):
        run("filter", chain, dest)
    return ", ".join(outputs), state["masq"]
