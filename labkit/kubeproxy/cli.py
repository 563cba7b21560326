"""`labkit kube-proxy ...`: the kube-proxy mechanism's commands."""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(help="kube-proxy's iptables mode: render the rules a node gets, and more.",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})


@contextmanager
def warnings_to_stderr():
    """kube-proxy's warnings about skipped objects, one line each on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("labkit: warning: %(message)s"))
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("labkit.kubeproxy")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def proxier_config(config_file: Optional[Path], hostname: Optional[str], node_ips: Optional[List[str]],
                   local_addresses: Optional[List[str]], random_fully: Optional[bool],
                   nfacct_counters: Optional[List[str]], ipv6: bool):
    """A ProxierConfig from the command line (and a KubeProxyConfiguration file)."""
    from labkit.errors import ConfigError
    from labkit.kubeproxy.config import NFACCT_COUNTERS, ProxierConfig

    overrides = {"ip_family": "IPv6" if ipv6 else "IPv4"}
    if hostname:
        overrides["hostname"] = hostname
    if node_ips:
        overrides["node_ips"] = list(node_ips)
    addresses = list(local_addresses or [])
    if not addresses:
        # Like a node's interfaces: its IPs and the loopback addresses.
        addresses = list(node_ips or []) + ["127.0.0.1/8", "::1/128"]
    overrides["local_addresses"] = addresses
    if random_fully is not None:
        overrides["random_fully"] = random_fully
    if nfacct_counters:
        names = [] if nfacct_counters == ["none"] else list(nfacct_counters)
        unknown = sorted(set(names) - set(NFACCT_COUNTERS))
        if unknown:
            raise ConfigError("--nfacct-counter", None, f"unknown counter {', '.join(unknown)}; kube-proxy's are {', '.join(NFACCT_COUNTERS)} (or none)")
        overrides["nfacct_counters"] = names
    for flag, values in (("--node-ip", node_ips or []), ("--local-address", addresses)):
        for value in values:
            _check_address(flag, value)
    return ProxierConfig.from_kube_proxy_configuration(config_file, **overrides)


def _check_address(flag: str, value: str) -> None:
    import ipaddress
    from labkit.errors import ConfigError
    try:
        ipaddress.ip_interface(value)
    except ValueError:
        raise ConfigError(flag, None, f"expected an IP address or address/prefix, got {value!r}") from None


@app.command()
def render(
    file: Path = typer.Option(..., "-f", "--filename", help="Services and EndpointSlices (YAML, as kubectl shows them)."),
    config: Optional[Path] = typer.Option(None, "--config", help="A KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)."),
    hostname: Optional[str] = typer.Option(None, "--hostname", help="The node's name (endpoints with this nodeName are local)."),
    node_ip: Optional[List[str]] = typer.Option(None, "--node-ip", help="A node IP (repeat for dual-stack)."),
    local_address: Optional[List[str]] = typer.Option(None, "--local-address",
        help="An interface address of the node, e.g. 192.168.0.2/24 (repeat; loopback included). Default: the node IPs and loopback."),
    random_fully: Optional[bool] = typer.Option(None, "--random-fully/--no-random-fully",
        help="Whether iptables supports MASQUERADE --random-fully (default: yes, iptables >= 1.6.2)."),
    nfacct_counter: Optional[List[str]] = typer.Option(None, "--nfacct-counter",
        help="An nfacct counter that exists (repeat); default both of kube-proxy's; 'none' for none."),
    ipv6: bool = typer.Option(False, "--ipv6", help="Render the IPv6 (ip6tables) proxier instead of IPv4."),
    sort: bool = typer.Option(False, "--sorted", help="Print in kube-proxy's canonical test order (sortIPTablesRules)."),
):
    """Print the iptables-restore input kube-proxy (iptables mode) writes for this node. While the
    kube-proxy lab runs, rules for its Service legacy are withheld until its exercise
    clusterip-by-hand, which asks to write them by hand, has passed, and rules for its Service
    catalog until debug-ruleset, which asks to repair them by hand, has passed."""
    from labkit.kubeproxy import load_objects, render as render_rules, sort_rules

    cfg = proxier_config(config, hostname, node_ip, local_address, random_fully, nfacct_counter, ipv6)
    with warnings_to_stderr():
        text = render_rules(load_objects(file), cfg)
    withheld = _lab_withholds(text)
    if withheld:
        from labkit.errors import LabkitError
        raise LabkitError(withheld)
    sys.stdout.write(sort_rules(text) if sort else text)


def _lab_withholds(text: str) -> str | None:
    """While the kube-proxy lab runs, why its rules `text` are withheld (they answer one of its
    exercises: the lab's render_withheld), or None."""
    from labkit import runner
    from labkit.errors import LabNotFound
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    try:
        lab = get_lab(lab_commands.LAB_ID)
    except LabNotFound:
        return None
    env = LabEnv(lab, LabState(lab.id))
    if not runner.lab_is_up(env):
        return None
    return getattr(lab.environment_module(), "render_withheld", lambda env, text: None)(env, text)


# -- commands that work on the running kube-proxy lab (labkit/kubeproxy/lab_commands.py) ---------
from labkit.kubeproxy import lab_commands  # noqa: E402

app.command("apply")(lab_commands.apply)
app.command("get")(lab_commands.get)
app.command("delete")(lab_commands.delete)
app.command("curl")(lab_commands.curl)
app.command("graph")(lab_commands.graph)
