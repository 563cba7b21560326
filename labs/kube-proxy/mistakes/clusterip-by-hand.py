"""Common wrong solutions to clusterip-by-hand: the rules typed by hand, each time with one thing
a student plausibly gets wrong."""

import importlib.util
from pathlib import Path

from labkit.exercises import mistake


def _solution():
    path = Path(__file__).resolve().parent.parent / "solutions" / "clusterip-by-hand.py"
    spec = importlib.util.spec_from_file_location("kube_proxy_clusterip_solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(env, change=lambda chains, rules, entry: (chains, rules, entry)):
    solution = _solution()
    solution.write(env, *change(*solution.rules_for(env)))


@mistake("hairpin", "KUBE-MARK-MASQ")
def no_hairpin_masquerade(env):
    """Writes each KUBE-SEP chain with only its DNAT, without the -s <endpoint> -j KUBE-MARK-MASQ rule."""
    _write(env, lambda chains, rules, entry: (chains, [r for r in rules if not (r[1].startswith("KUBE-SEP-")
                                                                               and r[-1] == "KUBE-MARK-MASQ")], entry))


@mistake("must be the last rule")
def jump_appended_after_nodeports(env):
    """Appends the KUBE-SERVICES rule (-A), so it comes after the jump to KUBE-NODEPORTS."""
    _write(env, lambda chains, rules, entry: (chains, rules, ["-A", *entry[1:]]))


@mistake("kube-proxy's name", "KUBE-SVC-LEGACY")
def own_chain_names(env):
    """Names the chains KUBE-SVC-LEGACY and KUBE-SEP-LEGACY-1..3 instead of computing kube-proxy's hashes."""
    def rename(chains, rules, entry):
        names = dict(zip(chains, ["KUBE-SVC-LEGACY", "KUBE-SEP-LEGACY-1", "KUBE-SEP-LEGACY-2", "KUBE-SEP-LEGACY-3"]))
        fix = lambda args: [names.get(a, a) for a in args]
        return [names[c] for c in chains], [fix(r) for r in rules], fix(entry)
    _write(env, rename)


@mistake("node1", "10.96.0.30:", "where kube-proxy's rules leave it alone")
def entry_without_protocol_and_port(env):
    """Jumps from KUBE-SERVICES on the cluster IP alone (`-d 10.96.0.30 -j KUBE-SVC-…`, no `-p tcp --dport 80`):
    the cluster IP then answers on every port and protocol."""
    def change(chains, rules, entry):
        at = entry.index("-d")
        return chains, rules, [*entry[:at], *entry[at:at + 2], *entry[-2:]]
    _write(env, change)


@mistake("node1", "comment", "default/api")
def rules_without_comments(env):
    """Writes every rule of kube-proxy's for legacy, but none with kube-proxy's `-m comment --comment …`: the
    packets go where kube-proxy's would, yet these are not the rules kube-proxy writes (iptables-save shows
    no default/legacy:http on them)."""
    def strip(args):
        out = list(args)
        while "comment" in out:
            at = out.index("comment") - 1
            del out[at:at + 4]
        return out
    _write(env, lambda chains, rules, entry: (chains, [strip(r) for r in rules], strip(entry)))


@mistake("node1", "masquerade", "KUBE-MARK-MASQ")
def no_masquerade_for_off_cluster_sources(env):
    """Leaves out kube-proxy's first KUBE-SVC rule, `! -s <cluster CIDR> … -j KUBE-MARK-MASQ`, so traffic from
    outside the pod network (the nodes themselves) reaches the endpoints unmasqueraded."""
    _write(env, lambda chains, rules, entry: (chains, [r for r in rules if "!" not in r], entry))


@mistake("node1", "KUBE-SERVICES has no rule that jumps to your KUBE-SVC chain")
def jumps_from_the_builtin_chains(env):
    """Jumps to the KUBE-SVC chain straight from nat PREROUTING and OUTPUT instead of from KUBE-SERVICES: the
    packets go the same way, but these are not the rules kube-proxy writes."""
    from labkit.kubeproxy import live
    from labkit.netlab import run_in

    def change(chains, rules, entry):
        return chains, rules, None
    _write(env, change)
    for node in live.load(env).node_names():
        for builtin in ("PREROUTING", "OUTPUT"):
            run_in(env.netns_name(node), ["iptables-legacy", "-w", "-t", "nat", "-I", builtin, "1", *entry_args(env)])


def entry_args(env):
    _chains, _rules, entry = _solution().rules_for(env)
    return entry[2:]


def _also_run(env, build):
    """The reference rules on every node, then more rules typed on each node (`build(node, svc_chain)`
    gives their iptables arguments)."""
    from labkit.kubeproxy import live
    from labkit.netlab import run_in
    chains, rules, entry = _solution().rules_for(env)
    _solution().write(env, chains, rules, entry)
    state = live.load(env)
    for node in state.node_names():
        for args in build(state, node, chains[0]):
            run_in(env.netns_name(node), ["iptables-legacy", "-w", "-t", "nat", *args])


@mistake("node1", "KUBE-NODEPORTS", "kube-proxy does not write")
def also_opens_a_node_port(env):
    """Correct chains, and also a node port for legacy in KUBE-NODEPORTS (mark for masquerade, then the
    KUBE-SVC chain), as if it were a NodePort Service: a ClusterIP Service has no node port."""
    _also_run(env, lambda state, node, svc: [
        ["-A", "KUBE-NODEPORTS", "-p", "tcp", "--dport", "30200", "-j", "KUBE-MARK-MASQ"],
        ["-A", "KUBE-NODEPORTS", "-p", "tcp", "--dport", "30200", "-j", svc]])


@mistake("node1", "where kube-proxy's rules leave it alone")
def also_opens_the_node_addresses(env):
    """Correct chains, and also the Service's port on the node's own address, first in KUBE-SERVICES: a
    ClusterIP Service is not reachable on node addresses."""
    def build(state, node, svc):
        address = f"{state.node_address(node)}/32"
        return [["-I", "KUBE-SERVICES", "1", "-d", address, "-p", "tcp", "--dport", "80", "-j", "KUBE-MARK-MASQ"],
                ["-I", "KUBE-SERVICES", "2", "-d", address, "-p", "tcp", "--dport", "80", "-j", svc]]
    _also_run(env, build)


@mistake("kube-proxy programmed legacy", "label was off")
def copies_kube_proxys_own_rules(env):
    """Removes legacy's service-proxy-name label so that kube-proxy programs it, saves the rules kube-proxy writes
    for it on each node, puts the label back (the sync deletes them) and restores the saved copy: the rules are
    right, but kube-proxy wrote them."""
    import copy
    from labkit.kubeproxy import live
    from labkit.netfilter import restore, save
    state = live.load(env)
    labelled = copy.deepcopy(state.service("legacy"))
    bare = copy.deepcopy(labelled)
    bare["metadata"]["labels"].pop("service.kubernetes.io/service-proxy-name")
    live.apply_documents(env, [bare], "mistakes/clusterip-by-hand.py")
    chains, _rules, _entry = _solution().rules_for(env)
    copies = {}
    for node in state.node_names():
        nat = save(env.netns_name(node), "nat").splitlines()
        lines = ["*nat"] + [f":{c} - [0:0]" for c in chains]
        lines += [line for line in nat if line.split()[:2] and line.split()[0] == "-A" and line.split()[1] in chains]
        lines += [line.replace("-A KUBE-SERVICES", "-I KUBE-SERVICES 1", 1) for line in nat
                  if line.startswith("-A KUBE-SERVICES") and any(line.endswith(f"-j {c}") for c in chains)]
        copies[node] = "\n".join(lines + ["COMMIT"]) + "\n"
    live.apply_documents(env, [labelled], "mistakes/clusterip-by-hand.py")
    for node, text in copies.items():
        restore(env.netns_name(node), text, noflush=True)


@mistake("node1", "raw table", "nat table")
def also_drops_udp_in_raw(env):
    """Correct chains, and also a rule in node1's raw PREROUTING that drops UDP to legacy's cluster IP from the
    other node's pods (kube-proxy's rules leave such packets alone): a rule outside the nat table, where
    kube-proxy writes a ClusterIP Service's rules."""
    from labkit.kubeproxy import live
    from labkit.netlab import run_in
    _write(env)
    ip = live.load(env).service("legacy")["spec"]["clusterIP"]
    run_in(env.netns_name("node1"), ["iptables-legacy", "-w", "-t", "raw", "-A", "PREROUTING", "-s", "10.244.2.0/24",
                                     "-d", f"{ip}/32", "-p", "udp", "-j", "DROP"])


@mistake("node1", "another order", "sorted")
def jumps_in_another_order(env):
    """Right chains and rules, but the KUBE-SVC chain's jumps list the endpoints last first (1/3 to the
    last endpoint, then 1/2, then the first without a probability): the same endpoints with the same
    chances, yet not the rules kube-proxy writes."""
    def change(chains, rules, entry):
        svc = chains[0]
        jumps = [i for i, r in enumerate(rules) if r[1] == svc and r[-1].startswith("KUBE-SEP-")]
        labels = [(rules[i][rules[i].index("--comment") + 1], rules[i][-1]) for i in jumps]
        out = [list(r) for r in rules]
        for i, (text, target) in zip(jumps, reversed(labels)):
            out[i][out[i].index("--comment") + 1] = text
            out[i][-1] = target
        return chains, out, entry
    _write(env, change)
