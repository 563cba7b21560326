"""Checks of the kube-proxy lab. Truth comes from the live cluster: real requests through the
nodes' rules, the nodes' live iptables tables, and the cluster state the nodes were synced from.

Traffic checks are statistical. Each one sends enough requests that a correct setup fails it with
probability below 1e-6; the computation is next to each sample size.
"""

from __future__ import annotations

from labkit.exercises import CheckFailed
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import endpoint_chain, service_chain, service_port_name
from labkit.netfilter import Packet, Tracer, parse, save

TOLERANCE = 1e-6     # iptables-save prints the kernel's rounding: 0.33333333349 for 0.3333333333


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


def describe(tally) -> str:
    parts = [f"{pod} ×{n}" for pod, n in sorted(tally.answered.items())]
    parts += [f"{err} ×{n}" for err, n in tally.failures.most_common()]
    return ", ".join(parts) or "nothing"


def require_all_answered(tally, what: str, expected_pods: set[str]) -> None:
    """Every request answered, only by `expected_pods`, and each of them at least once."""
    if tally.failures:
        raise CheckFailed(f"{what}: {sum(tally.failures.values())} of {tally.sent} requests failed",
                          expected=f"all {tally.sent} answered", observed=describe(tally))
    strangers = set(tally.answered) - expected_pods
    if strangers:
        raise CheckFailed(f"{what}: answered by {', '.join(sorted(strangers))}, which are not its pods",
                          expected=sorted(expected_pods), observed=describe(tally))
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
        return ctx.failed(f"{given_chain} is not the chain {node} sends {service}'s cluster-IP traffic to",
                          expected="the target of the KUBE-SERVICES rule for its cluster IP", observed=given_chain)
    live_probabilities = [probability_of_rule(r) for r in nat.chain(chain_name).rules
                          if r.target and r.target.startswith("KUBE-SEP-") and not r.cond("recent")]
    try:
        numbers = [float(p) for p in given]
    except (TypeError, ValueError):
        raise CheckFailed(f"probabilities must be numbers, got {given!r}")
    if len(numbers) != len(live_probabilities):
        return ctx.failed(f"{chain_name} has {len(live_probabilities)} jumps to KUBE-SEP chains, your answer lists {len(numbers)}",
                          expected=f"{len(live_probabilities)} probabilities", observed=given)
    wrong = [i for i, (a, b) in enumerate(zip(numbers, live_probabilities)) if abs(a - b) > TOLERANCE]
    if wrong:
        return ctx.failed(f"probability of jump {wrong[0] + 1} is not what the rule says",
                          expected=f"the --probability of each jump, in rule order ({len(numbers)} values, 1 for the last)",
                          observed=given)
    return ctx.passed(f"{chain_name} picks among {len(numbers)} endpoints with probabilities {numbers}: "
                      f"each one gets 1/{len(numbers)} overall")


# -- nodeport --------------------------------------------------------------------------------------


def check_nodeport(ctx):
    service, node_port = ctx.params["service"], ctx.params["node_port"]
    state = live.load(ctx.env)
    pods = {e["pod"] for e in endpoints_of(state, service)}
    # Every request must be answered and every one of the 4 pods must answer through each node.
    # A correct setup (each node picks uniformly among 4 pods) misses a given pod in n requests
    # with probability (3/4)^n; for 2 nodes x 4 pods: 8 * (3/4)^56 = 8.1e-7 < 1e-6, so n = 56.
    for node in state.node_names():
        address = state.node_address(node)
        tally = live.send(ctx.env, "client", address, node_port, 56, timeout=2.0)
        require_all_answered(tally, f"client -> {node} ({address}:{node_port})", pods)
    return ctx.passed(f"the client reaches all {len(pods)} {service} pods through port {node_port} of every node")


# -- session-affinity -------------------------------------------------------------------------------


def check_session_affinity(ctx):
    service, node_port = ctx.params["service"], ctx.params["node_port"]
    state = live.load(ctx.env)
    pods = {e["pod"] for e in endpoints_of(state, service)}
    client = next(h for h in state.hosts if h["name"] == "client")
    sources = client["addresses"][1:17]
    nodes = state.node_names()
    # Sticky: with ClientIP affinity every request of a client after its first goes to the same pod
    # (deterministic). Without it, one client's 4 requests land on one of 3 pods with probability
    # 3 * (1/3)^4 = 1/27, so 16 clients all look sticky by chance with probability 27^-16 (~1e-23).
    # Spread: each client's first request picks uniformly among the 3 pods, independently, so a
    # correct setup sends all 16 clients to one pod with probability 3 * (1/3)^16 = 7.0e-8 < 1e-6.
    chosen = {}
    for i, source in enumerate(sources):
        node = nodes[i % len(nodes)]
        tally = live.send(ctx.env, "client", state.node_address(node), node_port, 4, source=source, timeout=2.0)
        if tally.failures or set(tally.answered) - pods:
            return ctx.failed(f"requests from {source} through {node} did not all reach {service} pods",
                              expected="4 answers from api pods", observed=describe(tally))
        if len(tally.answered) > 1:
            return ctx.failed(f"client {source} is not sticky: its 4 requests through {node} reached {describe(tally)}",
                              expected="every request of a client to the same pod", observed=describe(tally))
        chosen[source] = next(iter(tally.answered))
    if len(set(chosen.values())) < 2:
        return ctx.failed(f"all {len(sources)} clients went to {next(iter(chosen.values()))}",
                          expected="different clients spread over the pods", observed=chosen)
    spread = {pod: sum(1 for p in chosen.values() if p == pod) for pod in sorted(set(chosen.values()))}
    return ctx.passed(f"each of {len(sources)} clients stays with one pod; together they use {spread}")


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


def check_traffic_policy(ctx):
    services = [ctx.params["cluster_service"], ctx.params["local_service"]]
    client_address = ctx.params["client_address"]
    answer = ctx.answer()
    state = live.load(ctx.env)
    mistakes, observed = [], {}
    for service in services:
        predicted = ctx.answer_field(answer, service, dict)
        observed[service] = seen = observe_policy(ctx, state, service, client_address)
        for node, truth in seen.items():
            guess = predicted.get(node)
            if not isinstance(guess, dict) or not isinstance(guess.get("answers"), bool):
                raise CheckFailed(f"{ctx.answer_path}: {service}.{node} must be a mapping with answers: true|false")
            if guess["answers"] != truth["answers"]:
                mistakes.append(f"{service} via {node}: you predicted {'an' if guess['answers'] else 'no'} answer")
            elif truth["answers"] and guess.get("client_ip_preserved") != truth["client_ip_preserved"]:
                mistakes.append(f"{service} via {node}: you predicted the client address is "
                                f"{'kept' if guess.get('client_ip_preserved') else 'replaced'}")
    if mistakes:
        return ctx.failed("; ".join(mistakes) + ". Observe it with `labkit kube-proxy curl --from client`.",
                          observed=observed)
    return ctx.passed("your predictions match what the client really got from every node", observed=observed)


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
    tally = live.send(ctx.env, pod_name, svc["spec"]["clusterIP"], port["port"], 50, timeout=2.0)
    own = set(tally.seen_clients.get(pod_name, {}))
    others = {a for p, c in tally.seen_clients.items() if p != pod_name for a in c}
    if len(own) != 1 or len(others) != 1:
        return ctx.error(f"could not observe both cases cleanly from {pod_name} ({describe(tally)}); "
                         "is the Service working? `labkit reset kube-proxy` restores the lab")
    truth = {"seen_by_itself": own.pop(), "seen_by_others": others.pop()}
    # The rule: in the KUBE-SEP chain of the pod's own endpoint, "-s <pod IP>/32 -j KUBE-MARK-MASQ".
    nat = nat_table(ctx, pod["spec"]["nodeName"])
    endpoint = f"{pod['status']['podIP']}:{endpoints_of(state, service)[0]['port']}"
    comment = f"default/{service}:{port.get('name', '')}".rstrip(":")
    truth["chain"] = next((c.name for c in nat.chains.values()
                           if any(r.target == "DNAT" and r.target_option("--to-destination") == endpoint
                                  and r.comment == comment for r in c.rules)
                           and any(r.target == "KUBE-MARK-MASQ" and r.cond("src") for r in c.rules)), None)
    wrong = [k for k in given if given[k] != truth[k]]
    if wrong:
        hints = {"seen_by_itself": "the address the pod saw in its own answers",
                 "seen_by_others": "the address the other pods saw",
                 "chain": "the chain with the -s <pod IP> ... KUBE-MARK-MASQ rule"}
        return ctx.failed(f"{', '.join(wrong)} not right ({'; '.join(hints[k] for k in wrong)})",
                          expected=", ".join(f"{k}: {hints[k]}" for k in wrong),
                          observed={k: given[k] for k in wrong})
    return ctx.passed(f"{pod_name} sees {truth['seen_by_itself']} (its node, masqueraded by {truth['chain']}) "
                      f"when it answers itself; the others see {truth['seen_by_others']}")


# -- debug-ruleset and clusterip-by-hand: traffic and the shape of the rules --------------------------


def local_addresses(state, node: str) -> list[str]:
    return live.proxier_config(state, node).local_addresses


def dnat_distribution(ctx, state, node: str, source: str, ip: str, port: int) -> dict[str, float]:
    """The chance of each DNAT target for a new connection from `source` to ip:port, traced through
    the node's live rules (labkit.netfilter.Tracer explores every statistic branch)."""
    rules = parse(save(ctx.env.netns_name(node)))
    result = Tracer(rules, local_addresses(state, node)).trace(Packet(src=source, dst=ip, dport=port))
    out: dict[str, float] = {}
    for d in result.dnat:
        out[d["target"]] = out.get(d["target"], 0.0) + d["probability"]
    return out


def require_uniform(distribution: dict[str, float], endpoints: list[str], what: str) -> None:
    share = 1 / len(endpoints)
    wrong = {t: round(p, 4) for t, p in distribution.items() if t not in endpoints or abs(p - share) > TOLERANCE}
    missing = [e for e in endpoints if e not in distribution]
    if wrong or missing:
        raise CheckFailed(f"{what}: the rules do not give every endpoint the same chance",
                          expected={e: round(share, 4) for e in endpoints},
                          observed={t: round(p, 4) for t, p in sorted(distribution.items())})


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
        tally = live.send(ctx.env, host, ip, port, 56, timeout=2.0)
        require_all_answered(tally, f"{host} -> {service}", pods)
    for host, address in sources:
        require_uniform(dnat_distribution(ctx, state, node, address, ip, port), targets, f"from {host}")
    return ctx.passed(f"from {node} and its pods every request to {service} is answered, "
                      f"and each of its {len(pods)} pods gets 1/{len(pods)} of them")


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
    for node in state.node_names():
        nat = nat_table(ctx, node)
        chain = nat.chain(svc_chain)
        if chain is None:
            return ctx.failed(f"{node} has no chain {svc_chain}",
                              expected=f"{svc_chain} (kube-proxy's name for {spn} tcp)",
                              observed=sorted(c for c in nat.chains if c.startswith("KUBE-SVC-")))
        jumps = {r.target for r in chain.rules}
        for target, sep in sep_chains.items():
            sep_chain = nat.chain(sep)
            if sep_chain is None or sep not in jumps:
                return ctx.failed(f"on {node}, {svc_chain} does not jump to {sep}, kube-proxy's chain for endpoint {target}",
                                  expected=f"{sep} (sha256 of {spn}tcp{target})",
                                  observed=sorted(j for j in jumps if j))
            if not any(r.target == "DNAT" and r.target_option("--to-destination") == target for r in sep_chain.rules):
                return ctx.failed(f"on {node}, {sep} does not DNAT to {target}")
        for host, address in traffic_sources(state, node):
            require_uniform(dnat_distribution(ctx, state, node, address, ip, port), targets, f"on {node}, from {host}")
    # Each source picks uniformly among 3 endpoints (checked on the rules above) and misses a given
    # one in n requests with probability (2/3)^n; 4 sources x 3 endpoints: 12 * (2/3)^45 = 1.4e-7 < 1e-6.
    for node in state.node_names():
        for host, _ in traffic_sources(state, node):
            tally = live.send(ctx.env, host, ip, port, 45, timeout=2.0)
            require_all_answered(tally, f"{host} -> {service} ({ip}:{port})", pods)
    return ctx.passed(f"both nodes send {service}'s cluster IP through {svc_chain} to all {len(pods)} endpoints, "
                      "from pods and from the nodes")

