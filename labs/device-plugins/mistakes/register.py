"""Common wrong plugins of register: the model plugin (solutions/register.py) with one mistake."""

from labkit.exercises import mistake


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
    """Serves anew and registers again every 0.7 s whether or not kubelet restarted, as a
    substitute for noticing that kubelet.sock was created anew."""
    _write(env, ('''        now = kubelet_socket()
        if now is not None and now != registered_with:''', '''        time.sleep(0.5)
        now = kubelet_socket()
        if now is not None:'''))

