"""The kube-proxy lab's environment: a two-node cluster in network namespaces, programmed like
kube-proxy (labkit.kubeproxy.live), plus the damage the debug-ruleset exercise asks to repair."""

import json
import re
import sys
import time
from pathlib import Path

import yaml

from labkit import paths, procs
from labkit.errors import LabkitError
from labkit.kubeproxy import judge, live
from labkit.kubeproxy.chains import endpoint_chain, service_chain, service_port_name
from labkit.kubeproxy.cluster_state import load_scenario
from labkit.kubeproxy.situations import graded_then, outcome_node_ports, outcome_port_history
from labkit.netfilter import parse, restore, save
from labkit.netlab import synwatch
from labkit.netfilter.ruleset import parse_rule

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "cluster.yaml"
# debug-ruleset: these rules of one node are edited by hand after kube-proxy's first sync
BROKEN_NODE, BROKEN_SERVICE, BROKEN_PORT_NAME = "node2", "catalog", "http"
BROKEN_EXERCISE = "debug-ruleset"


# The Services each exercise changes (reset_exercise puts them back as the scenario has them).
SERVICES_OF = {"nodeport": ["web"], "session-affinity": ["api"], "traffic-policy": ["shop-cluster", "shop-local"],
               "debug-ruleset": ["catalog"], "clusterip-by-hand": ["legacy"]}
BROKEN_MARK = "debug-ruleset broken"
HAND_BUILT_MARK = "clusterip-by-hand reset"       # from here on kube-proxy must not have programmed legacy
HAND_BUILT_SERVICE = "legacy"
HAND_BUILT_EXERCISE = "clusterip-by-hand"


def render_withheld(env, text: str) -> str | None:
    """Why `labkit kube-proxy render` must not print `text` now, or None. Until debug-ruleset has
    passed, any output with catalog's rules (its comments or KUBE-SVC chain): restored onto node2,
    it repairs catalog's chains as kube-proxy's full sync would, without finding the damage. (node1's
    live chains for catalog are the same, and comparing with them is the exercise's own hint; a
    whole node copied from node1 carries node1's own chains, which the check names.) Rendered from a
    file holding legacy without its service-proxy-name label, it is the whole answer of
    clusterip-by-hand: kube-proxy's chain names, comments and probabilities for legacy's port,
    ready to restore. Until that exercise has passed, render withholds any output that carries
    legacy's service port name (its comments) or its KUBE-SVC chain (whatever protocol or
    namespace the file gives: the comments still name the port); a file without legacy renders."""
    broken = service_port_name("default", BROKEN_SERVICE, BROKEN_PORT_NAME)
    if BROKEN_EXERCISE not in env.state.credit and (broken in text or service_chain(broken, "tcp") in text):
        # a whole node's rules as kube-proxy writes them, restored onto node2, repair catalog's chains
        # as kube-proxy's full sync does: the exercise asks to find the damage and repair it by hand
        return (f"kube-proxy's rules for {broken} withheld: exercise {BROKEN_EXERCISE} of lab {env.lab.id} asks you to "
                f"find what is wrong in {BROKEN_NODE}'s chains for {BROKEN_SERVICE} and repair it by hand, not to "
                f"load what kube-proxy would write (that is kube-proxy's repair); `labkit kube-proxy render` shows "
                f"them once that exercise has passed. Render a file without {BROKEN_SERVICE}")
    if HAND_BUILT_EXERCISE in env.state.credit:
        return None
    params = env.lab.exercise(HAND_BUILT_EXERCISE).params
    spn = service_port_name("default", params["service"], params["port_name"])
    if spn not in text and service_chain(spn, "tcp") not in text:
        return None
    return (f"kube-proxy's rules for {spn} withheld: exercise {HAND_BUILT_EXERCISE} of lab {env.lab.id} asks you "
            "to write them yourself, chain names and comments included; `labkit kube-proxy render` shows them once "
            f"that exercise has passed. Render a file without {params['service']} (or with its "
            "service.kubernetes.io/service-proxy-name label, which kube-proxy leaves alone)")


def up(env):
    state = live.build(env, SCENARIO, log=env.log)
    start_watchers(env, state)
    env.log("each node logs the connections it is asked for on its node ports")
    for node in state.node_names():
        judge.save_built(env, node, save(env.netns_name(node)))
    break_rules(env, state)
    env.log(f"edited {BROKEN_SERVICE}'s rules on {BROKEN_NODE}")


def break_rules(env, state):
    """Two mistakes in the live chains of BROKEN_SERVICE on BROKEN_NODE: the third jump of its
    KUBE-SVC chain loses its probability (so the fourth endpoint is never chosen and the third
    gets half), and the second endpoint's KUBE-SEP chain DNATs to the wrong port."""
    netns = env.netns_name(BROKEN_NODE)
    nat = parse(save(netns, "nat")).table("nat")
    spn = service_port_name("default", BROKEN_SERVICE, BROKEN_PORT_NAME)
    svc_chain = service_chain(spn, "tcp")
    jumps = [r for r in nat.chain(svc_chain).rules if r.target and r.target.startswith("KUBE-SEP-")]
    second = jumps[1].target
    lines = [f":{svc_chain} - [0:0]", f":{second} - [0:0]"]
    for rule in nat.chain(svc_chain).rules:
        text = rule.text
        if rule is jumps[2]:
            text = re.sub(r" -m statistic --mode random --probability \S+", "", text)
        lines.append(text)
    for rule in nat.chain(second).rules:
        lines.append(re.sub(r"(--to-destination [\d.]+:)(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 1), rule.text))
    restore(netns, "*nat\n" + "\n".join(lines) + "\nCOMMIT\n", noflush=True)
    judge.record_mark(env, BROKEN_MARK)
    (Path(env.dir) / "broken-chains.json").write_text(json.dumps(catalog_chains(state, BROKEN_NODE, save(netns, "nat"))))


def is_up(env):
    if not live.is_up(env):
        return False
    return all(procs.running(procs.owner_token(env, watcher_tag(n))) for n in live.load(env).node_names())


# -- traffic-policy: the requests a student sends by hand to the NodePorts it asks about -------------

TRAFFIC_POLICY = "traffic-policy"
SYNWATCH = Path(synwatch.__file__).resolve()


def watcher_tag(node: str) -> str:
    return f"synwatch-{node}"


def watch_log(env, node: str) -> Path:
    return Path(env.dir) / f"synwatch-{node}.jsonl"


def start_watchers(env, state, timeout: float = 10.0) -> None:
    """On each node, labkit/netlab/synwatch.py logs every TCP connection asked of one of the node's
    addresses on a port of the NodePort range, whoever sends it: a request by hand (curl, wget, nc,
    python in `labkit shell kube-proxy client`) to the NodePorts traffic-policy asks about shows its
    outcome as surely as labkit's own curl does, and the check must know when it happened. It reads
    packets as the node's interfaces receive them (before kube-proxy's DNAT, and also those a rule
    drops); nothing is added to the node's rules."""
    low, high = state.node_port_range()
    for node in state.node_names():
        path = watch_log(env, node)
        env.ledger.record("path", path=str(path))
        path.touch()
        addresses = [a.split("/")[0] for a in live.proxier_config(state, node).local_addresses]
        argv = [sys.executable, "-I", "-S", str(SYNWATCH), "--log", str(path), "--ports", f"{low}-{high}"]
        for address in addresses:
            argv += ["--address", address]
        if not procs.spawn_until_ready(env, watcher_tag(node), argv, netns=env.netns_name(node), timeout=timeout):
            raise LabkitError(f"the connection log of {node} did not start; see {Path(env.dir) / 'logs'}")


def graded_node_ports(env, state) -> dict[int, str]:
    """{node port: Service} of the Services traffic-policy asks about, as the lab built them and as
    they are now (a NodePort the student moved shows the same policy), and of any Service the
    student made that sends to their pods (labkit.kubeproxy.situations.outcome_node_ports)."""
    out = outcome_node_ports(env, load_scenario(SCENARIO))
    for port, name in outcome_node_ports(env, state).items():
        out.setdefault(port, name)
    return out


def hand_tries(env, since: float, state=None) -> list[dict]:
    """Every connection sent since `since` (epoch seconds) to a node's address on a NodePort of the
    Services traffic-policy asks about, from any sender, oldest first, as the nodes' connection
    logs (start_watchers) have them: [{at, time, src, node, dst, dport, service}]. A port counts
    when it is graded now or was at the request's time (a copy of the situation deleted since:
    labkit.kubeproxy.situations.graded_then). labkit's own
    curl keeps the prediction before it sends (labkit.kubeproxy.situations), so its requests come
    after that and change nothing. `state`: the cluster state (default: the running lab's)."""
    state = state if state is not None else live.load(env)
    ports = graded_node_ports(env, state)
    history = outcome_port_history(env)     # a copy of the situation deleted since was graded then
    hosts = {state.node_address(n): n for n in state.node_names()}
    hosts.update({a: h["name"] for h in state.hosts for a in h["addresses"]})
    hosts.update({p["status"]["podIP"]: f"pod {p['metadata']['name']}" for p in state.pods})
    found = []
    for node in state.node_names():
        try:
            lines = watch_log(env, node).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or float(entry.get("at", 0)) < since:
                continue
            service = ports.get(entry.get("dport")) or graded_then(history, float(entry["at"])).get(entry.get("dport"))
            if service is None:
                continue
            found.append({"at": float(entry["at"]), "time": time.strftime("%H:%M:%S", time.localtime(entry["at"])),
                          "src": entry.get("src"), "node": node, "dst": entry.get("dst"), "dport": entry["dport"],
                          "service": service,
                          "who": hosts.get(entry.get("src"), "a sender outside the lab"),
                          "what": f"{hosts.get(entry.get('src'), 'a sender outside the lab')} ({entry.get('src')}) to "
                                  f"{node}'s {entry.get('dst')}:{entry['dport']} "
                                  f"({service})"})
    return sorted(found, key=lambda t: t["at"])


def first_try(env, since: float, state=None) -> dict | None:
    tries = hand_tries(env, since, state)
    return tries[0] if tries else None


def earliest_try(env, state=None) -> dict | None:
    """The first request sent to traffic-policy's NodePorts since the exercise was built, or one
    kept before a reset (labkit.predictions.kept_trial; marked before_reset), whichever came first."""
    from labkit import predictions
    tried = first_try(env, env.state.ready_time(TRAFFIC_POLICY), state)
    earlier = predictions.kept_trial(env.lab.id, TRAFFIC_POLICY)
    if earlier is not None and (tried is None or earlier["at"] <= tried["at"]):
        tried = {**earlier, "before_reset": True}
    return tried


def hosts(env):
    return live.hosts(env)


def access(env):
    state = live.load(env)
    rows = ["| host | what | address |", "|---|---|---|"]
    for node in state.node_names():
        rows.append(f"| {node} | node (kube-proxy's rules live here) | {state.node_address(node)} |")
    for host in state.hosts:
        extra = f" (and {host['addresses'][1]}–{host['addresses'][-1]})" if len(host["addresses"]) > 1 else ""
        rows.append(f"| {host['name']} | outside the cluster | {host['addresses'][0]}{extra} |")
    for pod in state.pods:
        rows.append(f"| {pod['metadata']['name']} | pod on {pod['spec']['nodeName']} | {pod['status']['podIP']} |")
    return "\n".join([
        "## Your cluster",
        "",
        *rows,
        "",
        "- `labkit shell kube-proxy HOST` opens a shell in a host (`iptables` there is iptables-legacy).",
        "- `labkit kube-proxy get services|endpointslices|pods [-o yaml]` shows the cluster state.",
        "- `labkit kube-proxy curl --from HOST --to SERVICE|IP:PORT -n 20` sends real requests.",
        "- `labkit kube-proxy graph --node node1 [--service web]` draws a node's chains.",
        "- `labkit trace --node node1 --src 10.244.1.2 --dst 10.96.0.10:80` follows one packet through them.",
        "- `labkit kube-proxy apply -f FILE` changes Services (kube-proxy then syncs both nodes).",
    ])


# -- one exercise afresh, and what that would revert ---------------------------------------------------


def scenario_service(name: str) -> dict:
    """The Service as the lab builds it (the API server's defaults and allocations applied)."""
    return load_scenario(SCENARIO).service(name)


def service_changes(state, name: str) -> list[str]:
    """The fields of a Service the student changed since the lab was built ("spec.type", ...)."""
    built, now = scenario_service(name), state.service(name)
    if now is None:
        return ["deleted"]
    changed = sorted(f"spec.{k}" for k in (built["spec"].keys() | now["spec"].keys())
                     if built["spec"].get(k) != now["spec"].get(k))
    if (built["metadata"].get("labels") or {}) != (now["metadata"].get("labels") or {}):
        changed.append("metadata.labels")
    if (built["metadata"].get("annotations") or {}) != (now["metadata"].get("annotations") or {}):
        changed.append("metadata.annotations")
    return changed


def outside_openings(state, service: str, pods: set[str]) -> dict[tuple[str, str], str]:
    """{(namespace, name): how} for each Service but `service` whose endpoints include one of
    `pods` (addresses) and that clients outside the cluster reach: a node port on every node, a
    load balancer, an external IP (what kube-proxy opens beyond the cluster IP: proxier.go,
    syncProxyRules, writes KUBE-NODEPORTS, KUBE-EXT and external-IP rules only for these)."""
    out = {}
    for svc in state.services:
        meta, spec = svc["metadata"], svc["spec"]
        key = (meta.get("namespace") or "default", meta["name"])
        if key == ("default", service):
            continue
        addresses = {a for sl in state.slices_of(*key) for ep in sl.get("endpoints") or []
                     for a in ep.get("addresses") or []}
        if not addresses & pods:
            continue
        how = [f"node port {p['nodePort']}" for p in spec.get("ports") or [] if p.get("nodePort")]
        how += [f"external IP {ip}" for ip in spec.get("externalIPs") or []]
        how += ["a load balancer"] if spec.get("type") == "LoadBalancer" else []
        if how:
            out[key] = ", ".join(how)
    return out


def service_addresses(state, service: str) -> set[str]:
    return {a for sl in state.slices_of("default", service) for ep in sl.get("endpoints") or []
            for a in ep.get("addresses") or []}


def own_openings(state, exercise_id: str | None) -> list[tuple[str, str]]:
    """nodeport's part beyond its Service: the student's own Services (none of the lab's) that open
    web's pods to clients outside the cluster, which the exercise's check fails and its reset
    deletes (a copy of each goes to saved/ first)."""
    if exercise_id not in (None, "nodeport"):
        return []
    service = SERVICES_OF["nodeport"][0]
    ours = {(s["metadata"].get("namespace") or "default", s["metadata"]["name"])
            for s in load_scenario(SCENARIO).services}
    return sorted(k for k in outside_openings(state, service, service_addresses(state, service)) if k not in ours)


def delete_own_openings(env) -> None:
    """Delete own_openings (kube-proxy syncs the deletion); clusterip-by-hand's work, which a sync
    deletes, is put back after it."""
    state = live.load(env)
    refs = own_openings(state, "nodeport")
    if not refs:
        return
    keep = {n: _hand_built_of(env, state, n) for n in state.node_names()}
    live.delete_objects(env, [("Service", namespace, name) for namespace, name in refs])
    for node, part in keep.items():
        _put_back(env, node, part)


def restore_services(env, names: list[str]) -> None:
    """Apply the scenario's version of each changed Service (kube-proxy syncs the change). The
    sync rewrites KUBE-SERVICES and deletes the service chains kube-proxy does not know: the rules
    the student wrote for clusterip-by-hand (another exercise's work) are put back after it."""
    state = live.load(env)
    documents = [scenario_service(n) for n in names if service_changes(state, n)]
    if not documents:
        return
    keep = {} if HAND_BUILT_SERVICE in names else {n: _hand_built_of(env, state, n) for n in state.node_names()}
    live.apply_documents(env, documents, "labkit reset")
    for node, part in keep.items():
        _put_back(env, node, part)


# -- a node's rules as text, by table and chain (iptables-save's form) ---------------------------------


def _tables(text: str) -> dict:
    """iptables-save text as {table: {chain: {"decl": ":CHAIN ...", "rules": ["-A CHAIN ...", ...]}}}."""
    tables: dict = {}
    table = None
    for line in text.splitlines():
        if line.startswith("*"):
            table = tables.setdefault(line[1:], {})
        elif line.startswith(":") and table is not None:
            table[line[1:].split()[0]] = {"decl": line, "rules": []}
        elif line.startswith("-A ") and table is not None:
            table[line.split()[1]]["rules"].append(line)
    return tables


def _text(tables: dict) -> str:
    out = []
    for name, chains in tables.items():
        out.append(f"*{name}")
        out += [c["decl"] for c in chains.values()]
        out += [r for c in chains.values() for r in c["rules"]]
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def _reference(env, state, node: str) -> str:
    return judge.reference_rules(judge.built_rules(env, node), state.objects(), live.proxier_config(state, node))


def _hand_built_of(env, state, node: str) -> dict:
    """clusterip-by-hand's work on a node (hand_built_part): {"chains": {name: decl and rules},
    "entries": [(chain, position, rule line)]} from its live nat table."""
    text = save(env.netns_name(node))
    if not judge.built_path(env, node).exists():
        return {"chains": {}, "entries": []}
    ignore = hand_built_part(state, text, _reference(env, state, node))
    nat = _tables(text).get("nat", {})
    chains = {name: c for name, c in nat.items() if ignore("nat", name, None)}
    entries = [(name, i, line) for name, c in nat.items() if name not in chains
               for i, line in enumerate(c["rules"]) if ignore("nat", name, parse_rule(line))]
    return {"chains": chains, "entries": entries}


def _without_hand_built(env, state, node: str, text: str) -> str:
    part = _hand_built_of(env, state, node)
    tables = _tables(text)
    nat = tables.get("nat", {})
    for name in part["chains"]:
        nat.pop(name, None)
    gone = {line for _c, _i, line in part["entries"]}
    for chain in nat.values():
        chain["rules"] = [r for r in chain["rules"] if r not in gone]
    return _text(tables)


def _put_back(env, node: str, part: dict) -> None:
    """Load clusterip-by-hand's work (from _hand_built_of) into a node's nat table again, once: its
    chains, and its rules in kube-proxy's chains at their old places (the table is written whole,
    so nothing is doubled)."""
    if not part["chains"] and not part["entries"]:
        return
    netns = env.netns_name(node)
    tables = _tables(save(netns))
    nat = tables.setdefault("nat", {})
    for name, chain in part["chains"].items():
        nat[name] = {"decl": chain["decl"], "rules": list(chain["rules"])}
    for name, position, line in part["entries"]:
        if name in nat and line not in nat[name]["rules"]:
            nat[name]["rules"].insert(min(position, len(nat[name]["rules"])), line)
    restore(netns, _text({"nat": nat}), noflush=False)


def rebuild_node_rules(env, state, node: str, *, keep_hand_built: bool = True) -> None:
    """A node's rules as the lab builds them for the current Services: the node as built, with
    kube-proxy's full sync of the current objects on top (what judge.reference_rules reconstructs),
    written whole, so that every chain and rule typed since is gone; clusterip-by-hand's work is
    put back when `keep_hand_built` (another exercise's)."""
    from labkit.kubeproxy.proxier import render
    netns = env.netns_name(node)
    part = _hand_built_of(env, state, node) if keep_hand_built else {"chains": {}, "entries": []}
    built = judge.built_rules(env, node)
    restore(netns, built, noflush=False)
    restore(netns, render(state.objects(), live.proxier_config(state, node),
                          existing_nat_chains=parse(built).chain_names("nat")), noflush=True)
    _put_back(env, node, part)


def saved_dir() -> Path:
    return paths.answers_root() / "kube-proxy" / "saved"


def keep_aside(env, exercise_id: str, node: str) -> Path:
    """A copy of the node's live rules before a reset rewrites them (the student's work)."""
    directory = saved_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{exercise_id}-{node}-{time.strftime('%Y%m%d-%H%M%S')}.rules"
    path.write_text(save(env.netns_name(node)))
    return path


def catalog_chains(state, node: str, rules_text: str | None = None) -> dict[str, list[str]]:
    """The rule lines of catalog's KUBE-SVC chain and of the KUBE-SEP chains kube-proxy writes for
    it, as `rules_text` (default: kube-proxy's render for the node) has them."""
    spn = service_port_name("default", BROKEN_SERVICE, BROKEN_PORT_NAME)
    svc_chain = service_chain(spn, "tcp")
    names = [svc_chain] + sorted(endpoint_chain(spn, "tcp", f"{ep['addresses'][0]}:{sl['ports'][0]['port']}")
                                 for sl in state.slices_of("default", BROKEN_SERVICE) for ep in sl["endpoints"])
    text = rules_text if rules_text is not None else judge.reference_rules(
        "", state.objects(), live.proxier_config(state, node))
    nat = parse(text).table("nat")
    return {n: [r.text for r in nat.chain(n).rules] if nat and nat.chain(n) else [] for n in names}


def hand_built_part(state, live_text: str, reference_text: str):
    """What of a node's nat table is clusterip-by-hand's work, as ignore(table, chain, rule) for
    judge.structure_differences: the chains kube-proxy would write for legacy, the chains the
    reference does not have that rules aimed at legacy's cluster IP (or at legacy's chains) lead
    to, and those rules. Anything else hand-made (a bypass in front of catalog's chains, say) is
    not legacy's."""
    svc = state.service(HAND_BUILT_SERVICE) or scenario_service(HAND_BUILT_SERVICE)
    ip = svc["spec"]["clusterIP"]
    nat = parse(live_text).table("nat")
    ref = parse(reference_text).table("nat")
    chains = nat.chains if nat else {}
    own = {n for n in chains if ref is None or ref.chain(n) is None}
    names = judge.kube_proxy_chain_names(state) - judge.kube_proxy_chain_names(state, exclude={HAND_BUILT_SERVICE})

    def aimed(rule) -> bool:
        dst = rule.cond("dst")
        return dst is not None and not dst.negated and str(dst.value.network_address) == ip

    part = set(names)
    entries = [r for n, c in chains.items() if n not in part for r in c.rules if aimed(r) or r.target in names]
    todo = [r.target for r in entries if r.target in own] + [n for n in names if n in chains]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        part.add(name)
        todo += [r.target for r in chains[name].rules if r.target in own]

    def ignore(table, chain, rule) -> bool:
        if table != "nat":
            return False
        return chain in part or (rule is not None and (aimed(rule) or rule.target in part))
    return ignore


def reset_exercise(env, exercise_id: str) -> None:
    """Restore exactly the exercise's part as the lab built it, nothing of the other exercises'.
    Answer files and the traffic-policy prediction labkit kept are never touched; the rules the
    student wrote were copied to saved/ before (keep_student_work)."""
    _reset_part(env, exercise_id)
    if exercise_id in UNTOUCHED_BY:
        restore_untouched(env, live.load(env))


def _reset_part(env, exercise_id: str) -> None:
    state = live.load(env)
    if exercise_id == "follow-the-chain":
        if any(d.table not in UNTOUCHED_TABLES for d in reverted(env, state, exercise_id).get(FOLLOW_NODE, [])):
            rebuild_node_rules(env, state, FOLLOW_NODE)
        return
    if exercise_id == "debug-ruleset":
        restore_services(env, SERVICES_OF[exercise_id])
        # catalog's chains on the other nodes as kube-proxy writes them (a repair typed into the
        # wrong node's shell), then BROKEN_NODE as built and broken again
        sync_services(env, _syncs_of(live.load(env), exercise_id))
        state = live.load(env)
        rebuild_node_rules(env, state, BROKEN_NODE)
        break_rules(env, state)
        return
    if exercise_id == "clusterip-by-hand":
        for node in state.node_names():
            netns = env.netns_name(node)
            without = _tables(_without_hand_built(env, state, node, save(netns)))
            restore(netns, _text({"nat": without.get("nat", {})}), noflush=False)
        restore_services(env, SERVICES_OF[exercise_id])
        judge.record_mark(env, HAND_BUILT_MARK)
        return
    if exercise_id == "nodeport":
        delete_own_openings(env)
    restore_services(env, SERVICES_OF.get(exercise_id, []))
    names = _syncs_of(live.load(env), exercise_id)
    if names:
        sync_services(env, names)


def sync_services(env, names: list[str]) -> None:
    """kube-proxy's partial sync of `names` on every node (syncProxyRules with tryPartialSync,
    pkg/proxy/iptables/proxier.go): their chains are kube-proxy's again, whatever was typed into
    them; clusterip-by-hand's work, which a sync deletes, is put back."""
    from labkit.errors import LabkitError
    from labkit.kubeproxy.sync import sync_node
    state = live.load(env)
    for node in state.node_names():
        keep = _hand_built_of(env, state, node)
        changed = {f"default/{n}" for n in names}
        config = live.proxier_config(state, node)
        try:
            sync_node(env.netns_name(node), state.objects(), config, changed_services=changed)
        except LabkitError:
            # iptables-restore refused the partial sync (e.g. a chain it would delete is still
            # referenced): as kube-proxy does after a failed restore (needFullSync), a full sync
            changed = None
            sync_node(env.netns_name(node), state.objects(), config)
        judge.record_sync(env, node, changed)
        _put_back(env, node, keep)


def broken_chains(env) -> dict[str, list[str]] | None:
    try:
        return json.loads((Path(env.dir) / "broken-chains.json").read_text())
    except (OSError, ValueError):
        return None


SOLVED_BY_LABKIT = "solved-by-labkit.json"


FOLLOW_NODE = "node1"        # follow-the-chain reads this node's rules (and changes nothing)


def expected_rules(env, state, node: str) -> str:
    """A node's rules as the lab leaves them for the current Services: kube-proxy's (the node as
    built with its sync on top), and on BROKEN_NODE catalog's chains as the lab broke them, unless a
    kube-proxy sync has rewritten them since."""
    text = _reference(env, state, node)
    broken = broken_chains(env)
    resynced = [s for s in judge.syncs_since(env, BROKEN_MARK) if s["node"] == node
                and (s["services"] is None or f"default/{BROKEN_SERVICE}" in s["services"])]
    if node == BROKEN_NODE and broken and not resynced:
        text += "*nat\n" + "".join(f":{c} - [0:0]\n" for c in broken)
        text += "".join(line + "\n" for lines in broken.values() for line in lines) + "COMMIT\n"
    return text


def rule_work(env, state) -> dict[str, list]:
    """Every difference of each node's nat and filter tables from the rules as the lab leaves them
    (expected_rules), and of its mangle and raw tables from the node as built (untouched_differences):
    {node: [(RuleDifference, whether it is clusterip-by-hand's work)]}."""
    out: dict = {}
    for node in state.node_names():
        if not judge.built_path(env, node).exists():
            continue        # a lab built before labkit kept this record: nothing to compare with
        text = save(env.netns_name(node))
        expected = expected_rules(env, state, node)
        ignore = hand_built_part(state, text, expected)
        for d in judge.structure_differences(node, text, expected):
            rule = parse_rule(d.rule) if d.rule else None
            out.setdefault(node, []).append((d, ignore(d.table, d.chain, rule)))
        for d in untouched_differences(env, node, text):
            out.setdefault(node, []).append((d, False))
    return out


# mangle and raw: kubelet's KUBE-IPTABLES-HINT and the canaries, as `labkit run` wrote them. No
# exercise writes there (kube-proxy's rules are in nat and filter), so every exercise that judges
# a node's rules wants them as built, and its reset puts them back (UNTOUCHED_BY).
UNTOUCHED_TABLES = ("mangle", "raw")
BUILTIN_CHAINS = {"mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"), "raw": ("PREROUTING", "OUTPUT")}
UNTOUCHED_BY = ("follow-the-chain", "nodeport", "session-affinity", "debug-ruleset", "clusterip-by-hand")


def untouched_built(env, node: str) -> str:
    """The node's mangle and raw tables as the lab built them, as iptables-restore input (a table
    the kernel showed only once it was used, absent from the record, is empty)."""
    built = parse(judge.built_rules(env, node))
    text = ""
    for table in UNTOUCHED_TABLES:
        if built.table(table) is None:
            text += f"*{table}\n" + "".join(f":{c} ACCEPT [0:0]\n" for c in BUILTIN_CHAINS[table]) + "COMMIT\n"
    tables = _tables(judge.built_rules(env, node))
    return _text({t: tables[t] for t in UNTOUCHED_TABLES if t in tables}) + text


def untouched_differences(env, node: str, text: str) -> list:
    """Where `text` (a node's iptables-save) differs from its mangle and raw tables as built; a
    built-in chain the kernel does not show yet counts as empty."""
    return judge.structure_differences(node, text, untouched_built(env, node), tables=UNTOUCHED_TABLES,
                                       ignore=lambda table, chain, rule: rule is None and chain in BUILTIN_CHAINS[table])


def restore_untouched(env, state) -> None:
    """Put each node's mangle and raw tables back as built, where they differ."""
    for node in state.node_names():
        if judge.built_path(env, node).exists() and untouched_differences(env, node, save(env.netns_name(node))):
            restore(env.netns_name(node), untouched_built(env, node), noflush=False)


def _synced(env, state, node: str, services: list[str]) -> tuple[set, set]:
    """What kube-proxy's partial sync of `services` writes on a node: the (table, chain)s it
    declares (and so rewrites whole) and the chains it deletes (render's -X lines)."""
    from labkit.kubeproxy.proxier import render
    text = render(state.objects(), live.proxier_config(state, node),
                  existing_nat_chains=parse(save(env.netns_name(node), "nat")).chain_names("nat"),
                  changed_services={f"default/{n}" for n in services})
    declared, deleted, table = set(), set(), None
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            declared.add((table, line[1:].split()[0]))
        elif line.startswith("-X "):
            deleted.add(line.split()[1])
    return declared, deleted


def _syncs_of(state, exercise_id: str) -> list[str]:
    """The Services whose chains a reset of the exercise has kube-proxy sync on every node."""
    names = SERVICES_OF.get(exercise_id, [])
    if exercise_id == "clusterip-by-hand":
        return [n for n in names if service_changes(state, n)]      # only a Service put back is synced
    return names


def reverted(env, state, exercise_id: str | None) -> dict[str, list]:
    """{node: differences} that a reset of `exercise_id` (None: the whole lab) reverts, exactly:
    follow-the-chain and debug-ruleset rewrite their node whole (but for clusterip-by-hand's work),
    clusterip-by-hand removes its own work, and a Service's exercise has kube-proxy sync the Service
    (rewriting every chain that sync writes)."""
    own_node = {"follow-the-chain": FOLLOW_NODE, "debug-ruleset": BROKEN_NODE}.get(exercise_id)
    syncs = _syncs_of(state, exercise_id) if exercise_id else []
    out = {}
    for node, items in rule_work(env, state).items():
        declared, deleted = _synced(env, state, node, syncs) if syncs else (set(), set())
        found = []
        for d, hand_built in items:
            if exercise_id is None or (exercise_id == "clusterip-by-hand" and hand_built):
                found.append(d)
            elif hand_built:
                continue
            elif d.table in UNTOUCHED_TABLES:
                if exercise_id in UNTOUCHED_BY:
                    found.append(d)
            elif node == own_node or (d.table, d.chain) in declared or (d.kind == "extra chain" and d.chain in deleted):
                found.append(d)
        if found:
            out[node] = found
    return out


def _work_of(env, state, exercise_id: str) -> dict:
    """What an exercise's part of the lab is now: its Services and the rule differences its reset
    reverts (comparable with what `labkit solve` left)."""
    out = {"services": {n: state.service(n) for n in SERVICES_OF.get(exercise_id, [])}}
    out["rules"] = sorted([node, *map(str, d.key())] for node, found in reverted(env, state, exercise_id).items()
                          for d in found)
    return json.loads(json.dumps(out))


def record_solution(env, exercise_id: str) -> None:
    """Called by the reference solutions: what `labkit solve` left is not the student's work, so a
    reset that reverts just that does not ask."""
    path = Path(env.dir) / SOLVED_BY_LABKIT
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[exercise_id] = _work_of(env, live.load(env), exercise_id)
    path.write_text(json.dumps(data))


def _left_by_labkit(env, state, exercise_id: str) -> bool:
    try:
        data = json.loads((Path(env.dir) / SOLVED_BY_LABKIT).read_text())
    except (OSError, ValueError):
        return False
    return exercise_id in data and data[exercise_id] == _work_of(env, state, exercise_id)


def _work_on_rules(env, state, exercise_id: str | None) -> dict[str, list]:
    """{node: differences} that a reset of `exercise_id` reverts and that are the student's (not
    what `labkit solve` left)."""
    if exercise_id and _left_by_labkit(env, state, exercise_id):
        return {}
    return reverted(env, state, exercise_id)


def student_work(env, exercise_id: str | None) -> list[str]:
    """What a reset of `exercise_id` (None: the whole lab) would revert of the student's work:
    changed Services, and every chain and rule of any node that differs from the rules as the lab
    left them. Answer files (and the kept traffic-policy prediction) are never reverted."""
    state = live.load(env)
    wanted = [exercise_id] if exercise_id else list(SERVICES_OF)
    out = []
    for ex in wanted:
        if _left_by_labkit(env, state, ex):
            continue        # as `labkit solve` left it: not the student's work
        for name in SERVICES_OF.get(ex, []):
            changed = service_changes(state, name)
            if changed:
                what = "deleted" if changed == ["deleted"] else f"changed: {', '.join(changed)}"
                out.append(f"Service {name} as you changed it ({what}), put back as the lab built it")
    for namespace, name in own_openings(state, exercise_id):
        out.append(f"Service {namespace}/{name} of yours, which opens web's pods to clients outside the cluster, "
                   f"deleted (a copy goes to {saved_dir()})")
    for node, found in _work_on_rules(env, state, exercise_id).items():
        shown = ", ".join(sorted({f"{d.table} {d.chain}" for d in found}))
        out.append(f"your {len(found)} change{'s' if len(found) != 1 else ''} to {node}'s rules, in {shown} "
                   f"(a copy of {node}'s rules goes to {saved_dir()})")
    return out


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Before a reset: a copy of the rules of every node on which it reverts the student's work; and
    a request sent by hand to traffic-policy's NodePorts since that exercise was built is kept
    (labkit.predictions.keep_trial): a reset of the whole lab starts the nodes' connection logs
    afresh, and a reset of the exercise has its check read them from then on, and neither may turn
    a prediction written after the request into one written before it."""
    state = live.load(env)
    said = [f"your {node} rules before the reset: {keep_aside(env, exercise_id or 'lab', node)}"
            for node in _work_on_rules(env, state, exercise_id)]
    for namespace, name in own_openings(state, exercise_id):
        directory = saved_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{exercise_id or 'lab'}-service-{name}-{time.strftime('%Y%m%d-%H%M%S')}.yaml"
        path.write_text(yaml.safe_dump(state.service(name, namespace), sort_keys=False))
        said.append(f"your Service {namespace}/{name} before the reset: {path}")
    if exercise_id in (None, TRAFFIC_POLICY):
        from labkit import predictions
        found = first_try(env, env.state.ready_time(TRAFFIC_POLICY))
        if found is not None:
            kept = predictions.keep_trial(env.lab.id, TRAFFIC_POLICY, found)
            said.append(predictions.trial_note(
                TRAFFIC_POLICY, f"labkit keeps that you sent a request to {TRAFFIC_POLICY}'s NodePorts yourself "
                f"({kept['what']}, at {kept['time']}): a prediction written or changed after that earns no points, "
                "after this reset too"))
    return said
