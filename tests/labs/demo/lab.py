"""The demo lab's environment: built only from labkit's shared mechanisms.

Crash points `demo:<step>` (labkit.crashpoints, LABKIT_CRASH_AT) let the crash-and-cleanup tests
stop `labkit run` right after every step of the build; LABKIT_DEMO_FAIL_AT=<step> makes the build
raise an error there instead.
"""

import os
import random
import shutil
import sys

from labkit import cgroups, procs
from labkit.crashpoints import crash_point
from labkit.exercises import wait_for
from labkit.netlab import add_address, add_veth, create_netns, exists, run_in
from labkit.shell import Host

STEPS = ("netns-a", "netns-b", "veth", "www", "server", "cgroup", "container")


def _step_done(name):
    crash_point(f"demo:{name}")
    if os.environ.get("LABKIT_DEMO_FAIL_AT") == name:
        raise RuntimeError(f"demo build failed on purpose after step {name}")


def subnet(env):
    return (env.dir / "subnet").read_text().strip()


def www(env):
    return env.dir / "www"


def up(env):
    a = create_netns(env, "a")
    _step_done("netns-a")
    b = create_netns(env, "b")
    _step_done("netns-b")
    add_veth(env, a, "eth0", b, "eth0")
    third = random.randint(1, 254)
    (env.dir / "subnet").write_text(f"10.77.{third}")
    add_address(a, "eth0", f"10.77.{third}.1/24")
    add_address(b, "eth0", f"10.77.{third}.2/24")
    _step_done("veth")
    env.ledger.record("path", path=str(www(env)))
    www(env).mkdir()
    (www(env) / "index.html").write_text("demo\n")
    env.ledger.record("path", path=str(env.dir / "c-data"))
    (env.dir / "c-data").mkdir()
    _step_done("www")
    server = procs.spawn(env, "web", [sys.executable, "-m", "http.server", "--bind", "0.0.0.0", "8080",
                                      "--directory", str(www(env))], netns=b)
    listening = lambda: run_in(env.netns_name("a"), ["curl", "-s", "-o", "/dev/null", "-m", "1",
                                                      f"http://10.77.{third}.2:8080/"], check=False).returncode == 0
    if not wait_for(listening, timeout=10):
        raise RuntimeError("the demo web server did not answer within 10 s")
    _step_done("server")
    group = cgroups.create(env, "servers")
    cgroups.add_process(group, server.pid)
    _step_done("cgroup")
    procs.spawn(env, "c", ["unshare", "--mount", "--propagation", "private", "sleep", "infinity"])
    _step_done("container")


def reset_exercise(env, exercise_id):
    """One exercise afresh: find-address changes nothing; serve-greeting's files go; container c
    is restarted (its mounts vanish with its mount namespace)."""
    if exercise_id == "serve-greeting":
        for f in www(env).iterdir():
            if f.name != "index.html":
                shutil.rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
    elif exercise_id == "container-mount":
        procs.kill(procs.find(procs.owner_token(env, "c")))
        procs.spawn(env, "c", ["unshare", "--mount", "--propagation", "private", "sleep", "infinity"])


def _container_pid(env):
    pids = procs.find(procs.owner_token(env, "c"))
    return pids[0] if pids else None


def is_up(env):
    return (exists(env.netns_name("a")) and exists(env.netns_name("b"))
            and bool(procs.find(procs.owner_token(env, "web"))) and _container_pid(env) is not None)


def hosts(env):
    return {
        "a": Host("client", netns=env.netns_name("a")),
        "b": Host("web server", netns=env.netns_name("b")),
        "c": Host("container (own mount namespace)", pid=_container_pid(env)),
    }


def access(env):
    return (f"Hosts: a, b, c — enter one with `labkit shell demo HOST`.\n\n"
            f"Web root of host b: `{www(env)}`; lab directory: `{env.dir}`.")
