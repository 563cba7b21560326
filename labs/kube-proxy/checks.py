"""Checks of the kube-proxy lab.

Every exercise that changes the cluster is judged over its whole `solved:` statement (lab.yaml):
`check_X(ctx) = judge_X(ctx, observe_X(ctx))`, where observe_X reads the live lab (the cluster
state, each node's iptables-save, real requests) and judge_X is a pure verdict on that. The judge
compares each node's live rules with what kube-proxy would write (labkit.kubeproxy.judge: the node
as built with labkit's reconstruction of kube-proxy's sync on top) over a generated packet space,
both followed with labkit's packet tracer, and checks the Service fields the exercise may change
against the lab as built. Real requests are judged last: a correct setup fails them with
probability below 1e-6 (the computation is next to each sample size).

The prediction exercise (traffic-policy) and the find-out exercises with an answer file
(follow-the-chain, hairpin) are graded against labkit's reconstruction of the lab as built or the
live rules the exercise points at. Their feedback says where to look and never the value expected;
it names follow-the-chain's chain when it is wrong (a name found only by looking), but neither which
nor how many of the few-valued cells are wrong (a probability, a true/false, which of a handful of
addresses a pod sees: README, "Predictions"). traffic-policy's prediction is not judged when it was
written after the student's own request to one of its NodePorts (the nodes' connection logs:
observe_traffic_policy).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from fractions import Fraction

from labkit import predictions
from labkit.exercises import LIVE, AnswerMalformed, CheckFailed
from labkit.kubeproxy import judge, live, situations
from labkit.kubeproxy.chains import endpoint_chain, service_chain, service_port_name
from labkit.kubeproxy.cluster_state import load_scenario
from labkit.netfilter import Packet, Tracer, parse, save

# How far a probability may be from the rule's: iptables-save prints the kernel's rounding
# (0.33333333349 for the 0.3333333333 kube-proxy wrote), which is well inside it.
TOLERANCE = judge.TOLERANCE
NODEPORTS_JUMP_COMMENT = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"
PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name"
_MISSING = object()


# -- shared helpers --------------------------------------------------------------------------------


def nat_table(ctx, node: str):
    return parse(save(ctx.env.netns_name(node), "nat")).table("nat")


def service_of(state, name: str) -> dict:
    svc = state.service(name)
    if svc is None:
        raise CheckFailed(f"Service {name} no longer exists: `labkit reset kube-proxy` restores the lab")
    return svc


def endpoints_of(state, name: str) -> list[dict]:
    """The Service's endpoints as the EndpointSlices list them: [{pod, ip, port, node}]."""
    out = []
    for sl in state.slices_of("default", name):
        port = (sl.get("ports") or [{}])[0].get("port")
        for ep in sl.get("endpoints") or []:
            out.append({"pod": (ep.get("targetRef") or {}).get("name"), "ip": ep["addresses"][0], "port": port,
                        "node": ep.get("nodeName")})
    return sorted(out, key=lambda e: f"{e['ip']}:{e['port']}")


def _endpoint_entries(state, name: str) -> dict[tuple, str]:
    """{(address, port, node, ready): EndpointSlice name} of the Service's EndpointSlices."""
    out = {}
    for sl in state.slices_of("default", name):
        port = (sl.get("ports") or [{}])[0].get("port")
        for ep in sl.get("endpoints") or []:
            ready = (ep.get("conditions") or {}).get("ready") is not False
            for address in ep.get("addresses") or []:
                out.setdefault((address, port, ep.get("nodeName"), ready), sl["metadata"]["name"])
    return out


def require_endpoints_as_built(ctx, state, service: str) -> None:
    """The Service's endpoints are the ones the EndpointSlice controller writes for its pods, as in
    the lab as built: an EndpointSlice of one's own labelled with the Service's name adds endpoints
    to it (kube-proxy reads every slice with kubernetes.io/service-name, pkg/proxy/endpointslicecache.go),
    which is no change of the Service the exercise asks for."""
    built, now = _endpoint_entries(as_built(ctx), service), _endpoint_entries(state, service)
    added = sorted(set(now) - set(built))
    gone = sorted(set(built) - set(now))
    if not added and not gone:
        return
    words = []
    if added:
        address, port, node, ready = added[0]
        slice_name = now[added[0]]
        words.append(f"EndpointSlice {slice_name} lists {address}:{port}" + ("" if ready else " (not ready)") +
                     f" on {node or 'no node'}" + (f", and {len(added) - 1} more" if len(added) > 1 else ""))
    if gone:
        words.append(f"{len(gone)} of its endpoints as the lab built it {'is' if len(gone) == 1 else 'are'} missing")
    mine = sorted({now[k] for k in added} - {n for n in built.values()})
    remove = (f"; `labkit kube-proxy delete endpointslice/{mine[0]}` removes a slice of your own" if mine else "")
    raise CheckFailed(f"Service {service}'s endpoints are not the ones the EndpointSlice controller writes for its "
                      f"pods ({'; '.join(words)}): the exercise changes only the Service{remove}")


def counts(mapping) -> str:
    """{name: n} as "a ×3, b ×1" (most first)."""
    items = sorted(mapping.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return ", ".join(f"{k} ×{n}" for k, n in items) or "nothing"


def describe(tally) -> str:
    parts = [f"{pod} ×{n}" for pod, n in sorted(tally.answered.items())]
    parts += [f"{err} ×{n}" for err, n in tally.failures.most_common()]
    return ", ".join(parts) or "nothing"


def number(value: float) -> str:
    """A probability with every digit that matters (no rounding that hides a difference)."""
    return f"{value:.12g}"


def require_all_answered(tally, what: str, expected_pods: set[str]) -> None:
    """Every request answered, only by `expected_pods`, and each of them at least once."""
    if tally.failures:
        raise CheckFailed(f"{what}: {sum(tally.failures.values())} of {tally.sent} requests failed",
                          expected=f"all {tally.sent} answered", observed=describe(tally))
    strangers = set(tally.answered) - expected_pods
    if strangers:
        raise CheckFailed(f"{what}: answered by {', '.join(sorted(strangers))}, which are not its pods",
                          expected=", ".join(sorted(expected_pods)), observed=describe(tally))
    missing = expected_pods - set(tally.answered)
    if missing:
        raise CheckFailed(f"{what}: {', '.join(sorted(missing))} never answered in {tally.sent} requests",
                          expected=f"every one of {', '.join(sorted(expected_pods))}", observed=describe(tally))


def probability_of_rule(rule) -> float:
    """The --probability of a rule's statistic match, 1.0 without one."""
    cond = rule.cond("statistic")
    if cond is None or "probability" not in cond.value:
        return 1.0
    return float(cond.value["probability"])


def diff_paths(a, b, path: str) -> list[str]:
    """The paths (`spec.ports[0].nodePort`) where two nested values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(a.keys() | b.keys(), key=str):
            out += diff_paths(a.get(key, _MISSING), b.get(key, _MISSING), f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in diff_paths(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def service_diff(expected: dict, now: dict) -> list[str]:
    """Where a Service differs from the expected one: its spec, labels and annotations."""
    out = diff_paths(expected.get("spec") or {}, now.get("spec") or {}, "spec")
    for key in ("labels", "annotations"):
        out += diff_paths((expected.get("metadata") or {}).get(key) or {}, (now.get("metadata") or {}).get(key) or {},
                          f"metadata.{key}")
    return out


def as_built(ctx):
    """The cluster state as the lab builds it (labkit's reconstruction of the scenario)."""
    return load_scenario(ctx.lab.environment_module().SCENARIO)


def expected_service(ctx, name: str, change) -> dict:
    """The Service as the lab built it with `change(doc)` applied, as the API server stores it
    (defaults and allocations: labkit.kubeproxy.cluster_state)."""
    state = as_built(ctx)
    doc = state.service(name)
    change(doc)
    state.apply([doc], "the exercise")
    return state.service(name)


_REFERENCES: dict = {}


def reference(ctx, state, node: str, objects=None) -> str:
    """What the node's rules would be had kube-proxy synced `objects` (default: the current
    Services and EndpointSlices) onto the node as built."""
    objects = state.objects() if objects is None else objects
    built = judge.built_rules(ctx.env, node)
    key = hashlib.sha256((built + json.dumps(objects, sort_keys=True)).encode()).hexdigest()
    if key not in _REFERENCES:
        if len(_REFERENCES) > 64:
            _REFERENCES.clear()
        _REFERENCES[key] = judge.reference_rules(built, objects, live.proxier_config(state, node))
    return _REFERENCES[key]


def require_like_kube_proxy(ctx, observation, services: list[str], *, nodes=None, objects=None, skip=None,
                            affinity: bool = False, why: str = "") -> None:
    """Each node's live rules treat every probe of `services`' packet space as kube-proxy's rules
    for `objects` would (judge.compare); the first difference fails, named."""
    state = observation["state"]
    chosen = [state.service(n) for n in services if state.service(n) is not None]
    for node in nodes or state.node_names():
        space = judge.probes(state, node, chosen)
        if skip:
            space = [p for p in space if not skip(node, p)]
        found = judge.compare(node, observation["rules"][node], reference(ctx, state, node, objects),
                              live.proxier_config(state, node).local_addresses, space, affinity=affinity)
        if found:
            raise CheckFailed(difference_words(ctx, state, node, found) + why)


def difference_words(ctx, state, node: str, found: list) -> str:
    """The first difference in words. A packet aimed at a node's NodePort of shop-cluster or
    shop-local (or at a copy of their situation: situations.shows_outcome) is not described while
    the traffic-policy prediction is not kept: what kube-proxy's rules do with it is the outcome that
    exercise asks to predict, and labkit's tools withhold it until then. Another difference is named
    instead, or where to look."""
    if ctx.exercise.id == situations.EXERCISE or predictions.kept(ctx.lab.id, situations.EXERCISE) is not None:
        return found[0].sentence()
    told = [d for d in found if not situations.shows_outcome(ctx.env, state, d.probe.src, d.probe.dst, d.probe.dport)]
    if told:
        return told[0].sentence()
    return (f"on {node}, packets to a NodePort are not treated as kube-proxy's rules treat them (labkit does not say "
            f"how before your {situations.EXERCISE} prediction is kept: that is what that exercise asks you to predict); "
            f"compare {node}'s nat and filter tables with the rules kube-proxy writes for {node}, rule by rule")


def service_chain_names(state, service: str) -> set[str]:
    """The per-service chains kube-proxy could write for `service` on any node."""
    return judge.kube_proxy_chain_names(state) - judge.kube_proxy_chain_names(state, exclude={service})


def debug_ruleset_differences(ctx, state, node: str, text: str) -> list:
    """Where `text` (a node's iptables-save) differs from kube-proxy's rules for the node in its
    nat and filter tables, every chain and rule, but for clusterip-by-hand's work (legacy's rules:
    lab.hand_built_part), which is that exercise's to judge."""
    lab = ctx.lab.environment_module()
    ref_text = reference(ctx, state, node)
    return judge.structure_differences(node, text, ref_text, ignore=lab.hand_built_part(state, text, ref_text))


def debug_ruleset_comment_differences(ctx, state, node: str, text: str) -> list:
    """debug-ruleset's Service's chains on a node (and the rules that jump to them) whose rules are
    kube-proxy's but for their comment (judge.comment_differences): the repair is kube-proxy's rules
    as written, and the damaged rules carried their comments."""
    return judge.comment_differences(node, text, reference(ctx, state, node),
                                     service_chain_names(state, ctx.params["service"]))


def untouched_table_differences(ctx, node: str, text: str) -> list:
    """Where `text` differs from the node's mangle and raw tables as the lab built them (kubelet's
    KUBE-IPTABLES-HINT, the canaries; raw empty): kube-proxy writes nothing else there, and no
    exercise needs them (lab.untouched_differences)."""
    return ctx.lab.environment_module().untouched_differences(ctx.env, node, text)


def require_untouched_tables(ctx, observation, nodes=None, why: str = "") -> None:
    """Each node's mangle and raw tables as the lab built them: a rule typed there (a DROP in raw
    PREROUTING, say) is written by hand and decides the fate of packets before kube-proxy's nat
    chains ever see them, whatever those chains say."""
    state = observation["state"]
    for node in nodes or state.node_names():
        found = untouched_table_differences(ctx, node, observation["rules"][node])
        if found:
            raise CheckFailed(found[0].sentence(hide_chain=True) + f"; {node}'s mangle and raw tables stay as the lab "
                              "built them (kubelet's and kube-proxy's canaries, nothing more)" + why)


def clusterip_differences(ctx, state, node: str, text: str, objects) -> list:
    """Where `text` differs from kube-proxy's rules for the node with legacy programmed, every chain
    and rule of nat and filter, but for what debug-ruleset judges on its node (catalog's damage, and
    anything not aimed at legacy that differs there already without legacy)."""
    lab = ctx.lab.environment_module()
    found = judge.structure_differences(node, text, reference(ctx, state, node, objects))
    if node == lab.BROKEN_NODE:
        theirs = {d.key() for d in debug_ruleset_differences(ctx, state, node, text)}
        found = [d for d in found if d.key() not in theirs]
    return found


def clusterip_comment_differences(ctx, state, node: str, text: str, objects) -> list:
    """clusterip-by-hand's rules on a node (legacy's KUBE-SVC and KUBE-SEP chains, and the rules
    that jump to them) that are kube-proxy's but for their comment (judge.comment_differences)."""
    service = ctx.lab.environment_module().HAND_BUILT_SERVICE
    return judge.comment_differences(node, text, reference(ctx, state, node, objects),
                                     service_chain_names(state, service))


def service_rule_differences(ctx, state, node: str, text: str, service: str) -> list:
    """Where `text` differs from kube-proxy's rules for the node (every chain and rule of nat and
    filter) in what concerns `service`: its own chains, and any rule elsewhere that jumps to them,
    is aimed at its cluster IP or one of its node ports, or carries its comment."""
    from labkit.netfilter.ruleset import parse_rule
    svc = state.service(service)
    names = service_chain_names(state, service)
    ip = svc["spec"].get("clusterIP")
    node_ports = {p["nodePort"] for p in svc["spec"].get("ports") or [] if p.get("nodePort")}

    def concerns(d) -> bool:
        if d.chain in names:
            return True
        rule = parse_rule(d.rule) if d.rule else None
        if rule is None:
            return False
        dst, dport = rule.cond("dst"), rule.cond("dport")
        return (rule.target in names
                or (dst is not None and not dst.negated and str(dst.value.network_address) == ip)
                or (dport is not None and not dport.negated
                    and any(lo <= n <= hi for lo, hi in dport.value for n in node_ports))
                or (rule.comment or "").startswith(f"default/{service}:"))
    return [d for d in judge.structure_differences(node, text, reference(ctx, state, node)) if concerns(d)]


def hand_written_differences(ctx, state, node: str, text: str) -> list:
    """Where a node's nat and filter tables differ from kube-proxy's rules for the live Services,
    every chain and rule, but for what other exercises own: clusterip-by-hand's rules for legacy
    (lab.hand_built_part) and, on debug-ruleset's node, what concerns its Service (the damage the
    lab made there, or the student's repair in progress)."""
    lab = ctx.lab.environment_module()
    ref_text = reference(ctx, state, node)
    found = judge.structure_differences(node, text, ref_text, ignore=lab.hand_built_part(state, text, ref_text))
    if node == lab.BROKEN_NODE:
        theirs = {d.key() for d in service_rule_differences(ctx, state, node, text, lab.BROKEN_SERVICE)}
        found = [d for d in found if d.key() not in theirs]
    return found


def require_rules_from_the_service(ctx, observation, service: str) -> None:
    """The exercise's "nothing is written by hand": on every node, what concerns `service` in the
    nat and filter tables is exactly what kube-proxy writes for it, and no other rule was written
    by hand either (a DNAT to one of its pods on another port of the node concerns none of its
    addresses, yet opens more than the exercise asks)."""
    state = observation["state"]
    for node in state.node_names():
        found = service_rule_differences(ctx, state, node, observation["rules"][node], service)
        if found:
            raise CheckFailed(structure_feedback(found, set(), f"{service}'s rules") + f". kube-proxy writes "
                              f"{service}'s rules from the Service: change the Service, not the rules")
    for node in state.node_names():
        found = hand_written_differences(ctx, state, node, observation["rules"][node])
        if found:
            raise CheckFailed(structure_feedback(found, set(), "the rules") + ". Nothing in the nat and filter tables "
                              "is written by hand in this exercise: kube-proxy writes every rule from the Services")
    require_untouched_tables(ctx, observation, why=": nothing is written by hand in this exercise")


def structure_feedback(found: list, secret: set[str], what: str) -> str:
    """The first difference in words: an added chain or rule outside `secret` (the chains the
    exercise is about) is named with the student's own rule; differences inside them are counted
    and located by chain, never shown as kube-proxy's rule."""
    outside = [d for d in found if d.chain not in secret]
    more = len(found) - 1
    tail = f" ({more} more difference{'s' if more != 1 else ''} from kube-proxy's rules)" if more else ""
    if outside:
        return outside[0].sentence(hide_chain=outside[0].chain in secret) + tail
    chains = sorted({d.chain for d in found})
    # `what` names rules or chains (plural); a changed rule is one missing and one added
    return (f"{found[0].node}'s {found[0].table} table: {what} still differ from kube-proxy's rules: "
            f"{len(found)} rule{'s' if len(found) != 1 else ''} or chain{'s' if len(found) != 1 else ''} missing "
            f"or added, in {len(chains)} chain{'s' if len(chains) != 1 else ''}")


class Deferred:
    """A part of an observation that costs real requests: sent when the judge first needs it (a
    wrong setup is judged on its rules and costs no traffic), then kept."""

    def __init__(self, send):
        self._send, self._value, self._done = send, None, False

    def __call__(self):
        if not self._done:
            self._value, self._done = self._send(), True
        return self._value


def traffic(observation) -> dict:
    value = observation.get("traffic")
    return value() if callable(value) else (value or {})


def observe_nodes(ctx) -> dict:
    """The cluster state, each node's live rules (iptables-save, every table)."""
    state = live.load(ctx.env)
    return {"state": state, "rules": {n: save(ctx.env.netns_name(n)) for n in state.node_names()}}


def trace_live(observation, node: str, source: str, ip: str, port: int, proto: str = "tcp", affinity=()):
    state = observation["state"]
    return Tracer(parse(observation["rules"][node]), live.proxier_config(state, node).local_addresses,
                  affinity=affinity).trace(Packet(src=source, dst=ip, dport=port, proto=proto), kube_proxy_test=False)


def dnat_distribution(result) -> dict[str, float]:
    """The chance of each DNAT target in a trace."""
    out: dict[str, float] = {}
    for d in result.dnat:
        out[d["target"]] = out.get(d["target"], 0.0) + d["probability"]
    return out


def require_uniform(distribution: dict[str, float], endpoints: list[str], what: str) -> None:
    share = 1 / len(endpoints)
    wrong = [t for t, p in distribution.items() if t not in endpoints or abs(p - share) > TOLERANCE]
    missing = [e for e in endpoints if e not in distribution]
    if wrong or missing:
        shares = ", ".join(f"{t} {number(p)}" for t, p in sorted(distribution.items())) or "no DNAT at all"
        raise CheckFailed(f"{what}: the rules do not give every endpoint the same chance",
                          expected=f"each of {', '.join(endpoints)}: 1/{len(endpoints)} = {number(share)} "
                                   f"(± {TOLERANCE:g})",
                          observed=shares + (f"; never chosen: {', '.join(missing)}" if missing else ""))


def answer_without_duplicates(ctx):
    """The answer file, parsed; a key given twice in one mapping is refused (YAML would silently keep
    the last one: labkit.strict's positions name where each stands)."""
    answer = ctx.answer()
    from labkit.strict import key_positions
    duplicates = [d for doc in key_positions(ctx.answer_path.read_text()) for d in doc.duplicates]
    if duplicates:
        line, path = duplicates[0]
        raise AnswerMalformed(f"{ctx.answer_path}: line {line + 1}: {path} is given twice; write each field once")
    return answer


# -- follow-the-chain ------------------------------------------------------------------------------


def cluster_ip_chain(nat, comment: str) -> str | None:
    """The chain KUBE-SERVICES sends a service port's cluster-IP traffic to (found by its comment)."""
    for rule in nat.chain("KUBE-SERVICES").rules if nat.chain("KUBE-SERVICES") else []:
        if rule.comment == comment:
            return rule.target
    return None


def check_follow_the_chain(ctx):
    service, node = ctx.params["service"], ctx.params["node"]
    answer = answer_without_duplicates(ctx)
    given_chain = str(ctx.answer_field(answer, "chain", str)).strip()
    given = ctx.answer_field(answer, "probabilities", list)
    # Graded against kube-proxy's rules for the lab as built (the node's rules as `labkit run` wrote
    # them: labkit's reconstruction of syncProxyRules), not against the live rules, which the
    # exercise leaves unchanged: an edit of the live chain does not change the right answer.
    nat = parse(judge.built_rules(ctx.env, node)).table("nat")
    chain_name = cluster_ip_chain(nat, f"default/{service}:http cluster IP")
    if chain_name is None:
        return ctx.error(f"the lab as built has no cluster-IP rule for {service} on {node}: `labkit reset kube-proxy` "
                         "rebuilds it")
    note = ""
    live_nat = nat_table(ctx, node)
    live_chain = live_nat.chain(chain_name) if live_nat else None
    if live_chain is None or not judge.same_rules(live_chain.rules, nat.chain(chain_name).rules):
        note = (f" Note: {node}'s live {chain_name} is not what kube-proxy wrote (it was changed since the lab was "
                f"built); the answer is graded against kube-proxy's rules, and `labkit reset kube-proxy "
                f"{ctx.exercise.id}` puts them back")
    if given_chain != chain_name and given_chain != given_chain.upper():
        return ctx.failed(f"{given_chain} is not a chain name as iptables writes it: chain names are case-sensitive, "
                          "and kube-proxy's are upper-case; copy the name as `iptables-save -t nat` prints it" + note)
    if given_chain != chain_name:
        other = next((r.comment for r in (nat.chain("KUBE-SERVICES").rules if nat.chain("KUBE-SERVICES") else [])
                      if r.target == given_chain and r.comment), None)
        whose = f" (it is the chain of \"{other}\")" if other else ""
        return ctx.failed(f"{given_chain} is not the chain {node} sends {service}'s cluster-IP traffic to{whose}: "
                          "follow the KUBE-SERVICES rule for its cluster IP" + note)
    built_probabilities = [probability_of_rule(r) for r in nat.chain(chain_name).rules
                           if r.target and r.target.startswith("KUBE-SEP-") and not r.cond("recent")]
    return grade_probabilities(ctx, node, chain_name, given, built_probabilities, note)


def grade_probabilities(ctx, node: str, chain_name: str, given: list, built_probabilities: list[float],
                        note: str = ""):
    """The verdict on the answer's probabilities, the chain being right: `given` as written,
    `built_probabilities` the --probability of each jump of kube-proxy's chain (the last: 1)."""
    if any(isinstance(p, bool) for p in given):
        raise AnswerMalformed(f"{ctx.answer_path}: probabilities must be numbers, not true/false")
    try:    # 0.3333, or a fraction as the chain's design is told: 1/3
        numbers = [float(Fraction(p.replace(" ", "")) if isinstance(p, str) else p) for p in given]
    except (TypeError, ValueError, ZeroDivisionError):
        raise AnswerMalformed(f"{ctx.answer_path}: probabilities must be numbers (0.3333 or 1/3), got "
                              f"{', '.join(map(str, given))}")
    wrong = ([f"jump {i + 1}" for i, (a, b) in enumerate(zip(numbers, built_probabilities)) if abs(a - b) > TOLERANCE]
             + (["the number of jumps"] if len(numbers) != len(built_probabilities) else []))
    if wrong:
        # neither which jump nor how many: kube-proxy writes 1/(n-i) for the i-th of n endpoints
        # (pkg/proxy/iptables/proxier.go, writeServiceToEndpointRules), few values, and the number of
        # jumps is the number of endpoints (CheckContext.grid_feedback)
        return ctx.failed(ctx.grid_feedback(
            wrong, len(numbers), "probabilities", noun="answer",
            advice=f"write one number per jump of {chain_name} to a KUBE-SEP- chain, in the chain's order: the "
                   f"--probability of that rule as `iptables-save -t nat` on {node} prints it, within a tolerance of "
                   f"±{TOLERANCE:g} (so copy every digit: rounded values such as 0.33 are outside it; the last jump "
                   "has none: write 1)") + "." + note, observed=", ".join(map(str, given)))
    return ctx.passed(f"{chain_name} picks among {len(numbers)} endpoints with probabilities "
                      f"{', '.join(number(n) for n in numbers)}: each endpoint gets 1/{len(numbers)} overall." + note)


# -- nodeport --------------------------------------------------------------------------------------


def observe_nodeport(ctx) -> dict:
    observation = observe_nodes(ctx)
    state = observation["state"]
    # Every request must be answered and every one of the 4 pods must answer through each node.
    # A correct setup (each node picks uniformly among 4 pods) misses a given pod in n requests
    # with probability (3/4)^n; for 2 nodes x 4 pods: 8 * (3/4)^56 = 8.1e-7 < 1e-6, so n = 56.
    # Judged only once the rules are right (judge_nodeport), so a wrong setup costs no requests.
    observation["traffic"] = Deferred(lambda: {
        node: live.send(ctx.env, "client", state.node_address(node), ctx.params["node_port"], 56, timeout=1.0,
                        parallel=8) for node in state.node_names()})
    return observation


def local_policy_words(ctx, service: str) -> str:
    """What is wrong with `service` set to externalTrafficPolicy Local. What Local does with a
    request from outside the cluster (kube-proxy sends it only to endpoints on the node it reached:
    pkg/proxy/iptables/proxier.go, syncProxyRules, the KUBE-EXT chain's jump to KUBE-SVL) is what
    the traffic-policy exercise asks to predict, so it is said only once that prediction is kept,
    as labkit's tools show it only then (README: Predictions)."""
    lead = f"Service {service} has externalTrafficPolicy Local, not Cluster as the lab built it"
    if predictions.kept(ctx.lab.id, situations.EXERCISE) is not None:
        return (f"{lead}: a node forwards external clients only to its own pods, and the exercise asks for every "
                "pod through each node")
    return (f"{lead}: the exercise changes only its type and the nodePort of its port, and asks for every pod "
            f"through each node. What Local does with a request from outside the cluster is what exercise "
            f"{situations.EXERCISE} asks you to predict, so labkit does not say it before that prediction is kept; "
            f"compare the Service with `labkit kube-proxy get services {service} -o yaml`")


def judge_nodeport(ctx, observation):
    service, node_port = ctx.params["service"], ctx.params["node_port"]
    state = observation["state"]
    svc = service_of(state, service)
    kind = svc["spec"].get("type", "ClusterIP")
    if kind != "NodePort":
        more = (" (a LoadBalancer opens more than asked: keep to least privilege)" if kind == "LoadBalancer" else
                ": only NodePort (or LoadBalancer) Services get a port on every node")
        return ctx.failed(f"Service {service} is of type {kind}, not NodePort{more}")
    ports = [p.get("nodePort") for p in svc["spec"]["ports"]]
    if node_port not in ports:
        return ctx.failed(f"Service {service} has nodePort {', '.join(map(str, ports))}, not {node_port}: without a "
                          "nodePort in the Service, the API server picks a free one from 30000-32767")
    if svc["spec"].get("externalTrafficPolicy") == "Local":
        return ctx.failed(local_policy_words(ctx, service))

    def change(doc):
        doc["spec"]["type"] = "NodePort"
        for p in doc["spec"]["ports"]:
            if p.get("name") == "http" or len(doc["spec"]["ports"]) == 1:
                p["nodePort"] = node_port
    changed = service_diff(expected_service(ctx, service, change), svc)
    if changed:
        return ctx.failed(f"Service {service}: {', '.join(changed)} changed; the exercise changes only its type and "
                          "the nodePort of its port (everything else stays as the lab built it)")
    require_endpoints_as_built(ctx, state, service)
    # no other door to web's pods from outside: a second Service with a node port (or a load
    # balancer, an external IP) selecting them opens more than the exercise asks, as a LoadBalancer would
    lab, built = ctx.lab.environment_module(), as_built(ctx)
    before = lab.outside_openings(built, service, lab.service_addresses(built, service))
    extra = {k: how for k, how in lab.outside_openings(state, service, lab.service_addresses(state, service)).items()
             if before.get(k) != how}
    if extra:
        (namespace, name), how = sorted(extra.items())[0]
        name = name if namespace == "default" else f"{namespace}/{name}"
        return ctx.failed(f"Service {name} also opens {service}'s pods to clients outside the cluster ({how}): the "
                          f"exercise opens {service} on port {node_port} only, nothing more (least privilege); "
                          f"`labkit kube-proxy delete svc/{name}` removes it")
    require_like_kube_proxy(ctx, observation, [service],
                            why=f" (each node's rules for {service} must be kube-proxy's for the Service you applied: "
                                "change the Service, not the rules)")
    require_rules_from_the_service(ctx, observation, service)
    pods = {e["pod"] for e in endpoints_of(state, service)}
    targets = [f"{e['ip']}:{e['port']}" for e in endpoints_of(state, service)]
    client = next(h for h in state.hosts if h["name"] == "client")["addresses"][0]
    for node in state.node_names():
        address = state.node_address(node)
        require_uniform(dnat_distribution(trace_live(observation, node, client, address, node_port)), targets,
                        f"client -> {node} ({address}:{node_port})")
    sent = traffic(observation)
    for node in state.node_names():
        require_all_answered(sent[node], f"client -> {node} ({state.node_address(node)}:{node_port})", pods)
    return ctx.passed(f"the client reaches all {len(pods)} {service} pods through port {node_port} of every node, "
                      "and both nodes' rules for it are kube-proxy's, every chain and rule")


def check_nodeport(ctx):
    return judge_nodeport(ctx, observe_nodeport(ctx))


# -- session-affinity -------------------------------------------------------------------------------

DEFAULT_AFFINITY_SECONDS = 10800     # pkg/apis/core/v1/defaults.go: DefaultClientIPServiceAffinitySeconds


def observe_session_affinity(ctx) -> dict:
    observation = observe_nodes(ctx)
    state = observation["state"]
    client = next(h for h in state.hosts if h["name"] == "client")
    nodes = state.node_names()
    # Affinity is per node (each node's `recent` lists remember the clients it saw), so each client
    # talks through one node. Sticky: with ClientIP affinity every request of a client after its
    # first goes to the same pod (deterministic). Without it, one client's 4 requests land on one of
    # 3 pods with probability 3 * (1/3)^4 = 1/27, so 16 clients all look sticky by chance with
    # probability 27^-16 (~1e-23). Spread: each client's first request picks uniformly among the 3
    # pods, independently, so a correct setup sends all 16 clients to one pod with probability
    # 3 * (1/3)^16 = 7.0e-8 < 1e-6.
    observation["traffic"] = Deferred(lambda: [
        (source, nodes[i % len(nodes)], live.send(ctx.env, "client", state.node_address(nodes[i % len(nodes)]),
                                                  ctx.params["node_port"], 4, source=source, timeout=1.0))
        for i, source in enumerate(client["addresses"][1:17])])
    return observation


def judge_session_affinity(ctx, observation):
    service = ctx.params["service"]
    state = observation["state"]
    svc = service_of(state, service)
    affinity = svc["spec"].get("sessionAffinity", "None")
    if affinity != "ClientIP":
        return ctx.failed(f"Service {service} has sessionAffinity {affinity}: kube-proxy keeps a client with its pod "
                          "only for ClientIP affinity in the Service (nodes' rules written by hand are rewritten "
                          "at kube-proxy's next sync)")
    seconds = ((svc["spec"].get("sessionAffinityConfig") or {}).get("clientIP") or {}).get("timeoutSeconds")
    if not isinstance(seconds, int) or seconds < DEFAULT_AFFINITY_SECONDS:
        return ctx.failed(f"Service {service}'s sessionAffinityConfig.clientIP.timeoutSeconds is {seconds}: a client "
                          "is forgotten sooner than with Kubernetes' default, and the clients want to stay")

    def change(doc):
        doc["spec"]["sessionAffinity"] = "ClientIP"
        doc["spec"]["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": seconds}}
    changed = service_diff(expected_service(ctx, service, change), svc)
    if changed:
        return ctx.failed(f"Service {service}: {', '.join(changed)} changed; the exercise changes only its session "
                          "affinity (everything else stays as the lab built it)")
    require_endpoints_as_built(ctx, state, service)
    require_like_kube_proxy(ctx, observation, [service], affinity=True,
                            why=f" (each node's rules for {service} must be kube-proxy's for the Service you applied: "
                                "change the Service, not the rules)")
    require_rules_from_the_service(ctx, observation, service)
    pods = {e["pod"] for e in endpoints_of(state, service)}
    chosen = {}
    for source, node, tally in traffic(observation):
        if tally.failures or set(tally.answered) - pods:
            return ctx.failed(f"requests from {source} through {node} did not all reach {service} pods",
                              expected=f"4 answers from {', '.join(sorted(pods))}", observed=describe(tally))
        if len(tally.answered) > 1:
            return ctx.failed(f"client {source} is not sticky: its 4 requests through {node} reached {describe(tally)}",
                              expected="every request of one client through one node to the same pod")
        chosen[source] = next(iter(tally.answered))
    spread = {pod: sum(1 for p in chosen.values() if p == pod) for pod in set(chosen.values())}
    if len(spread) < 2:
        return ctx.failed(f"all {len(chosen)} clients went to {next(iter(chosen.values()))}",
                          expected="different clients spread over the pods", observed=f"clients per pod: {counts(spread)}")
    return ctx.passed(f"each of {len(chosen)} clients stays with one pod through its node; together they use "
                      f"{counts(spread)} (clients per pod)")


def check_session_affinity(ctx):
    return judge_session_affinity(ctx, observe_session_affinity(ctx))


# -- traffic-policy --------------------------------------------------------------------------------


def built_outcomes(ctx, services: list[str], client_address: str) -> dict:
    """What the client gets from each node's NodePort of each Service in the lab as built
    (labkit's reconstruction: the nodes' rules as `labkit run` wrote them, followed with the packet
    tracer): {service: {node: {answers, client_ip_preserved}}}. A node answers when the packet is
    DNATed to an endpoint and nothing drops it; the pod sees the client's address unless the node
    masquerades it."""
    state = as_built(ctx)
    out = {}
    for service in services:
        node_port = state.service(service)["spec"]["ports"][0]["nodePort"]
        out[service] = {}
        for node in state.node_names():
            rules = parse(judge.built_rules(ctx.env, node))
            result = Tracer(rules, live.proxier_config(state, node).local_addresses).trace(
                Packet(src=client_address, dst=state.node_address(node), dport=node_port))
            answered = [b for b in result.branches if b.dnat and b.verdict not in ("DROP", "REJECT")]
            entry = {"answers": bool(answered)}
            if answered:
                entry["client_ip_preserved"] = not any(b.masquerade for b in answered)
            out[service][node] = entry
    return out


def situation_changes(ctx, services: list[str], ignore=()) -> str:
    """A sentence naming what the student changed of the situation an exercise describes, or ""
    (fields in `ignore`, which the exercise's outcome does not depend on, are not named)."""
    state = live.load(ctx.env)
    built = as_built(ctx)
    changed = []
    for name in services:
        now, then = state.service(name), built.service(name)
        paths = ["deleted"] if now is None else [
            p for p in service_diff(then, now) if not any(p == i or p.endswith("." + i) for i in ignore)]
        if paths:
            changed.append(f"{name} ({', '.join(paths)})")
    if not changed:
        return ""
    return (f" Note: you changed Service {'; '.join(changed)} since the lab was built; the exercise is graded "
            f"against the lab as built (`labkit reset kube-proxy {ctx.exercise.id}` puts it back)")


def _written_at(path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def observe_traffic_policy(ctx) -> dict:
    """The prediction to judge (the answer file, or the copy labkit kept when its curl or trace first
    showed the outcome), what labkit's reconstruction of the lab as built gives, and the student's
    own first request to one of the graded NodePorts (the nodes' connection logs: lab.first_try,
    since the exercise was built, or one kept before a reset: labkit.predictions.kept_trial), with
    when the answer file was last written."""
    services = [ctx.params["cluster_service"], ctx.params["local_service"]]
    lab = ctx.lab.environment_module()
    tried = lab.earliest_try(ctx.env)
    first = predictions.kept(ctx.lab.id, ctx.exercise.id)
    obs = {"services": services, "tried": tried, "written_at": _written_at(ctx.answer_path),
           "kept_at": first.at if first is not None else None, "kept_by": first.tool if first is not None else None,
           "kept_written_at": first.written if first is not None else None,
           "truth": built_outcomes(ctx, services, ctx.params["client_address"]),
           "situation": situation_changes(ctx, services), "graded_note": "", "where": str(ctx.answer_path)}
    if first is not None:
        import yaml
        try:
            obs["answer"] = yaml.safe_load(first.text)
        except yaml.YAMLError:
            obs["answer"] = None
        obs["where"] = (f"your prediction as {ctx.answer_path} held it when labkit first showed the outcome (kept in "
                        f"{predictions.kept_path(ctx.lab.id, ctx.exercise.id)}; changes after that do not count)")
        if ctx.answer_path.exists() and ctx.answer_path.read_text() != first.text:
            obs["graded_note"] = (" (graded: your prediction as it stood when labkit first showed you the outcome; "
                                  "changes after observing do not count)")
    elif obs["tried"] is not None and obs["written_at"] is not None and obs["written_at"] >= obs["tried"]["at"]:
        obs["answer"] = None        # written after the try: not judged, and it need not even parse
    else:
        obs["answer"] = answer_without_duplicates(ctx)
    return obs


def revealed_by_hand(obs) -> dict | None:
    """The student's own request that showed the outcome before the graded prediction was recorded,
    or None. A prediction labkit kept (its curl or trace showed the outcome) before that request
    is judged, and so is one it kept later from an answer file written before the request; with
    none kept, an answer file not changed since before the request is judged. Anything else was
    written, or changed, after a request to the NodePorts the exercise asks about had shown what
    happens."""
    tried = obs["tried"]
    if tried is None:
        return None
    if obs["kept_at"] is not None:
        if obs["kept_at"] <= tried["at"]:
            return None
        written = obs.get("kept_written_at")
        if written is not None:         # the kept copy is what is graded: when was it written?
            return None if written < tried["at"] else tried
    if obs["written_at"] is not None and obs["written_at"] < tried["at"]:
        return None
    return tried


def judge_traffic_policy(ctx, obs):
    services, truth = obs["services"], obs["truth"]
    tried = revealed_by_hand(obs)
    if tried is not None:
        reset = (" (a reset since then does not undo what that request showed)" if tried.get("before_reset") else "")
        return ctx.failed(
            f"you sent a request from {tried.get('who') or 'a lab host'} ({tried['src']}) to {tried['node']}'s NodePort "
            f"{tried['dport']} ({tried['service']}) "
            f"yourself, at {tried['time']}, before your prediction was recorded{reset}: what the node did with it is "
            "what this exercise asks you to predict, so a prediction written or changed after it earns no points. "
            f"`labkit reset kube-proxy {ctx.exercise.id} --forget-prediction` starts the exercise afresh (the grade "
            "report records that); then work the prediction out from the nodes' rules (`iptables-save` on a node, "
            "`labkit kube-proxy graph`) and write it before sending anything to these NodePorts",
            expected="a prediction recorded before any request to the NodePorts of "
                     f"{' and '.join(services)}", observed=f"answer file written after: {tried['what']}",
            observed_in=LIVE)
    answer, where = obs["answer"], obs["where"]
    if answer is None:
        raise CheckFailed(f"{where}: it is not YAML with one mapping per Service")
    for service in services:
        ctx.answer_field(answer, service, dict)
    # a cell missing or not true|false, a node misspelled: malformed, not a wrong prediction (the
    # same test labkit's curl and trace apply before they keep a prediction)
    from labkit.kubeproxy.situations import prediction_problem
    problem = prediction_problem(answer, services, list(truth[services[0]]))
    if problem:
        raise AnswerMalformed(f"{where}: {problem}")
    wrong, total = [], 0
    for service in services:
        predicted = answer[service]
        for node, expected in truth[service].items():
            guess = predicted[node]
            # the cells of the student's own prediction, never of the truth: "how many of its 7
            # cells" would tell that one request of the right prediction goes unanswered
            total += 2 if guess["answers"] else 1
            if guess["answers"] != expected["answers"]:
                wrong.append(f"{service} / {node} / answers")
            elif expected["answers"] and guess["client_ip_preserved"] != expected["client_ip_preserved"]:
                wrong.append(f"{service} / {node} / client_ip_preserved")
    note = obs["graded_note"] + obs["situation"]
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, total, "cells") + ". Observe with `labkit kube-proxy curl --from "
                          "client --to NODE-IP:NODE-PORT` and explain each case from the node's KUBE-EXT-…, "
                          "KUBE-SVL-… and KUBE-MARK-MASQ rules." + note)
    return ctx.passed(f"your {total} predictions match what the client gets in the lab as built." + note)


def check_traffic_policy(ctx):
    return judge_traffic_policy(ctx, observe_traffic_policy(ctx))


# -- hairpin ---------------------------------------------------------------------------------------


def hairpin_truth(ctx, pod_name: str, service: str) -> dict:
    """From labkit's reconstruction of the lab as built: the pod's requests to its Service traced
    through its node's rules as `labkit run` wrote them. The branch that picks the pod itself is
    masqueraded (KUBE-POSTROUTING SNATs it to the address of the interface it leaves by: the node's
    pod bridge, whose address is the pods' gateway); the others are not, so the other pods see the
    pod's own address. The rule that marks it is the one of the pod's KUBE-SEP chain for the
    Service that the hairpin branch passed."""
    state = as_built(ctx)
    pod = state.pod(pod_name)
    node = pod["spec"]["nodeName"]
    layout = state.network_layout()
    svc = state.service(service)
    port = svc["spec"]["ports"][0]["port"]
    rules = parse(judge.built_rules(ctx.env, node))
    result = Tracer(rules, live.proxier_config(state, node).local_addresses).trace(
        Packet(src=pod["status"]["podIP"], dst=svc["spec"]["clusterIP"], dport=port))
    nodes_of = {p["status"]["podIP"]: p["spec"]["nodeName"] for p in state.pods}

    def seen(branch) -> str:
        if not branch.masquerade:
            return pod["status"]["podIP"]
        target_node = nodes_of.get(branch.dnat.split(":")[0])
        return layout.node(node).pod_gateway if target_node == node else state.node_address(node)

    own = [b for b in result.branches if b.dnat and b.dnat.split(":")[0] == pod["status"]["podIP"]]
    others = [b for b in result.branches if b.dnat and b.dnat.split(":")[0] != pod["status"]["podIP"]]
    chain = None
    for step in (own[0].steps if own else []):
        words = step.text.split()
        if len(words) > 1 and words[0] == "-A" and words[1].startswith("KUBE-SEP-") and "KUBE-MARK-MASQ" in words:
            chain = words[1]
    return {"seen_by_itself": seen(own[0]) if own else None,
            "seen_by_others": seen(others[0]) if others else None, "chain": chain, "node": node}


def hairpin_rules_note(ctx, pod_name: str, node: str) -> str:
    """A note when the node's live rules on the pod's way to itself through a Service (the KUBE-SEP
    chains that DNAT to it, with their hairpin mark, KUBE-MARK-MASQ, KUBE-POSTROUTING and nat
    POSTROUTING) are not kube-proxy's for the live Services: what the pod saw then is not what the lab
    as built shows, which the answer is graded against. It names no chain: one of them is an answer."""
    state = live.load(ctx.env)
    pod = state.pod(pod_name)
    if pod is None:
        return ""
    target = f"{pod['status']['podIP']}:"
    want, have = parse(reference(ctx, state, node)).table("nat"), nat_table(ctx, node)

    def on_path(table) -> set[str]:
        names = {"KUBE-MARK-MASQ", "KUBE-POSTROUTING", "POSTROUTING"}
        for name, chain in (table.chains.items() if table else []):
            if name.startswith("KUBE-SEP-") and any(target in (r.target_option("--to-destination") or "")
                                                    for r in chain.rules):
                names.add(name)
        return names
    for name in sorted(on_path(want) | on_path(have)):
        a, b = (want.chain(name) if want else None), (have.chain(name) if have else None)
        if a is None or b is None or not judge.same_rules(a.rules, b.rules):
            return (f" Note: {node}'s live rules on {pod_name}'s way to itself (its KUBE-SEP chains, KUBE-MARK-MASQ, "
                    f"KUBE-POSTROUTING) are not what kube-proxy writes (they were changed by hand), so what "
                    f"{pod_name} sees now is not what the lab as built shows; the answer is graded against kube-proxy's "
                    f"rules, and `labkit reset kube-proxy follow-the-chain` puts {node}'s back")
    return ""


def check_hairpin(ctx):
    pod_name, service = ctx.params["pod"], ctx.params["service"]
    answer = answer_without_duplicates(ctx)
    given = {k: str(ctx.answer_field(answer, k, str)).strip() for k in ("seen_by_itself", "seen_by_others", "chain")}
    for field in ("seen_by_itself", "seen_by_others"):
        try:
            ipaddress.ip_address(given[field])
        except ValueError:
            raise AnswerMalformed(f"{field}: expected an IP address, the client address a pod sees (no prefix "
                                  f"length, no port), got {given[field]!r}") from None
    truth = hairpin_truth(ctx, pod_name, service)
    wrong = [k for k in given if given[k] != truth[k]]
    # the type, node ports and external policy (the nodeport exercise's) do not change a pod's
    # requests to the cluster IP
    note = situation_changes(ctx, [service], ignore=("spec.type", "nodePort", "spec.externalTrafficPolicy"))
    note += hairpin_rules_note(ctx, pod_name, truth["node"])
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, len(given), "fields", noun="answer",
                                            advice="each field can be read off the live lab") +
                          f". Observe with `labkit kube-proxy curl "
                          f"--from {pod_name} --to {service} -n 40` (the address each pod saw), then follow {service}'s chains "
                          f"in {truth['node']}'s nat table from KUBE-SERVICES to the one that DNATs to {pod_name}, and "
                          "ask which of their rules decides that KUBE-POSTROUTING masquerades a packet." + note)
    return ctx.passed(f"{pod_name} sees {truth['seen_by_itself']} (its node's address on the pod bridge) when it "
                      f"answers itself: {truth['chain']} marks the packet (KUBE-MARK-MASQ), KUBE-POSTROUTING "
                      f"masquerades it, and the bridge port's hairpin mode sends it back out the port it came in; "
                      f"the others see {truth['seen_by_others']}." + note)


# -- debug-ruleset ---------------------------------------------------------------------------------


def traffic_sources(state, node: str, pod_name: str | None = None) -> list[tuple[str, str]]:
    """(lab host, its address) to test a node's rules from: the node itself and one of its pods
    (`pod_name`, or the first), i.e. nat OUTPUT and nat PREROUTING."""
    pod = state.pod(pod_name) if pod_name else next(p for p in state.pods if p["spec"]["nodeName"] == node)
    return [(node, state.node_address(node)), (pod["metadata"]["name"], pod["status"]["podIP"])]


def observe_debug_ruleset(ctx) -> dict:
    observation = observe_nodes(ctx)
    lab = ctx.lab.environment_module()
    observation["syncs"] = judge.syncs_since(ctx.env, lab.BROKEN_MARK)
    state = observation["state"]
    service = ctx.params["service"]
    # Symptoms, judged after the rules: with every endpoint at 1/4, a source misses a given pod in
    # n requests with probability (3/4)^n; 2 sources x 4 pods: 8 * (3/4)^56 = 8.1e-7.
    svc = state.service(service)

    def send():
        ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
        return {host: live.send(ctx.env, host, ip, port, 56, timeout=1.0, parallel=8)
                for host, _ in traffic_sources(state, ctx.params["node"], ctx.params["pod"])}
    observation["traffic"] = Deferred(send)
    return observation


def judge_debug_ruleset(ctx, observation):
    service, node = ctx.params["service"], ctx.params["node"]
    state = observation["state"]
    lab = ctx.lab.environment_module()
    svc = service_of(state, service)
    rewrote = [s for s in observation["syncs"] if s["node"] == node
               and (s["services"] is None or f"default/{service}" in s["services"])]
    if rewrote:
        how = ("a full sync (its canary chain KUBE-PROXY-CANARY had gone)" if rewrote[0]["services"] is None
               else f"a sync after {service} changed")
        return ctx.failed(f"kube-proxy rewrote {service}'s chains on {node} in {how}: the repair was kube-proxy's, "
                          f"and what was wrong in them was never found. `labkit reset kube-proxy debug-ruleset` "
                          f"breaks them again; repair them by hand in {node}'s rules")
    rules = observation["rules"][node]
    missing = [t for t in ("mangle", "nat", "filter")
               if (parse(rules).table(t) is None or parse(rules).chain(t, "KUBE-PROXY-CANARY") is None)]
    if missing:
        return ctx.failed(f"{node} has no KUBE-PROXY-CANARY chain in {', '.join(missing)}: kube-proxy's canary must "
                          "stay (without it, kube-proxy's next sync is a full one that rewrites every chain)")
    changed = lab.service_changes(state, service)
    if changed:
        return ctx.failed(f"Service {service}: {', '.join(changed)} changed; repair {node}'s rules, not the Service")
    others = {lab.HAND_BUILT_SERVICE}
    names = judge.kube_proxy_chain_names(state, others)
    ref_nat = parse(reference(ctx, state, node)).table("nat")
    strangers = sorted(c for c in (parse(rules).table("nat").chains if parse(rules).table("nat") else {})
                       if c in names and ref_nat.chain(c) is None)
    if strangers:
        return ctx.failed(f"{node} has chain {strangers[0]}, which kube-proxy does not write on {node} (a chain of "
                          "another node, or of an endpoint that is gone): a node's rules are its own")
    for_services = [s["metadata"]["name"] for s in state.services if s["metadata"]["name"] not in others]
    require_like_kube_proxy(ctx, observation, for_services, nodes=[node],
                            why=f" (compare {node}'s chains with node1's and with what kube-proxy writes)")
    # the rules themselves, every chain and rule of the node's nat and filter tables: the damage
    # repaired where it is, nothing added in front of or beside kube-proxy's chains
    found = debug_ruleset_differences(ctx, state, node, rules)
    if found:
        mine = service_chain_names(state, service)
        return ctx.failed(structure_feedback(found, mine, f"{service}'s chains") + ". The exercise is to repair "
                          f"kube-proxy's own chains for {service} in place, so that {node}'s rules are the ones "
                          "kube-proxy writes: compare them with node1's, rule by rule")
    # each rule as kube-proxy writes it, its comment included: a repair typed without the
    # `-m comment --comment` the damaged rule carried sends packets where kube-proxy's would, but is
    # not kube-proxy's rule (proxier.go, syncProxyRules, writes one on every rule of a service port)
    unlabelled = debug_ruleset_comment_differences(ctx, state, node, rules)
    if unlabelled:
        return ctx.failed(f"on {node}, {len(unlabelled)} of the rules of {service}'s chains lack the comment "
                          f"kube-proxy gives them, or carry another (first: chain {unlabelled[0].chain}: "
                          f"{unlabelled[0].rule}): kube-proxy labels every rule it writes for a Service port with "
                          f"`-m comment --comment …`; repair each rule in place as kube-proxy writes it, comment "
                          f"included (compare with the same rule on node1)")
    beside = untouched_table_differences(ctx, node, rules)
    if beside:
        return ctx.failed(beside[0].sentence(hide_chain=True) + f"; the repair is in kube-proxy's nat chains, and "
                          f"{node}'s mangle and raw tables stay as the lab built them (kubelet's and kube-proxy's "
                          "canaries, nothing more)")
    # the other nodes, where everything was fine, stay kube-proxy's: a repair typed into the wrong
    # node's shell breaks that node (clusterip-by-hand's rules for legacy aside)
    for other in state.node_names():
        if other == node:
            continue
        found = hand_written_differences(ctx, state, other, observation["rules"][other])
        if found:
            return ctx.failed(structure_feedback(found, service_chain_names(state, service), f"{service}'s chains")
                              + f". On {other} everything was fine: its "
                              f"rules stay kube-proxy's (a repair typed into {other}'s shell instead of {node}'s? "
                              f"`labkit reset kube-proxy debug-ruleset` has kube-proxy write {service}'s chains on every node afresh)")
        require_untouched_tables(ctx, observation, nodes=[other], why=f" (on {other} everything was fine)")
    svc_ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    endpoints = endpoints_of(state, service)
    targets = [f"{e['ip']}:{e['port']}" for e in endpoints]
    for host, address in traffic_sources(state, node, ctx.params["pod"]):
        require_uniform(dnat_distribution(trace_live(observation, node, address, svc_ip, port)), targets,
                        f"from {host}")
    pods = {e["pod"] for e in endpoints}
    sent = traffic(observation)
    for host, _ in traffic_sources(state, node, ctx.params["pod"]):
        require_all_answered(sent[host], f"{host} -> {service}", pods)
    return ctx.passed(f"from {node} and its pods every request to {service} is answered, each of its {len(pods)} "
                      f"pods gets 1/{len(pods)} of them, every chain and rule of {node}'s nat and filter tables acts "
                      f"as kube-proxy's again (rules written for {lab.HAND_BUILT_SERVICE} aside), repaired by hand, "
                      "and its mangle and raw tables are as the lab built them")


def check_debug_ruleset(ctx):
    return judge_debug_ruleset(ctx, observe_debug_ruleset(ctx))


# -- clusterip-by-hand -----------------------------------------------------------------------------


def nodeports_not_last(nat) -> bool:
    """kube-proxy keeps its jump to KUBE-NODEPORTS as the last rule of KUBE-SERVICES ("NOTE: this
    must be the last rule in this chain"): its addrtype LOCAL match would otherwise shadow rules
    for addresses of the node. True when a rule follows it."""
    rules = nat.chain("KUBE-SERVICES").rules if nat.chain("KUBE-SERVICES") else []
    last_jump = max((i for i, r in enumerate(rules) if r.target == "KUBE-NODEPORTS"), default=None)
    return last_jump is not None and last_jump < len(rules) - 1


def programmed_objects(state, service: str) -> list[dict]:
    """The cluster's objects with `service` as kube-proxy would see it without its
    service-proxy-name label: what kube-proxy would write for it is what the student writes."""
    objects = state.objects()
    for obj in objects:
        if obj["kind"] == "Service" and obj["metadata"]["name"] == service:
            (obj["metadata"].get("labels") or {}).pop(PROXY_NAME_LABEL, None)
    return objects


def observe_clusterip_by_hand(ctx) -> dict:
    observation = observe_nodes(ctx)
    mark = ctx.lab.environment_module().HAND_BUILT_MARK
    observation["syncs"] = judge.syncs_since(ctx.env, mark)
    observation["syncs_before_reset"] = judge.syncs_before(ctx.env, mark)
    state = observation["state"]
    svc = state.service(ctx.params["service"])
    # Each source picks uniformly among 3 endpoints (judged on the rules first) and misses a given
    # one in n requests with probability (2/3)^n. 7 sources (both nodes, a pod on each node, and the
    # 3 endpoint pods, which must also reach themselves) x 3 endpoints: 21 * (2/3)^42 = 8.6e-7 < 1e-6.

    def send():
        ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
        senders = [h for node in state.node_names() for h, _ in traffic_sources(state, node)]
        senders += [e["pod"] for e in endpoints_of(state, ctx.params["service"]) if e["pod"] not in senders]
        return {host: live.send(ctx.env, host, ip, port, 42, timeout=1.0, parallel=6) for host in senders}
    observation["traffic"] = Deferred(send)
    return observation


def judge_clusterip_by_hand(ctx, observation):
    service, port_name = ctx.params["service"], ctx.params["port_name"]
    state = observation["state"]
    lab = ctx.lab.environment_module()
    svc = service_of(state, service)
    if PROXY_NAME_LABEL not in (svc["metadata"].get("labels") or {}):
        return ctx.failed(f"Service {service} lost its {PROXY_NAME_LABEL} label, so kube-proxy programs it now; put "
                          "the label back and build the rules yourself")
    changed = lab.service_changes(state, service)
    if changed:
        return ctx.failed(f"Service {service}: {', '.join(changed)} changed; build the rules for the Service as the "
                          "lab built it")
    # kube-proxy itself wrote legacy's rules once its label was off: what is on the nodes may be a
    # copy of them put back after the label was, and is kube-proxy's work, not the student's
    programmed = [s for s in observation.get("syncs") or [] if f"default/{service}" in (s.get("programmed") or [])]
    if programmed:
        import time
        when = time.strftime("%H:%M:%S", time.localtime(programmed[0]["time"]))
        return ctx.failed(f"kube-proxy programmed {service} on {programmed[0]['node']} at {when}, while its "
                          f"{PROXY_NAME_LABEL} label was off: rules copied from that sync are kube-proxy's work, not "
                          f"yours. `labkit reset kube-proxy {ctx.exercise.id}` (it keeps a copy of your rules) starts "
                          "the exercise afresh; build the rules yourself, with the label on all along")
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    endpoints = endpoints_of(state, service)
    targets = [f"{e['ip']}:{e['port']}" for e in endpoints]
    pods = {e["pod"] for e in endpoints}
    spn = service_port_name("default", service, port_name)
    svc_chain = service_chain(spn, "tcp")
    sep_chains = {t: endpoint_chain(spn, "tcp", t) for t in targets}
    objects = programmed_objects(state, service)
    broken = state.service(lab.BROKEN_SERVICE)
    broken_ip = broken["spec"]["clusterIP"] if broken else None
    # Feedback never names the chains kube-proxy would use: computing them is part of the exercise.
    for node in state.node_names():
        nat = parse(observation["rules"][node]).table("nat")
        chain = nat.chain(svc_chain)
        if chain is None:
            theirs = judge.kube_proxy_chain_names(state, exclude={service})
            mine = sorted(c for c in nat.chains if c.startswith("KUBE-SVC-") and c not in theirs)
            yours = f" (yours: {', '.join(mine)})" if mine else ""
            return ctx.failed(f"{node} has no KUBE-SVC chain with kube-proxy's name for {spn} (tcp){yours}: the name "
                              "is KUBE-SVC- and the first 16 characters of the base32 of sha256 of the service port "
                              "name and protocol (hint 2)")
        services_chain = nat.chain("KUBE-SERVICES")
        if services_chain is None or not any(r.target == svc_chain for r in services_chain.rules):
            return ctx.failed(f"on {node}, KUBE-SERVICES has no rule that jumps to your KUBE-SVC chain for {service}: "
                              "kube-proxy sends cluster-IP traffic there from KUBE-SERVICES, which both PREROUTING "
                              "(pods) and OUTPUT (the node itself) jump to")
        jumps = {r.target for r in chain.rules}
        for target, sep in sep_chains.items():
            if nat.chain(sep) is None or sep not in jumps:
                return ctx.failed(f"on {node}, {svc_chain} does not jump to kube-proxy's KUBE-SEP chain for endpoint "
                                  f"{target} (its name hashes {spn}, tcp and {target}; hint 2)")
            if not any(r.target == "DNAT" and r.target_option("--to-destination") == target for r in nat.chain(sep).rules):
                return ctx.failed(f"on {node}, the KUBE-SEP chain for endpoint {target} does not DNAT to {target}")
        if nodeports_not_last(nat):
            return ctx.failed(f"on {node}, KUBE-SERVICES has rules after its KUBE-NODEPORTS jump, which must be the last "
                              f"rule in this chain (\"{NODEPORTS_JUMP_COMMENT}\"): insert your rule before it (-I)")
        for host, address in traffic_sources(state, node) + [(e["pod"], e["ip"]) for e in endpoints if e["node"] == node]:
            result = trace_live(observation, node, address, ip, port)
            own = [b for b in result.branches if b.dnat and b.dnat.split(":")[0] == address]
            if own and not all(b.masquerade for b in own):
                return ctx.failed(f"on {node}, a request from {host} to {service} that picks {host} itself is not "
                                  "masqueraded: the pod would get a packet from its own address and answer itself "
                                  "directly, and the connection times out (the hairpin case). kube-proxy marks it "
                                  "in each KUBE-SEP chain: -s <endpoint IP> -j KUBE-MARK-MASQ")
        # The whole space: legacy's cluster IP on every port and protocol, from every kind of source,
        # and every other Service, as kube-proxy's rules for the lab with legacy programmed would do.
        # (catalog on the node debug-ruleset breaks is that exercise's.)
        require_like_kube_proxy(
            ctx, observation, [s["metadata"]["name"] for s in state.services], nodes=[node], objects=objects,
            skip=lambda n, p: n == lab.BROKEN_NODE and p.dst == broken_ip,
            why=" (write the rules kube-proxy would write: compare with another Service's chains, e.g. "
                "`iptables-save -t nat | grep default/api`)")
        for host, address in traffic_sources(state, node):
            require_uniform(dnat_distribution(trace_live(observation, node, address, ip, port)), targets,
                            f"on {node}, from {host}")
        # every chain and rule: exactly kube-proxy's chains for legacy and its one KUBE-SERVICES jump,
        # nothing more anywhere (a rule that opens legacy on a node's address or a node port is one
        # kube-proxy never writes for a ClusterIP Service)
        found = clusterip_differences(ctx, state, node, observation["rules"][node], objects)
        if found:
            # the right jumps in another order pick the same endpoints with the same chances, but they
            # are not kube-proxy's rules: it writes one per endpoint in its endpoints' order (sorted,
            # endpointslicecache.go) with computeProbability(n) for the n-th from the end (proxier.go)
            ref_chain = parse(reference(ctx, state, node, objects)).table("nat").chain(svc_chain)
            mine = [r.target for r in chain.rules if r.target.startswith("KUBE-SEP-")]
            theirs = [r.target for r in ref_chain.rules if r.target.startswith("KUBE-SEP-")] if ref_chain else []
            order = ("; the jumps of your KUBE-SVC chain go to kube-proxy's KUBE-SEP chains but in another order: kube-proxy "
                     "writes one jump per endpoint in the order of its endpoints (sorted as ip:port text), the first with "
                     "probability 1/n, then 1/(n-1) of what is left, the last without one"
                     if sorted(mine) == sorted(theirs) and mine != theirs else "")
            return ctx.failed(structure_feedback(found, {svc_chain, *sep_chains.values()}, f"{service}'s chains")
                              + ". Write exactly the rules kube-proxy writes for a ClusterIP Service, nothing more: "
                              "its KUBE-SVC and KUBE-SEP chains and one KUBE-SERVICES rule for the cluster IP and port"
                              + order)
        require_untouched_tables(ctx, observation, nodes=[node], why=": write legacy's rules in the nat table, "
                                 "as kube-proxy does, nothing elsewhere")
        # the rules as kube-proxy writes them, comments included (the prompt asks for its rules)
        unlabelled = clusterip_comment_differences(ctx, state, node, observation["rules"][node], objects)
        if unlabelled:
            return ctx.failed(f"on {node}, {len(unlabelled)} of the rules written for {service} lack the comment "
                              f"kube-proxy gives them, or carry another (first: chain {unlabelled[0].chain}: "
                              f"{unlabelled[0].rule}): kube-proxy labels every rule it writes for a Service port with "
                              "`-m comment --comment …` (how its rules are found: `iptables-save -t nat | grep "
                              "default/api`); compare each of yours with the same rule of api's")
    for host, tally in traffic(observation).items():
        require_all_answered(tally, f"{host} -> {service} ({ip}:{port})", pods)
    # kube-proxy programmed legacy before the last reset of the exercise: the rules it wrote then
    # may have been kept outside the lab (a reset copies the nodes' rules to saved/) and restored
    # now. Nothing tells such a copy from the student's own rules, so the pass says so, and the
    # grade report keeps when (as labkit.predictions keeps a forgotten prediction).
    earlier = [{"node": s["node"], "time": s["time"]} for s in observation.get("syncs_before_reset") or []
               if f"default/{service}" in (s.get("programmed") or [])]
    note = ""
    if earlier:
        import time
        note = (f" (kube-proxy itself had programmed {service} on {earlier[0]['node']} at "
                f"{time.strftime('%H:%M:%S', time.localtime(earlier[0]['time']))}, before the exercise was last "
                "reset: the grade report keeps that it did)")
    return ctx.passed(f"both nodes send {service}'s cluster IP through kube-proxy's chains to all {len(pods)} endpoints, "
                      "from the nodes, from pods, and from each endpoint to itself; every other chain and rule of "
                      "their nat and filter tables is as kube-proxy writes it (what debug-ruleset judges on node2 aside), so "
                      "nothing else answers for "
                      f"{service} (not its node addresses, not a node port){note}",
                      **({"kube_proxy_programmed_before_reset": earlier} if earlier else {}))


def check_clusterip_by_hand(ctx):
    return judge_clusterip_by_hand(ctx, observe_clusterip_by_hand(ctx))
