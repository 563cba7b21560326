"""Checks of the kube-proxy lab. Truth comes from the live cluster: real requests through the
nodes' rules, the nodes' live iptables tables, and the cluster state the nodes were synced from.

Traffic checks are statistical. Each one sends enough requests that a correct setup fails it with
probability below 1e-6; the computation is next to each sample size.

Feedback on the answer-file exercises (follow-the-chain, traffic-policy, hairpin) says which part
is wrong and where to look, never the value expected; the other checks may show what the live
rules do (the distribution of endpoints, the addresses pods saw), since that is what the student
observes anyway.
"""

from __future__ import annotations

from labkit.exercises import CheckFailed
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, service_chain, service_port_name
from labkit.netfilter import Packet, Tracer, parse, save

# How far a probability may be from the rule's: iptables-save prints the kernel's rounding
# (0.33333333349 for the 0.3333333333 kube-proxy wrote), which is well inside it.
TOLERANCE = 1e-6
NODEPORTS_JUMP_COMMENT = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"


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


# -- follow-the-chain ------------------------------------------------------------------------------


def cluster_ip_chain(nat, comment: str) -> str | None:
    """The chain KUBE-SERVICES sends a service port's cluster-IP traffic to (found by its comment)."""
    for rule in nat.chain("KUBE-SERVICES").rules if nat.chain("KUBE-SERVICES") else []:
        if rule.comment == comment:
            return rule.target
    return None


def check_follow_the_chain(ctx):
    service, node = ctx.params["service"], ctx.params["node"]
    answer = ctx.answer()
    given_chain = str(ctx.answer_field(answer, "chain", str)).strip()
    given = ctx.answer_field(answer, "probabilities", list)
    nat = nat_table(ctx, node)
    chain_name = cluster_ip_chain(nat, f"default/{service}:http cluster IP")
    if chain_name is None:
        return ctx.error(f"{node} has no cluster-IP rule for {service} in KUBE-SERVICES: `labkit reset kube-proxy` restores the lab")
    if given_chain != chain_name:
        other = next((r.comment for r in (nat.chain("KUBE-SERVICES").rules if nat.chain("KUBE-SERVICES") else [])
                      if r.target == given_chain and r.comment), None)
        whose = f" (it is the chain of \"{other}\")" if other else ""
        return ctx.failed(f"{given_chain} is not the chain {node} sends {service}'s cluster-IP traffic to{whose}: "
                          "follow the KUBE-SERVICES rule for its cluster IP")
    live_probabilities = [probability_of_rule(r) for r in nat.chain(chain_name).rules
                          if r.target and r.target.startswith("KUBE-SEP-") and not r.cond("recent")]
    try:
        numbers = [float(p) for p in given]
    except (TypeError, ValueError):
        raise CheckFailed(f"{ctx.answer_path}: probabilities must be numbers, got {', '.join(map(str, given))}")
    if len(numbers) != len(live_probabilities):
        return ctx.failed(f"{chain_name} has {len(live_probabilities)} jumps to KUBE-SEP chains, your answer lists "
                          f"{len(numbers)} probabilities", observed=", ".join(map(str, given)))
    wrong = [i for i, (a, b) in enumerate(zip(numbers, live_probabilities)) if abs(a - b) > TOLERANCE]
    if wrong:
        shown = "; ".join(f"jump {i + 1}: you wrote {number(numbers[i])}" for i in wrong)
        return ctx.failed(f"{shown}. Each must be the --probability of that jump in {chain_name}, within a tolerance "
                          f"of ±{TOLERANCE:g} (so copy every digit: rounded values such as 0.33 are outside it; the last "
                          "jump has none: write 1)")
    return ctx.passed(f"{chain_name} picks among {len(numbers)} endpoints with probabilities "
                      f"{', '.join(number(n) for n in numbers)}: each endpoint gets 1/{len(numbers)} overall")


# -- nodeport --------------------------------------------------------------------------------------


def check_nodeport(ctx):
    service, node_port = ctx.params["service"], ctx.params["node_port"]
    state = live.load(ctx.env)
    svc = service_of(state, service)
    kind = svc["spec"].get("type", "ClusterIP")
    if kind not in ("NodePort", "LoadBalancer"):
        return ctx.failed(f"Service {service} is still of type {kind}: only NodePort (or LoadBalancer) Services get "
                          "a port on every node")
    ports = [p.get("nodePort") for p in svc["spec"]["ports"]]
    if node_port not in ports:
        return ctx.failed(f"Service {service} has nodePort {', '.join(map(str, ports))}, not {node_port}: without a "
                          "nodePort in the Service, the API server picks a free one from 30000-32767")
    pods = {e["pod"] for e in endpoints_of(state, service)}
    # Every request must be answered and every one of the 4 pods must answer through each node.
    # A correct setup (each node picks uniformly among 4 pods) misses a given pod in n requests
    # with probability (3/4)^n; for 2 nodes x 4 pods: 8 * (3/4)^56 = 8.1e-7 < 1e-6, so n = 56.
    for node in state.node_names():
        address = state.node_address(node)
        tally = live.send(ctx.env, "client", address, node_port, 56, timeout=1.0, parallel=8)
        try:
            require_all_answered(tally, f"client -> {node} ({address}:{node_port})", pods)
        except CheckFailed as failure:
            if svc["spec"].get("externalTrafficPolicy") == "Local":
                failure.message += (" (the Service has externalTrafficPolicy Local: a node forwards external clients "
                                    "only to its own pods)")
            raise
    return ctx.passed(f"the client reaches all {len(pods)} {service} pods through port {node_port} of every node")


# -- session-affinity -------------------------------------------------------------------------------


def check_session_affinity(ctx):
    service, node_port = ctx.params["service"], ctx.params["node_port"]
    state = live.load(ctx.env)
    pods = {e["pod"] for e in endpoints_of(state, service)}
    client = next(h for h in state.hosts if h["name"] == "client")
    sources = client["addresses"][1:17]
    nodes = state.node_names()
    # Affinity is per node (each node's `recent` lists remember the clients it saw), so each client
    # talks through one node. Sticky: with ClientIP affinity every request of a client after its
    # first goes to the same pod (deterministic). Without it, one client's 4 requests land on one of
    # 3 pods with probability 3 * (1/3)^4 = 1/27, so 16 clients all look sticky by chance with
    # probability 27^-16 (~1e-23). Spread: each client's first request picks uniformly among the 3
    # pods, independently, so a correct setup sends all 16 clients to one pod with probability
    # 3 * (1/3)^16 = 7.0e-8 < 1e-6.
    chosen = {}
    for i, source in enumerate(sources):
        node = nodes[i % len(nodes)]
        tally = live.send(ctx.env, "client", state.node_address(node), node_port, 4, source=source, timeout=1.0)
        if tally.failures or set(tally.answered) - pods:
            return ctx.failed(f"requests from {source} through {node} did not all reach {service} pods",
                              expected=f"4 answers from {', '.join(sorted(pods))}", observed=describe(tally))
        if len(tally.answered) > 1:
            return ctx.failed(f"client {source} is not sticky: its 4 requests through {node} reached {describe(tally)}",
                              expected="every request of one client through one node to the same pod")
        chosen[source] = next(iter(tally.answered))
    spread = {pod: sum(1 for p in chosen.values() if p == pod) for pod in set(chosen.values())}
    if len(spread) < 2:
        return ctx.failed(f"all {len(sources)} clients went to {next(iter(chosen.values()))}",
                          expected="different clients spread over the pods", observed=f"clients per pod: {counts(spread)}")
    return ctx.passed(f"each of {len(sources)} clients stays with one pod through its node; together they use "
                      f"{counts(spread)} (clients per pod)")


# -- traffic-policy --------------------------------------------------------------------------------


def observe_policy(ctx, state, service: str, client_address: str) -> dict:
    """What the client really gets from each node's NodePort: {node: {answers, client_ip_preserved}}."""
    node_port = service_of(state, service)["spec"]["ports"][0].get("nodePort")
    if not node_port:
        raise CheckFailed(f"Service {service} has no NodePort any more: `labkit reset kube-proxy` restores the lab")
    seen = {}
    for node in state.node_names():
        # A node either forwards (every request answered) or drops (none answered): deterministic,
        # three requests in parallel so that a dropping node costs one timeout, not three.
        tally = live.send(ctx.env, "client", state.node_address(node), node_port, 3, timeout=1.0, parallel=3)
        answers = tally.ok > 0
        entry = {"answers": answers}
        if answers:
            addresses = {a for c in tally.seen_clients.values() for a in c}
            entry["client_ip_preserved"] = addresses == {client_address}
        seen[node] = entry
    return seen


def policy_table(observed: dict) -> str:
    parts = []
    for service, nodes in observed.items():
        for node, entry in nodes.items():
            what = ("answers, client address " + ("kept" if entry["client_ip_preserved"] else "replaced")
                    if entry["answers"] else "no answer")
            parts.append(f"{service} via {node}: {what}")
    return "; ".join(parts)


def check_traffic_policy(ctx):
    services = [ctx.params["cluster_service"], ctx.params["local_service"]]
    client_address = ctx.params["client_address"]
    answer = ctx.answer()
    state = live.load(ctx.env)
    wrong, observed, total = [], {}, 0
    for service in services:
        predicted = ctx.answer_field(answer, service, dict)
        observed[service] = seen = observe_policy(ctx, state, service, client_address)
        for node, truth in seen.items():
            guess = predicted.get(node)
            if not isinstance(guess, dict) or not isinstance(guess.get("answers"), bool):
                raise CheckFailed(f"{ctx.answer_path}: {service}.{node} must be a mapping with answers: true|false")
            if truth["answers"] and not isinstance(guess.get("client_ip_preserved"), bool) and guess["answers"]:
                raise CheckFailed(f"{ctx.answer_path}: {service}.{node} predicts an answer, so it needs "
                                  "client_ip_preserved: true|false")
            total += 1
            if guess["answers"] != truth["answers"] or (
                    truth["answers"] and guess.get("client_ip_preserved") != truth["client_ip_preserved"]):
                wrong.append(f"{service} via {node}")
    if wrong:
        # Which predictions are wrong, never what is right: that is for the student to observe.
        return ctx.failed(f"{len(wrong)} of your {total} predictions are wrong: {', '.join(wrong)}. Observe each "
                          "with `labkit kube-proxy curl --from client --to NODE-IP:NODE-PORT` and explain it from "
                          "the node's KUBE-EXT-…, KUBE-SVL-… and KUBE-MARK-MASQ rules")
    return ctx.passed(f"your predictions match what the client really got: {policy_table(observed)}")


# -- hairpin ---------------------------------------------------------------------------------------


def check_hairpin(ctx):
    pod_name, service = ctx.params["pod"], ctx.params["service"]
    answer = ctx.answer()
    given = {k: str(ctx.answer_field(answer, k, str)).strip() for k in ("seen_by_itself", "seen_by_others", "chain")}
    state = live.load(ctx.env)
    pod = state.pod(pod_name)
    svc = service_of(state, service)
    port = svc["spec"]["ports"][0]
    # The pod is one of 4 endpoints: n requests miss its own answer with probability (3/4)^n and
    # every other pod's with (1/4)^n; n = 50 gives 5.7e-7 + 7.9e-31 < 1e-6.
    tally = live.send(ctx.env, pod_name, svc["spec"]["clusterIP"], port["port"], 50, timeout=1.0, parallel=4)
    own = set(tally.seen_clients.get(pod_name, {}))
    others = {a for p, c in tally.seen_clients.items() if p != pod_name for a in c}
    if len(own) != 1 or len(others) != 1:
        return ctx.error(f"could not observe both cases cleanly from {pod_name} ({describe(tally)}); "
                         "is the Service working? `labkit reset kube-proxy` restores the lab")
    truth = {"seen_by_itself": own.pop(), "seen_by_others": others.pop()}
    # The rule: in the KUBE-SEP chain of the pod's own endpoint of this Service,
    # "-s <pod IP>/32 -j KUBE-MARK-MASQ". Other Services selecting the same pod have their own
    # KUBE-SEP chain for it, with the same kind of rule.
    node = pod["spec"]["nodeName"]
    nat = nat_table(ctx, node)
    endpoint = f"{pod['status']['podIP']}:{endpoints_of(state, service)[0]['port']}"
    hairpin_chains = {c.name: next((r.comment for r in c.rules if r.comment), None) for c in nat.chains.values()
                      if c.name.startswith("KUBE-SEP-")
                      and any(r.target == "DNAT" and r.target_option("--to-destination") == endpoint for r in c.rules)
                      and any(r.target == "KUBE-MARK-MASQ" and r.cond("src") for r in c.rules)}
    own_comment = f"default/{service}:{port.get('name', '')}".rstrip(":")
    truth["chain"] = next((name for name, comment in hairpin_chains.items() if comment == own_comment), None)
    wrong = [k for k in given if given[k] != truth[k]]
    if wrong:
        hints = {"seen_by_itself": "the client address the pod saw in the answers it gave itself",
                 "seen_by_others": "the client address the other pods saw",
                 "chain": f"the chain on {node} with the -s <pod IP> ... -j KUBE-MARK-MASQ rule for {service}'s traffic"}
        message = f"{', '.join(wrong)} not right (look for {'; '.join(hints[k] for k in wrong)})"
        if "chain" in wrong and given["chain"] in hairpin_chains:
            message += (f". {given['chain']} is the hairpin chain of {pod_name} for another Service "
                        f"({hairpin_chains[given['chain']]}); the requests went to Service {service}")
        return ctx.failed(message)
    return ctx.passed(f"{pod_name} sees {truth['seen_by_itself']} (its node's address on the pod bridge) when it "
                      f"answers itself: {truth['chain']} marks the packet (KUBE-MARK-MASQ), KUBE-POSTROUTING "
                      f"masquerades it, and the bridge port's hairpin mode sends it back out the port it came in; "
                      f"the others see {truth['seen_by_others']}")


# -- debug-ruleset and clusterip-by-hand: traffic and the shape of the rules --------------------------


def local_addresses(state, node: str) -> list[str]:
    return live.proxier_config(state, node).local_addresses


def trace(ctx, state, node: str, source: str, ip: str, port: int, rules=None):
    """A new connection from `source` to ip:port, traced through the node's live rules
    (labkit.netfilter.Tracer explores every statistic branch)."""
    rules = rules if rules is not None else parse(save(ctx.env.netns_name(node)))
    return Tracer(rules, local_addresses(state, node)).trace(Packet(src=source, dst=ip, dport=port))


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


def traffic_sources(state, node: str, pod_name: str | None = None) -> list[tuple[str, str]]:
    """(lab host, its address) to test a node's rules from: the node itself and one of its pods
    (`pod_name`, or the first), i.e. nat OUTPUT and nat PREROUTING."""
    pod = state.pod(pod_name) if pod_name else next(p for p in state.pods if p["spec"]["nodeName"] == node)
    return [(node, state.node_address(node)), (pod["metadata"]["name"], pod["status"]["podIP"])]


def check_debug_ruleset(ctx):
    service, node = ctx.params["service"], ctx.params["node"]
    state = live.load(ctx.env)
    svc = service_of(state, service)
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    endpoints = endpoints_of(state, service)
    targets = [f"{e['ip']}:{e['port']}" for e in endpoints]
    pods = {e["pod"] for e in endpoints}
    sources = traffic_sources(state, node, ctx.params["pod"])
    # Symptoms first: with every endpoint at 1/4 (the rules are checked below), a source misses a
    # given pod in n requests with probability (3/4)^n; 2 sources x 4 pods: 8 * (3/4)^56 = 8.1e-7.
    for host, _ in sources:
        tally = live.send(ctx.env, host, ip, port, 56, timeout=1.0, parallel=8)
        require_all_answered(tally, f"{host} -> {service}", pods)
    rules = parse(save(ctx.env.netns_name(node)))
    for host, address in sources:
        require_uniform(dnat_distribution(trace(ctx, state, node, address, ip, port, rules)), targets, f"from {host}")
    return ctx.passed(f"from {node} and its pods every request to {service} is answered, "
                      f"and each of its {len(pods)} pods gets 1/{len(pods)} of them")


def nodeports_not_last(nat) -> bool:
    """kube-proxy keeps its jump to KUBE-NODEPORTS as the last rule of KUBE-SERVICES ("NOTE: this
    must be the last rule in this chain"): its addrtype LOCAL match would otherwise shadow rules
    for addresses of the node. True when a rule follows it."""
    rules = nat.chain("KUBE-SERVICES").rules if nat.chain("KUBE-SERVICES") else []
    last_jump = max((i for i, r in enumerate(rules) if r.target == "KUBE-NODEPORTS"), default=None)
    return last_jump is not None and last_jump < len(rules) - 1


def check_clusterip_by_hand(ctx):
    service, port_name = ctx.params["service"], ctx.params["port_name"]
    state = live.load(ctx.env)
    svc = service_of(state, service)
    if "service.kubernetes.io/service-proxy-name" not in (svc["metadata"].get("labels") or {}):
        return ctx.failed(f"Service {service} lost its service.kubernetes.io/service-proxy-name label, so kube-proxy "
                          "programs it now; put the label back and build the rules yourself")
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    endpoints = endpoints_of(state, service)
    targets = [f"{e['ip']}:{e['port']}" for e in endpoints]
    pods = {e["pod"] for e in endpoints}
    spn = service_port_name("default", service, port_name)
    svc_chain = service_chain(spn, "tcp")
    sep_chains = {t: endpoint_chain(spn, "tcp", t) for t in targets}
    # Feedback never names the chains kube-proxy would use: computing them is part of the exercise.
    for node in state.node_names():
        netns_rules = parse(save(ctx.env.netns_name(node)))
        nat = netns_rules.table("nat")
        chain = nat.chain(svc_chain)
        if chain is None:
            mine = sorted(c for c in nat.chains if c.startswith("KUBE-SVC-") and not any(
                r.comment for r in nat.chain(c).rules))
            yours = f" (yours: {', '.join(mine)})" if mine else ""
            return ctx.failed(f"{node} has no KUBE-SVC chain with kube-proxy's name for {spn} (tcp){yours}: the name "
                              "is KUBE-SVC- and the first 16 characters of the base32 of sha256 of the service port "
                              "name and protocol (hint 2)")
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
        sources = traffic_sources(state, node)
        sources += [(e["pod"], e["ip"]) for e in endpoints if e["node"] == node]
        for host, address in sources:
            result = trace(ctx, state, node, address, ip, port, netns_rules)
            require_uniform(dnat_distribution(result), targets, f"on {node}, from {host}")
            own = [b for b in result.branches if b.dnat and b.dnat.split(":")[0] == address]
            if own and not all(b.masquerade for b in own):
                return ctx.failed(f"on {node}, a request from {host} to {service} that picks {host} itself is not "
                                  "masqueraded: the pod would get a packet from its own address and answer itself "
                                  "directly, and the connection times out (the hairpin case). kube-proxy marks it "
                                  "in each KUBE-SEP chain: -s <endpoint IP> -j KUBE-MARK-MASQ")
    # Each source picks uniformly among 3 endpoints (checked on the rules above) and misses a given
    # one in n requests with probability (2/3)^n. 7 sources (both nodes, a pod on each node, and the
    # 3 endpoint pods, which must also reach themselves) x 3 endpoints: 21 * (2/3)^42 = 8.6e-7 < 1e-6.
    senders = [h for node in state.node_names() for h, _ in traffic_sources(state, node)]
    senders += [e["pod"] for e in endpoints if e["pod"] not in senders]
    for host in senders:
        tally = live.send(ctx.env, host, ip, port, 42, timeout=1.0, parallel=6)
        require_all_answered(tally, f"{host} -> {service} ({ip}:{port})", pods)
    return ctx.passed(f"both nodes send {service}'s cluster IP through kube-proxy's chains to all {len(pods)} endpoints, "
                      "from the nodes, from pods, and from each endpoint to itself")
