"""Common wrong plugins of register: the model plugin (solutions/register.py) with one mistake."""

from labkit.exercises import mistake

# the starter's ListAndWatch with the exercise's four widgets filled in: what a student who
# completed the starter's first TODO has (timed_plugin)
STARTER_DEVICES = ("""        # TODO: the devices, and again whenever they change
        yield api.ListAndWatchResponse(devices=[])""", """        yield api.ListAndWatchResponse(devices=[
            api.Device(ID=f"widget-{i}", health=api.HEALTHY, topology=api.TopologyInfo(nodes=[api.NUMANode(ID=i // 2)]))
            for i in range(4)])""")
STARTER_MAIN = """    # TODO: register with kubelet, then keep serving (and watch for what your exercise asks)
    server.stop(0)
    raise SystemExit("not written yet: the plugin does not register")"""
REGISTER = "api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, api.DevicePluginOptions())"


def timed_plugin(env, exercise: str, main: str) -> None:
    """The starter (starter/plugin.py) completed as a student would, its devices listed, with
    `main` (indented as main's body, after the server is started) in place of its second TODO:
    the plugins that keep time instead of watching kubelet."""
    from pathlib import Path
    source = (Path(env.lab.directory) / "starter" / "plugin.py").read_text()
    for old, new in (STARTER_DEVICES, (STARTER_MAIN, main)):
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, exercise, source)


def _write(env, *edits):
    source = env.lab._load("solutions/register.py").MODEL
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, "register", source)


@mistake("refused", "dial")
def registers_before_serving(env):
    """Calls Register first and starts its gRPC server afterwards: kubelet dials back at once and
    finds nobody listening."""
    _write(env, ('''    server = api.serve_plugin(Widgets(), str(PLUGIN_DIR / SOCKET))
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)''',
                 '''    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)
    server = api.serve_plugin(Widgets(), str(PLUGIN_DIR / SOCKET))'''))


@mistake("refused", "dial", "filepath.Join")
def registers_its_sockets_full_path(env):
    """Gives Register its socket's full path as the endpoint: kubelet joins the endpoint to its
    device-plugins directory, even an absolute one, and dials a socket that is not there."""
    _write(env, ("api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)",
                 "api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), str(PLUGIN_DIR / SOCKET), RESOURCE, OPTIONS)"))


@mistake("not in $DEVICE_PLUGIN_DIR itself")
def serves_outside_kubelets_directory(env):
    """Serves its socket one directory up and registers the endpoint `../widget.sock`: kubelet
    dials it (filepath.Join cleans the `..`), but the socket is not where a restarted kubelet
    looks for plugins' sockets and removes them."""
    _write(env, ("""    (PLUGIN_DIR / SOCKET).unlink(missing_ok=True)
    server = api.serve_plugin(Widgets(), str(PLUGIN_DIR / SOCKET))
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)""",
                 """    (PLUGIN_DIR.parent / SOCKET).unlink(missing_ok=True)
    server = api.serve_plugin(Widgets(), str(PLUGIN_DIR.parent / SOCKET))
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), "../" + SOCKET, RESOURCE, OPTIONS)"""))


@mistake("refused", "ResourceName")
def resource_without_domain(env):
    """Registers the resource as plain `widget`, like a built-in resource."""
    _write(env, ('RESOURCE = "example.com/widget"', 'RESOURCE = "widget"'))


@mistake("NUMA")
def no_topology(env):
    """Lists the widgets without their topology."""
    _write(env, ("api.Device(ID=dev, health=now[dev], topology=api.TopologyInfo(nodes=[api.NUMANode(ID=node)]))",
                 "api.Device(ID=dev, health=now[dev])"))


@mistake("health")
def lowercase_health(env):
    """Writes the health as `healthy`: kubelet counts only the exact string Healthy."""
    _write(env, ("return {dev: given.get(dev, api.HEALTHY) for dev in DEVICES}",
                 'return {dev: given.get(dev, "healthy") for dev in DEVICES}'))


@mistake("at the end of the check's window", "device IDs")
def sends_an_empty_list_when_nothing_changed(env):
    """Lists the widgets once, then, at every turn of its 0.1 s loop, an empty ListAndWatch message
    "since nothing changed", as if the stream carried changes: each message is the whole list, and
    kubelet forgets every widget the empty one leaves out. (The first empty message comes 0.1 s
    after the list: well inside the check's window on a loaded machine too; one 0.6 s after it
    came after the window's end in a whole-suite run.)"""
    _write(env, ("""            if now != last:
                last = now
                yield device_list(now)""", """            if now != last:
                last = now
                yield device_list(now)
            else:
                yield api.ListAndWatchResponse(devices=[])"""))


@mistake("reference plugin", "yours to write")
def runs_labkits_reference_plugin(env):
    """Writes no plugin: execs `labkit devices plugin serve --resource example.com/widget --device
    widget-0@0 ...`, labkit's own plugin, in its place."""
    env.lab.environment_module().write_plugin(env, "register", '''\
import os, sys

os.execvp(sys.executable, [sys.executable, "-m", "labkit", "devices", "plugin", "serve",
                           "--dir", os.environ["DEVICE_PLUGIN_DIR"], "--resource", "example.com/widget",
                           "--device", "widget-0@0", "--device", "widget-1@0",
                           "--device", "widget-2@1", "--device", "widget-3@1"])
''')


@mistake("ListAndWatch", "ended")
def stops_serving_after_registering(env):
    """Registers, then leaves main through a `finally: server.stop(0)` instead of serving on:
    the gRPC server stops, the process ends, and with them the ListAndWatch stream kubelet opened."""
    _write(env, ('''    server = serve_and_register()
    while True:''', '''    server = serve_and_register()
    try:
        time.sleep(0.3)
        return
    finally:
        server.stop(0)
    while True:'''))


@mistake("registered", "times")
def registers_again_on_a_timer(env):
    """Serves anew and registers again every 0.35 s whether or not kubelet restarted, as a
    substitute for noticing that kubelet.sock was created anew. (Every 0.7 s, the second Register
    came after the check's 1 s window in a whole-suite run with a core burnt, and passed.)"""
    _write(env, ('''        now = kubelet_socket()
        if now is not None and now != registered_with:''', '''        time.sleep(0.3)
        now = kubelet_socket()
        if now is not None:'''))



@mistake("stopped serving", "after registering")
def exits_a_while_after_registering(env):
    """Registers, serves for half a second (long enough, it thinks, for kubelet to read the
    devices) and leaves main: the server stops and the process ends."""
    timed_plugin(env, "register", f"""    {REGISTER}
    time.sleep(0.5)
    server.stop(0)""")


@mistake("stopped serving", "after registering")
def serves_for_most_of_a_second(env):
    """Registers and keeps serving with a loop that ends 0.3 s after the registration, then stops
    the server: it serves a fraction of a second instead of for as long as the node runs. (The
    loop watches the clock, and stops well inside the check's 1 s window: on a loaded machine the
    plugin's own process may learn of its registration late, and seven counted sleeps of 0.1 s,
    later 0.6 s by the clock, outlasted the window and passed.)"""
    timed_plugin(env, "register", f"""    {REGISTER}
    stop_at = time.monotonic() + 0.3
    while time.monotonic() < stop_at:
        time.sleep(0.05)
    server.stop(0)""")


@mistake("registered 2 times", "kubelet not restarted")
def registers_again_after_half_a_second(env):
    """Registers, and registers once more 0.5 s later "to be sure kubelet has it", then serves on."""
    timed_plugin(env, "register", f"""    {REGISTER}
    time.sleep(0.5)
    {REGISTER}
    while True:
        time.sleep(1)""")


@mistake("main do after Register returns")
def main_returns_after_registering(env):
    """Serves, registers, and lets main return, taking the server for something that runs on its
    own: the grpc server stops and removes its socket, but the thread serving the ListAndWatch
    stream keeps the process from exiting, so the stream stays open while nothing answers kubelet's
    next call; or, when main returns before a thread serves kubelet's stream, the process exits.
    Either way the feedback asks what main does after Register returns."""
    timed_plugin(env, "register", f"""    {REGISTER}
    print("registered", flush=True)""")
