"""The kube-proxy lab's environment: a two-node cluster in network namespaces, programmed like
kube-proxy (labkit.kubeproxy.live), plus the damage the debug-ruleset exercise asks to repair."""

import json
import re
import time
from pathlib import Path

from labkit import paths
from labkit.kubeproxy import judge, live
from labkit.kubeproxy.chains import endpoint_chain, service_chain, service_port_name
from labkit.kubeproxy.cluster_state import load_scenario
from labkit.netfilter import parse, restore, save

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "cluster.yaml"
# debug-ruleset: these rules of one node are edited by hand after kube-proxy's first sync
BROKEN_NODE, BROKEN_SERVICE, BROKEN_PORT_NAME = "node2", "catalog", "http"


# The Services each exercise changes (reset_exercise puts them back as the scenario has them).
SERVICES_OF = {"nodeport": ["web"], "session-affinity": ["api"], "traffic-policy": ["shop-cluster", "shop-local"],
               "debug-ruleset": ["catalog"], "clusterip-by-hand": ["legacy"]}
BROKEN_MARK = "debug-ruleset broken"
HAND_BUILT_SERVICE = "legacy"


def up(env):
    state = live.build(env, SCENARIO, log=env.log)
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
    return live.is_up(env)


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


def restore_services(env, names: list[str]) -> None:
    """Apply the scenario's version of each changed Service (kube-proxy syncs the change)."""
    state = live.load(env)
    if not names:
        return
    documents = [scenario_service(n) for n in names if service_changes(state, n)]
    # kube-proxy's sync rewrites KUBE-SERVICES and deletes the chains it does not know: the rules
    # the student wrote for clusterip-by-hand (another exercise's work) are put back after it
    keep = {} if HAND_BUILT_SERVICE in names else {n: hand_built_lines(env, state, n) for n in state.node_names()}
    if documents:
        live.apply_documents(env, documents, "labkit reset")
    # and the Services' chains are kube-proxy's again on every node, whatever was typed into them
    # (a partial sync of these Services: proxier.go's syncProxyRules with tryPartialSync)
    from labkit.kubeproxy.sync import sync_node
    state = live.load(env)
    from labkit.errors import LabkitError
    for node in state.node_names():
        changed = {f"default/{n}" for n in names}
        config = live.proxier_config(state, node)
        try:
            sync_node(env.netns_name(node), state.objects(), config, changed_services=changed)
        except LabkitError:
            # iptables-restore refused the partial sync (hand edits elsewhere in the node's nat
            # table, e.g. a chain it would delete is still referenced): as kube-proxy does after a
            # failed restore (syncProxyRules leaves needFullSync set), a full sync
            changed = None
            sync_node(env.netns_name(node), state.objects(), config)
        judge.record_sync(env, node, changed)
    for node, lines in keep.items():
        if lines:
            restore(env.netns_name(node), "*nat\n" + "\n".join(lines) + "\nCOMMIT\n", noflush=True)


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


def hand_built_rules(env, state, node: str) -> list[str]:
    """What the student wrote on a node for clusterip-by-hand: rules aimed at legacy's cluster IP
    and service chains kube-proxy would not write (they go at its next sync)."""
    svc = state.service(HAND_BUILT_SERVICE) or scenario_service(HAND_BUILT_SERVICE)
    ip = svc["spec"]["clusterIP"]
    if not judge.built_path(env, node).exists():
        return []        # a lab built before labkit kept this record: nothing to compare with
    current = parse(save(env.netns_name(node), "nat")).table("nat")
    reference = parse(judge.reference_rules(judge.built_rules(env, node), state.objects(),
                                            live.proxier_config(state, node))).table("nat")
    others = judge.kube_proxy_chain_names(state, exclude={HAND_BUILT_SERVICE})
    out = [f"chain {name}" for name in current.chains if reference.chain(name) is None and name not in others]
    for name, chain in current.chains.items():
        for rule in chain.rules:
            dst = rule.cond("dst")
            if dst is not None and not dst.negated and str(dst.value.network_address) == ip:
                out.append(f"rule {rule.text}")
    return out


def hand_built_lines(env, state, node: str) -> list[str]:
    """clusterip-by-hand's rules on a node as iptables-restore input that puts them back after a
    full sync: the chains kube-proxy would not write (declared, with their rules) and the rules
    aimed at legacy's cluster IP in kube-proxy's chains (inserted first, in their order)."""
    if not judge.built_path(env, node).exists():
        return []
    svc = state.service(HAND_BUILT_SERVICE) or scenario_service(HAND_BUILT_SERVICE)
    ip = svc["spec"]["clusterIP"]
    current = parse(save(env.netns_name(node), "nat")).table("nat")
    reference = parse(judge.reference_rules(judge.built_rules(env, node), state.objects(),
                                            live.proxier_config(state, node))).table("nat")
    others = judge.kube_proxy_chain_names(state, exclude={HAND_BUILT_SERVICE})
    own = [name for name in current.chains if reference.chain(name) is None and name not in others]
    lines = [f":{name} - [0:0]" for name in own]
    lines += [rule.text for name in own for rule in current.chain(name).rules]
    for name, chain in current.chains.items():
        if name in own:
            continue
        aimed = [r for r in chain.rules if r.target in own or (r.cond("dst") is not None and not r.cond("dst").negated
                 and str(r.cond("dst").value.network_address) == ip)]
        for rule in reversed(aimed):
            lines.append(rule.text.replace(f"-A {name} ", f"-I {name} 1 ", 1))
    return lines


def reset_exercise(env, exercise_id: str) -> None:
    """Restore only what the exercise changes. Answer files are never touched; rules the student
    wrote are copied to the answers directory's saved/ before they are rewritten."""
    state = live.load(env)
    if exercise_id == "debug-ruleset":
        restore_services(env, SERVICES_OF[exercise_id])
        state = live.load(env)
        netns = env.netns_name(BROKEN_NODE)
        broken = broken_chains(env)
        current = catalog_chains(state, BROKEN_NODE, save(netns, "nat"))
        if broken is not None and current != broken:
            env.log(f"your {BROKEN_NODE} rules before the reset: {keep_aside(env, exercise_id, BROKEN_NODE)}")
        keep = hand_built_lines(env, state, BROKEN_NODE)
        # kube-proxy's full sync of the node (what it does when its canary goes): every chain of
        # every Service as kube-proxy writes it, whatever was done to the node's nat table
        from labkit.kubeproxy.sync import sync_node
        sync_node(netns, state.objects(), live.proxier_config(state, BROKEN_NODE))
        judge.record_sync(env, BROKEN_NODE, None)
        if keep:        # clusterip-by-hand's rules on the node stay (that exercise's work)
            restore(netns, "*nat\n" + "\n".join(keep) + "\nCOMMIT\n", noflush=True)
        break_rules(env, state)
        return
    if exercise_id == "clusterip-by-hand":
        for node in state.node_names():
            if hand_built_rules(env, state, node):
                env.log(f"your {node} rules before the reset: {keep_aside(env, exercise_id, node)}")
            _remove_hand_built(env, state, node)
        # then what kube-proxy does on any sync: KUBE-SERVICES rewritten, unknown service chains deleted
        restore_services(env, SERVICES_OF[exercise_id])
        return
    if exercise_id == "traffic-policy":
        from labkit.kubeproxy import predictions
        predictions.forget(env)     # the next observation keeps the prediction afresh
    restore_services(env, SERVICES_OF.get(exercise_id, []))


def _remove_hand_built(env, state, node: str) -> None:
    """Delete what the student built on a node for clusterip-by-hand: every rule aimed at legacy's
    cluster IP or jumping to a chain kube-proxy would not write, then those chains."""
    from labkit.netlab import run_in
    if not judge.built_path(env, node).exists():
        return
    svc = state.service(HAND_BUILT_SERVICE) or scenario_service(HAND_BUILT_SERVICE)
    ip = svc["spec"]["clusterIP"]
    netns = env.netns_name(node)
    current = parse(save(netns, "nat")).table("nat")
    reference = parse(judge.reference_rules(judge.built_rules(env, node), state.objects(),
                                            live.proxier_config(state, node))).table("nat")
    others = judge.kube_proxy_chain_names(state, exclude={HAND_BUILT_SERVICE})
    own = {name for name in current.chains if reference.chain(name) is None and name not in others}
    iptables = lambda *args: run_in(netns, ["iptables-legacy", "-w", "-t", "nat", *args], check=False)
    for name, chain in current.chains.items():
        if name in own:
            continue
        for number, rule in reversed(list(enumerate(chain.rules, 1))):
            dst = rule.cond("dst")
            aimed = dst is not None and not dst.negated and str(dst.value.network_address) == ip
            if aimed or rule.target in own:
                iptables("-D", name, str(number))
    for name in own:
        iptables("-F", name)
    for name in own:
        iptables("-X", name)


def broken_chains(env) -> dict[str, list[str]] | None:
    try:
        return json.loads((Path(env.dir) / "broken-chains.json").read_text())
    except (OSError, ValueError):
        return None


SOLVED_BY_LABKIT = "solved-by-labkit.json"


def _work_of(env, state, exercise_id: str) -> dict:
    """What an exercise's part of the lab is now: its Services and, for the rule exercises, the
    rules typed for it (comparable with what `labkit solve` left)."""
    out = {"services": {n: state.service(n) for n in SERVICES_OF.get(exercise_id, [])}}
    if exercise_id == "debug-ruleset":
        out["rules"] = catalog_chains(state, BROKEN_NODE, save(env.netns_name(BROKEN_NODE), "nat"))
    if exercise_id == "clusterip-by-hand":
        out["rules"] = {n: hand_built_rules(env, state, n) for n in state.node_names()}
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


def student_work(env, exercise_id: str | None) -> list[str]:
    """What a reset of `exercise_id` (None: the whole lab) would revert of the student's work.
    Answer files are never reverted, so they are not listed."""
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
        if ex == "debug-ruleset":
            broken = broken_chains(env)
            current = catalog_chains(state, BROKEN_NODE, save(env.netns_name(BROKEN_NODE), "nat"))
            if broken is not None and current != broken:
                out.append(f"your edits of {BROKEN_SERVICE}'s chains on {BROKEN_NODE} (a copy of {BROKEN_NODE}'s "
                           f"rules goes to {saved_dir()})")
        if ex == "clusterip-by-hand":
            for node in state.node_names():
                found = hand_built_rules(env, state, node)
                if found:
                    out.append(f"the {len(found)} rules and chains you wrote on {node} for {HAND_BUILT_SERVICE} "
                               f"(a copy of {node}'s rules goes to {saved_dir()})")
    return out
