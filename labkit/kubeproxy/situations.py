"""The kube-proxy lab's prediction exercise traffic-policy, for labkit.predictions.

It asks the student to *predict*, for Services shop-cluster and shop-local, whether the client's
request to each node's NodePort is answered and which address the pod sees, and only then to
observe. `labkit kube-proxy curl` and `labkit trace` to a node's address on those Services'
NodePorts show that outcome, from the client and from any other sender (shows_outcome). Until the
answer file holds a whole prediction (prediction_problem) both withhold it; the first time either
shows it, labkit.predictions keeps the prediction as it is then, and the check grades that kept
prediction. Resets keep it (labkit.predictions: the same rule in every lab).

A shell cannot withhold anything (curl, wget or python in `labkit shell kube-proxy client`): the
lab's nodes log every connection sent to their NodePorts (labs/kube-proxy/lab.py start_watchers),
and the check does not grade a prediction written after such a request; the tools say so when
they keep one (tried_before).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from labkit import predictions
from labkit.errors import LabkitError
from labkit.exercises import answer_path
from labkit.kubeproxy.judge import kube_proxy_chain_names

EXERCISE = "traffic-policy"
CELLS = ("answers", "client_ip_preserved")


def prediction_problem(data, names, nodes) -> str | None:
    """What keeps `data` (the answer file, read) from being a whole prediction the check can grade,
    in the check's words, or None: a mapping per Service, in it one per node with answers
    true|false and, where it answers, client_ip_preserved true|false, and no key besides (a key
    misspelled, a node that is not one, is not read as left out)."""
    if not isinstance(data, dict):
        return "it must be a mapping with one entry per Service"
    for service in names:
        predicted = data.get(service)
        if not isinstance(predicted, dict):
            return f"{service} must be a mapping with one entry per node"
        others = [str(k) for k in predicted if k not in nodes]
        for node in nodes:
            guess = predicted.get(node)
            if node not in predicted and others:
                return (f"{service} has no entry {node}; it has {', '.join(others)} instead — is one of them "
                        f"misspelled? (the nodes are {', '.join(nodes)})")
            if not isinstance(guess, dict) or not isinstance(guess.get("answers"), bool):
                return f"{service}.{node} must be a mapping with answers: true|false"
            if guess["answers"] and not isinstance(guess.get("client_ip_preserved"), bool):
                return f"{service}.{node} predicts an answer, so it needs client_ip_preserved: true|false"
            unknown = [str(k) for k in guess if k not in CELLS]
            if unknown:      # a misspelled client_ip_preserved would otherwise be read as left out
                return (f"{service}.{node} has {', '.join(unknown)}, which this exercise does not read (the keys are "
                        f"{', '.join(CELLS)}: is one misspelled?)")
        if others:
            return f"{service} has {', '.join(others)}, which is not a node (the nodes are {', '.join(nodes)})"
    return None


def prediction_text(env, nodes) -> tuple[str | None, str | None]:
    """(the answer file's text, None) when it holds a whole prediction for `nodes`; else (None,
    what is missing or malformed; None when there is no answer file at all)."""
    exercise = env.lab.exercise(EXERCISE)
    try:
        text = answer_path(env.lab.id, EXERCISE).read_text()
    except (OSError, UnicodeDecodeError):
        return None, None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, f"it is not YAML ({str(exc).splitlines()[0]})"
    names = (exercise.params["cluster_service"], exercise.params["local_service"])
    problem = prediction_problem(data, names, nodes)
    return (None, problem) if problem else (text, None)


def shows_outcome(env, state, src: str | None, dst: str, dport: int, *, traced: list[str] | None = None) -> bool:
    """Whether a request or trace to dst:dport shows what the exercise asks to predict: how a node's
    NodePort of one of its Services treats a new connection. Every sender's packet to a node address
    on such a port meets the same KUBE-NODEPORTS and KUBE-EXT-… chains (and, on a node without local
    endpoints, the same DROP in KUBE-EXTERNAL-SERVICES) as the client's, and for many the outcome is
    the client's own: another address outside the cluster (`labkit trace --src 1.2.3.4`), the other
    node (node1 asking node2), a pod asking shop-cluster's NodePort, which kube-proxy masquerades as
    it does the client's (pkg/proxy/iptables/proxier.go syncProxyRules: "masquerade traffic for ...
    external destinations"). So whoever sends it, the outcome is withheld until a prediction is
    written, and kept with it. `src` (None: the sender's own address) does not change that.

    `traced`: for `labkit trace --rules FILE`, the rules the traced packet went through. A saved
    copy of a node's rules shows the same outcome as the node, whatever addresses the file or the
    packet use: the trace shows it when the packet is aimed at one of the Services' NodePorts, or
    passes one of their chains (kube-proxy's names for them: labkit.kubeproxy.chains) or a rule
    carrying one of their comments ("default/shop-local:http", as proxier.go writes them)."""
    if env.lab.id != "kube-proxy":
        return False
    exercise = env.lab.exercise(EXERCISE)
    node_ports = outcome_node_ports(env, state)
    names = tuple(sorted(set(node_ports.values()) | {exercise.params["cluster_service"],
                                                     exercise.params["local_service"]}))
    if (dst, dport) in outcome_external_targets(env, state):
        return True
    if traced is not None:
        return dport in node_ports or any(_concerns(text, state, names) for text in traced)
    if dst not in {state.node_address(n) for n in state.node_names()}:
        return False
    return dport in node_ports


def outcome_node_ports(env, state) -> dict[int, str]:
    """{node port: Service} of the NodePorts whose outcome the exercise asks to predict: those of its
    two Services, those of any other Service that sends to one of their pods (a copy of the
    situation made to experiment with, `externalTrafficPolicy: Local` and the same selector, shows
    the same outcome at its own NodePort), and those of any Service with `externalTrafficPolicy:
    Local` whose endpoints run on some nodes but not all (an endpoint counting on its node only when
    kube-proxy sends to it there: ready, or serving and terminating; shop-local's situation with other pods,
    e.g. a Service without selector and an EndpointSlice of one's own listing web-1 and web-2: the
    outcome depends on the policy and on which nodes have a local endpoint, not on which pods they
    are; proxier.go syncProxyRules sends external traffic to KUBE-SVL-… and, with no local endpoint,
    drops it in KUBE-EXTERNAL-SERVICES)."""
    out = {}
    for svc in _outcome_services(env, state):
        for port in svc["spec"].get("ports") or []:
            if port.get("nodePort"):
                out[port["nodePort"]] = svc["metadata"]["name"]
    return out


def outcome_external_targets(env, state) -> dict[tuple[str, int], str]:
    """{(address, port): Service} of the external IPs and load-balancer ingress IPs of the Services
    outcome_node_ports takes the NodePorts of. kube-proxy sends a packet to a Service's external IP
    or load-balancer IP on its port through the same KUBE-EXT-… chain as one to its NodePort
    (pkg/proxy/iptables/proxier.go syncProxyRules: "external IP" and "loadbalancer IP" rules jump to
    externalTrafficChain), so a request there shows the same outcome: `externalTrafficPolicy: Local`
    with `externalIPs` set to the nodes' addresses is shop-local's situation on another port."""
    out = {}
    for svc in _outcome_services(env, state):
        ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
        addresses = list(svc["spec"].get("externalIPs") or []) + [i["ip"] for i in ingress if i.get("ip")]
        for port in svc["spec"].get("ports") or []:
            for address in addresses:
                out[(address, port.get("port"))] = svc["metadata"]["name"]
    return out


def _outcome_services(env, state) -> list[dict]:
    """The Services whose NodePorts, external IPs and load-balancer IPs show the exercise's outcome
    (outcome_node_ports says which)."""
    exercise = env.lab.exercise(EXERCISE)
    names = (exercise.params["cluster_service"], exercise.params["local_service"])
    nodes = set(state.node_names())

    def addresses(namespace: str, name: str) -> set[str]:
        return {a for sl in state.slices_of(namespace, name) for ep in sl.get("endpoints") or []
                for a in ep.get("addresses") or []}

    def listed(namespace: str, name: str) -> bool:
        return any(ep.get("addresses") for sl in state.slices_of(namespace, name) for ep in sl.get("endpoints") or [])

    def where(namespace: str, name: str) -> set[str]:
        # the nodes where kube-proxy has a local endpoint to send external traffic to: one that is
        # ready, or else serving and terminating (pkg/proxy/topology.go CategorizeEndpoints; ready
        # and serving as pkg/proxy/endpointslicecache.go reads the conditions: absent, both are
        # true). A node with only a not-ready endpoint drops like a node with none.
        return {ep.get("nodeName") for sl in state.slices_of(namespace, name) for ep in sl.get("endpoints") or []
                if ep.get("addresses") and _usable(ep)}
    pods = set().union(*(addresses("default", n) for n in names))
    out = []
    for svc in state.services:
        meta = svc["metadata"]
        key = (meta.get("namespace") or "default", meta["name"])
        ours = meta["name"] in names and key[0] == "default"
        local = svc["spec"].get("externalTrafficPolicy") == "Local" and listed(*key) and bool(nodes - where(*key))
        if ours or local or (pods & addresses(*key)):
            out.append(svc)
    return out


def _usable(endpoint: dict) -> bool:
    """Whether kube-proxy sends traffic to this endpoint when it is local: ready, or serving and
    terminating (pkg/proxy/topology.go CategorizeEndpoints, its fallback to terminating endpoints)."""
    conditions = endpoint.get("conditions") or {}
    if conditions.get("ready") is not False:
        return True
    return conditions.get("serving") is not False and conditions.get("terminating") is True


OUTCOME_PORTS_LOG = "outcome-node-ports.jsonl"


def remember_outcome_node_ports(env, state) -> None:
    """After each kube-proxy sync of the lab: the outcome_node_ports then, logged with the time when
    they differ from the last entry. A request sent by hand to a copy of the situation's NodePort
    (a Service of one's own) is an observation even after that Service is deleted again: the
    nodes' connection logs are read against the ports graded at the time of each request
    (graded_then)."""
    if getattr(getattr(env, "lab", None), "id", None) != "kube-proxy":
        return
    ports = {str(port): name for port, name in sorted(outcome_node_ports(env, state).items())}
    history = outcome_port_history(env)
    if history and history[-1][1] == {int(p): n for p, n in ports.items()}:
        return
    with (Path(env.dir) / OUTCOME_PORTS_LOG).open("a") as log:
        log.write(json.dumps({"time": time.time(), "ports": ports}) + "\n")


def outcome_port_history(env) -> list[tuple[float, dict[int, str]]]:
    """[(time, {node port: Service})] as remember_outcome_node_ports logged them, oldest first."""
    try:
        lines = (Path(env.dir) / OUTCOME_PORTS_LOG).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
            out.append((float(entry["time"]), {int(p): str(n) for p, n in entry["ports"].items()}))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def graded_then(history, at: float) -> dict[int, str]:
    """The outcome node ports in force at time `at` (the last entry of `history` before it)."""
    found = {}
    for time_, ports in history:
        if time_ > at:
            break
        found = ports
    return found


def _concerns(rule_text: str, state, names) -> bool:
    """Whether a rule (its text as traced) is one of `names`' rules: in or to one of their chains, or
    carrying their comment."""
    others = {s["metadata"]["name"] for s in state.services} - set(names)
    chains = kube_proxy_chain_names(state, exclude=others)
    words = rule_text.split()
    return (any(w in chains for w in words)
            or any(f"default/{n}:" in rule_text for n in names))


def observed(env, state, src: str | None, dst: str, dport: int, tool: str, *,
             traced: list[str] | None = None) -> str | None:
    """Before `tool` shows what is sent to dst:dport: keep the prediction the first time it shows
    the exercise's outcome (labkit.predictions); a note for the student, or None. Refused (a
    LabkitError saying what is missing) while there is no whole prediction. `traced`: see
    shows_outcome."""
    if (not shows_outcome(env, state, src, dst, dport, traced=traced)
            or predictions.kept(env.lab.id, EXERCISE) is not None):
        return None
    text, problem = prediction_text(env, state.node_names())
    if text is None:
        where = answer_path(env.lab.id, EXERCISE)
        tried = tried_before(env, state)
        already = (f". You already sent a request to these NodePorts yourself ({tried['what']}, at {tried['time']}): "
                   f"a prediction written after that earns no points; `labkit reset {env.lab.id} {EXERCISE} "
                   "--forget-prediction` starts the exercise afresh" if tried is not None else "")
        if problem:      # kept as it is, the check could only refuse it: said now, while it can be fixed
            raise LabkitError(f"this would show what exercise {EXERCISE} asks you to predict, and the prediction in "
                              f"{where} is not whole yet: {problem}. Complete it first (labkit keeps it when it "
                              "first shows the outcome, and the check grades that one)" + already)
        raise LabkitError(f"this would show what exercise {EXERCISE} asks you to predict, and there is no prediction "
                          f"in {where} yet: write your prediction there first (labkit "
                          "keeps it when it first shows the outcome, and the check grades that one)" + already)
    predictions.keep(env.lab.id, EXERCISE, tool, situation=f"{src or 'from the sender'} to {dst}:{dport}")
    note = (f"note: labkit keeps your {EXERCISE} prediction as it is now; that is what `labkit check` grades "
            "(changes after observing do not count)")
    tried = tried_before(env, state)
    if tried is not None:
        note += (f". But you sent a request to these NodePorts yourself before this prediction was written "
                 f"({tried['what']}, at {tried['time']}): the check does not grade a prediction written after "
                 f"that; `labkit reset {env.lab.id} {EXERCISE} --forget-prediction` starts the exercise afresh")
    return note


def tried_before(env, state) -> dict | None:
    """The student's own request to the exercise's NodePorts (the lab's connection logs: its
    earliest_try) that came before the answer file was last written, or None."""
    earliest = getattr(env.lab.environment_module(), "earliest_try", None)
    tried = earliest(env, state) if callable(earliest) else None
    try:
        written = answer_path(env.lab.id, EXERCISE).stat().st_mtime
    except OSError:
        return tried
    return tried if tried is not None and written >= tried["at"] else None
