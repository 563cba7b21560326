"""`labkit trace`: follow a packet through a node's iptables rules."""

from __future__ import annotations

import ipaddress
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from labkit import cliopts
from labkit.errors import ConfigError, LabkitError


def parse_destination(text: str) -> tuple[str, int]:
    """"IP:PORT" or "[IPv6]:PORT"."""
    host, port = None, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif text.count(":") == 1:
        host, port = text.split(":")
    try:
        ipaddress.ip_address(host or "")
        number = int(port or "")
        if not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise ConfigError("--dst", None, f"expected IP:PORT (or [IPv6]:PORT), got {text!r}") from None
    return host, number


def note_prediction(lab_id: str, src: str, dst: str, dport: int, traced: list[str] | None = None) -> None:
    """The kube-proxy lab's traffic-policy prediction is graded as it stood when a tool first
    showed the client's outcome (labkit.kubeproxy.situations, labkit.predictions). `traced`: a
    trace of a saved ruleset (--rules), the rules the packet went through; it counts while the lab
    runs."""
    if lab_id != "kube-proxy":
        return
    from labkit import runner
    from labkit.kubeproxy import live
    from labkit.kubeproxy.situations import observed
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab(lab_id)
    env = LabEnv(lab, LabState(lab.id))
    if traced is not None and not runner.lab_is_up(env):
        return
    note = observed(env, live.load(env), src, dst, dport, "labkit trace --rules" if traced is not None
                    else "labkit trace", traced=traced)
    if note:
        print(note, file=sys.stderr)


def lab_node(lab_id: str, node: str) -> tuple[str, list[str]]:
    """The network namespace of a host of a running lab, and its interface addresses."""
    from labkit import runner, shell
    from labkit.labs import get_lab
    from labkit.netlab import run_in
    from labkit.state import LabEnv, LabState

    lab = get_lab(lab_id)
    env = LabEnv(lab, LabState(lab.id))
    if not runner.lab_is_up(env):
        raise LabkitError(f"lab {lab.id} is not running: start it with `labkit run {lab.id}`, or trace a saved ruleset with --rules FILE")
    hosts = shell.hosts(env)
    if node not in hosts or not hosts[node].netns:
        names = ", ".join(sorted(n for n, h in hosts.items() if h.netns)) or "none"
        raise LabkitError(f"lab {lab.id} has no node {node!r} with a network namespace (nodes: {names})")
    netns = hosts[node].netns
    data = json.loads(run_in(netns, ["ip", "-j", "address", "show"]).stdout or "[]")
    addresses = [f"{a['local']}/{a['prefixlen']}" for link in data for a in link.get("addr_info", []) if "local" in a]
    return netns, addresses


def load_ruleset_file(path: Path):
    """A saved ruleset; kube-proxy's restore input gets kube-proxy's jump rules from the built-in
    chains added (kube-proxy installs them outside iptables-restore). Returns (ruleset, notes)."""
    from labkit.kubeproxy import jump_rules
    from labkit.netfilter import parse

    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read: {exc.strerror}") from None
    try:
        ruleset = parse(text, lazy=True)      # only the rules the packet reaches get parsed
    except LabkitError as exc:
        raise ConfigError(path, None, str(exc)) from None
    notes = []
    nat = ruleset.table("nat")
    if nat is not None and nat.chain("KUBE-SERVICES") is not None and not any(
            ruleset.chain("nat", c) and ruleset.chain("nat", c).rules for c in ("PREROUTING", "OUTPUT")):
        for table, chain, args in jump_rules():
            ruleset.ensure_rule_first(table, chain, args)
        notes.append("the file has no rules in the built-in chains: added kube-proxy's jump rules "
                     "(kube-proxy installs them with iptables -I, outside iptables-restore)")
    return ruleset, notes


def trace(
    src: str = typer.Option(..., "--src", help="Source IP of the packet."),
    dst: str = typer.Option(..., "--dst", help="Destination IP:PORT (or [IPv6]:PORT)."),
    proto: str = typer.Option("tcp", "--proto", help="tcp, udp or sctp."),
    node: Optional[str] = typer.Option(None, "--node", help="A node (host) of the running lab: trace its live rules."),
    lab: str = typer.Option("kube-proxy", "--lab", help="The lab whose --node is meant."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="A saved ruleset (iptables-save output or iptables-restore input)."),
    local_address: Optional[List[str]] = typer.Option(None, "--local-address",
        help="With --rules: an address of the node (repeat), e.g. 192.168.0.2 or 127.0.0.1/8."),
    sport: int = typer.Option(40000, "--sport", help="Source port."),
    ctstate: str = typer.Option("NEW", "--ctstate",
        help="Connection-tracking state: NEW for a connection's first packet; ESTABLISHED (or RELATED) for a later "
             "one, which skips the nat table (with --node, the translation comes from the node's conntrack entry "
             "for --src:--sport -> --dst)."),
    affinity: Optional[List[str]] = typer.Option(None, "--affinity",
        help="A recent list (KUBE-SEP-…) the client is already in: its --rcheck affinity rule matches (repeat)."),
    in_interface: Optional[str] = typer.Option(None, "--in-interface", help="Interface the packet arrives on (for -i rules)."),
    output: Optional[str] = cliopts.output_option(("text", "json", "yaml"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Follow a packet through a node's iptables rules (nat, filter) as the kernel would."""
    from labkit.netfilter import Packet, Tracer

    fmt, _ = cliopts.resolve_output(output, ("text", "json", "yaml"), "text", legacy_json=as_json)
    if proto.lower() not in ("tcp", "udp", "sctp"):
        raise ConfigError("--proto", None, f"expected tcp, udp or sctp, got {proto!r}")
    dst_ip, dport = parse_destination(dst)
    try:
        ipaddress.ip_address(src)
    except ValueError:
        raise ConfigError("--src", None, f"expected an IP address, got {src!r}") from None
    if (node is None) == (rules is None):
        raise LabkitError("give either --node NAME (a running lab's node) or --rules FILE")
    notes: list[str] = []
    if node is not None:
        from labkit.netfilter.live import read_live
        netns, addresses = lab_node(lab, node)
        note_prediction(lab, src, dst_ip, dport)
        ruleset = read_live(netns, family="IPv6" if ":" in dst_ip else "IPv4")
        addresses += list(local_address or [])
    else:
        ruleset, notes = load_ruleset_file(rules)
        addresses = list(local_address or [])
        if not addresses:
            notes.append("no --local-address given: no address counts as local to the node")
    for value in addresses:
        try:
            ipaddress.ip_interface(value)
        except ValueError:
            raise ConfigError("--local-address", None, f"expected an IP address or address/prefix, got {value!r}") from None
    conntrack = None
    if "NEW" not in ctstate.upper().split(","):
        if node is not None:
            from labkit.netfilter import conntrack as conntrack_table
            conntrack = conntrack_table.entry(netns, proto.lower(), src, sport, dst_ip, dport)
            if conntrack is None:
                notes.append(f"{node} tracks no {proto.lower()} connection {src}:{sport} -> {dst_ip}:{dport}")
        else:
            notes.append("with --rules there is no conntrack table: no translation applied to this later packet")
    tracer = Tracer(ruleset, addresses, affinity=affinity or (), conntrack=conntrack)
    try:
        result = tracer.trace(Packet(src, dst_ip, dport, proto.lower(), sport=sport, ctstate=ctstate,
                                     in_interface=in_interface))
    except LabkitError as exc:            # a malformed rule of a saved file, met on the way
        if rules is None:
            raise
        raise ConfigError(rules, None, str(exc)) from None
    if rules is not None:
        # a saved copy of a lab node's rules shows what the node would do: withheld like the node's
        note_prediction("kube-proxy", src, dst_ip, dport,
                        traced=[s.text for b in result.branches for s in b.steps if s.kind == "rule"])
    result.notes[:0] = notes
    if fmt != "text":
        cliopts.print_data(result.to_dict(), fmt)
    else:
        sys.stdout.write(result.tree())
