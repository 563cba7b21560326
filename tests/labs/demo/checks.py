"""Checks of the demo lab: truth always comes from the live environment."""

import ipaddress
import json
from pathlib import Path

from labkit.exercises import CheckFailed, settle
from labkit.netlab import run_in


def check_address(ctx):
    params = ctx.params
    netns = ctx.env.netns_name(params["host"])
    out = run_in(netns, ["ip", "-j", "-4", "addr", "show", params["device"]]).stdout
    live = [a["local"] for link in json.loads(out) for a in link.get("addr_info", [])]
    given = str(ctx.answer_field(ctx.answer(), "address", str)).strip()
    try:
        ipaddress.IPv4Address(given)
    except ValueError:
        raise CheckFailed(f"{given!r} is not an IPv4 address (write it without /prefix)", expected="an IPv4 address",
                          observed=given, right_answer={"address": live[0] if live else None})
    if given in live:
        return ctx.passed(f"{given} is host {params['host']}'s address on {params['device']}")
    return ctx.failed(f"{given} is not an address of host {params['host']} on {params['device']}",
                      expected=f"one of host {params['host']}'s addresses", observed=given,
                      right_answer={"address": live[0] if live else None})


def _get(ctx, path):
    subnet = (ctx.env.dir / "subnet").read_text().strip()
    result = run_in(ctx.env.netns_name("a"), ["curl", "-s", "-m", "3", "-o", "-", "-w", "\n%{http_code}",
                                               f"http://{subnet}.2:8080/{path}"], check=False)
    body, _, code = result.stdout.rpartition("\n")
    return code, body


def observe_greeting(ctx):
    """What host a gets for GET /<path>: (HTTP code, body)."""
    return _get(ctx, ctx.params["path"])


def judge_greeting(ctx, observation):
    """Solved: GET /<path> from host a answers 200 with exactly <text> (a trailing newline aside)."""
    path, text = ctx.params["path"], ctx.params["text"]
    code, body = observation
    if code == "200" and body.strip() == text:
        return ctx.passed(f"GET /{path} from host a answered {text!r}")
    if code == "000":
        return ctx.failed("host a cannot reach the web server on host b", expected="HTTP 200", observed="no connection")
    seen = f"HTTP {code} {body.strip()[:60]!r}" if code == "200" else f"HTTP {code}"
    return ctx.failed(f"GET /{path} from host a answered {seen}", expected=f"HTTP 200 {text!r}", observed=seen)


def check_greeting(ctx):
    return judge_greeting(ctx, observe_greeting(ctx))


def _mounts_of(pid, target):
    """The filesystem types mounted on `target` in the mount namespace of `pid`."""
    lines = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    return sorted(l.split(" - ")[1].split()[0] for l in lines if l.split()[4] == target)


def observe_container_mount(ctx):
    """(filesystem types on the directory in host c, the same on the host), once settled."""
    target = str(ctx.env.dir / ctx.params["dir"])
    host_c = ctx.lab.environment_module().hosts(ctx.env)["c"]
    probe = lambda: (_mounts_of(host_c.pid, target), _mounts_of("self", target))
    seen = settle(probe, timeout=1.5, stable_for=0.3, interval=0.1)
    if not seen.settled:
        raise CheckFailed("the mount table kept changing; check again when you are done")
    return seen.value


def check_container_mount(ctx):
    return judge_container_mount(ctx, observe_container_mount(ctx))


def judge_container_mount(ctx, observation):
    """Solved: host c sees a tmpfs on the directory, the host does not."""
    target = str(ctx.env.dir / ctx.params["dir"])
    in_c, on_host = observation
    if "tmpfs" in in_c and "tmpfs" not in on_host:
        return ctx.passed(f"host c sees a tmpfs on {target}; the host does not")
    if "tmpfs" in on_host:
        return ctx.failed(f"the tmpfs on {target} is visible on the host: mount it inside host c",
                          expected="only host c sees it", observed="the host sees it")
    if in_c:
        return ctx.failed(f"host c has a {in_c[-1]} on {target}, not a tmpfs", expected=f"a tmpfs on {target}",
                          observed=in_c[-1])
    return ctx.failed(f"host c has no tmpfs on {target}", expected=f"a tmpfs on {target} in host c", observed="none")
