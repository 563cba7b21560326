"""Common wrong plugins of health: the model plugin (solutions/register.py) with one mistake."""

from labkit.exercises import mistake


def _write(env, *edits):
    source = env.lab._load("solutions/register.py").MODEL
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, "health", source)


@mistake("device IDs", "capacity")
def leaves_the_broken_one_out(env):
    """Sends the healthy widgets only, leaving the broken one out of the list."""
    _write(env, ('''        for dev, node in DEVICES.items()])''',
                 '''        for dev, node in DEVICES.items() if now[dev] == api.HEALTHY])'''))


@mistake("no new device list")
def reads_health_once(env):
    """Reads the health file once, sends the list, and never looks again."""
    _write(env, ('''        last = None
        while context.is_active():
            now = health()
            if now != last:
                last = now
                yield device_list(now)
            time.sleep(0.1)''',
                 '''        yield device_list(health())
        while context.is_active():
            time.sleep(0.1)'''))


@mistake("health")
def everything_unhealthy(env):
    """Marks every widget Unhealthy as soon as the health file names any broken one."""
    _write(env, ('''    return {dev: given.get(dev, api.HEALTHY) for dev in DEVICES}''',
                 '''    broken = api.UNHEALTHY in given.values()
    return {dev: api.UNHEALTHY if broken else api.HEALTHY for dev in DEVICES}'''))


@mistake("widget-0 Unhealthy", "no new device list")
def watches_only_the_widget_the_check_breaks(env):
    """Reads the health file for widget-2 only (the widget the exercise names) and keeps every
    other widget Healthy whatever the file says."""
    _write(env, ("    return {dev: given.get(dev, api.HEALTHY) for dev in DEVICES}",
                 '    return {dev: given.get(dev, api.HEALTHY) if dev == "widget-2" else api.HEALTHY for dev in DEVICES}'))


@mistake("main do after Register returns")
def main_returns_after_registering(env):
    """Serves, registers, and lets main return: the thread serving the ListAndWatch stream keeps
    the process alive and keeps following the health file, but the grpc server has stopped and no
    other rpc is answered; or, when main returns before a thread serves kubelet's stream, the
    process exits. Either way the feedback asks what main does after Register returns."""
    _write(env, ('''    server = serve_and_register()
    while True:''', '''    server = serve_and_register()
    return
    while True:'''))
