"""Common wrong plugins of restart: the model plugin (solutions/register.py) with one mistake."""

from labkit.exercises import mistake


def _write(env, *edits):
    source = env.lab._load("solutions/register.py").MODEL
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, "restart", source)


@mistake("register again")
def registers_once(env):
    """Registers at start and then only keeps serving."""
    _write(env, ('''        if now is not None and now != registered_with:''', '''        if False:'''))


@mistake("register again", "failed to dial")
def registers_on_the_old_socket(env):
    """Calls Register again after the restart, but keeps the old server, whose socket file kubelet removed."""
    _write(env, ('''            server.stop(0).wait()
            try:
                server = serve_and_register()''', '''            try:
                api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)'''))


@mistake("registered again", "no device list")
def lists_only_on_its_first_stream(env):
    """Remembers the last list it sent in a module global instead of per stream: after a restart
    it registers again, but the new ListAndWatch stream never sends the widgets (nothing changed,
    it thinks), and the restarted kubelet has none."""
    _write(env, ("""    def ListAndWatch(self, request, context):
        last = None
        while context.is_active():
            now = health()
            if now != last:
                last = now
                yield device_list(now)""", """    def ListAndWatch(self, request, context):
        global LAST
        while context.is_active():
            now = health()
            if now != LAST:
                LAST = now
                yield device_list(now)"""), ("class Widgets:", "LAST = None\n\n\nclass Widgets:"))


@mistake("registered", "times")
def registers_again_every_second(env):
    """Serves anew and registers again every second instead of noticing that kubelet.sock was
    created anew: it is registered again after a restart too, but also again and again with a
    kubelet that never restarted."""
    _write(env, ('''        now = kubelet_socket()
        if now is not None and now != registered_with:''', '''        time.sleep(0.95)
        now = kubelet_socket()
        if now is not None:'''))


def _timed(env, main: str) -> None:
    env.lab._load("mistakes/register.py").timed_plugin(env, "restart", main)


SERVE_AND_REGISTER = """server.stop(0).wait()
        (PLUGIN_DIR / SOCKET).unlink(missing_ok=True)
        server = api.serve_plugin(Widgets(), str(PLUGIN_DIR / SOCKET))
        try:
            api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, api.DevicePluginOptions())
        except grpc.RpcError as exc:
            print("register failed:", exc.details(), flush=True)"""


@mistake("did not register again", "second restart", "misses one")
def registers_again_once_after_a_while(env):
    """Registers, waits 2.5 s "for kubelet to come back", serves anew and registers once more,
    then only serves: it never watches kubelet.sock."""
    _timed(env, f"""    import grpc
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, api.DevicePluginOptions())
    time.sleep(2.5)
    if True:
        {SERVE_AND_REGISTER}
    while True:
        time.sleep(1)""")


@mistake("registered 2 times", "kubelet not restarted")
def registers_again_on_a_timer(env):
    """Serves anew and registers again every 1.2 s, whether kubelet restarted or not."""
    _timed(env, f"""    import grpc
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, api.DevicePluginOptions())
    while True:
        time.sleep(1.2)
        {SERVE_AND_REGISTER}""")


@mistake("registered 2 times", "kubelet not restarted")
def watches_kubelet_sock_and_keeps_a_timer_too(env):
    """Watches kubelet.sock and registers again when it is made anew, and also, "to be safe",
    serves anew and registers again whenever 0.9 s have passed since its last registration: a
    timer longer than any quiet time before the second restart, so only the watch after it sees
    the extra registration."""
    _write(env, ('''    server = serve_and_register()
    while True:''', '''    server = serve_and_register()
    registered_at = time.monotonic()
    while True:'''), ('''        if now is not None and now != registered_with:''',
                      '''        if now is not None and (now != registered_with or time.monotonic() - registered_at > 0.9):'''),
           ('''registered_with = now''', '''registered_with, registered_at = now, time.monotonic()'''))


@mistake("registered again", "example.com/widgets", "not the exercise's")
def registers_another_name_after_a_restart(env):
    """Registers again after each restart, but under a misspelt resource name (example.com/widgets):
    the restarted kubelet opens a stream for that resource, and example.com/widget stays at 0."""
    _write(env, ('''    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)
    return server''', '''    global REGISTERED
    name = RESOURCE if not REGISTERED else "example.com/widgets"
    REGISTERED = True
    api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, name, OPTIONS)
    return server'''), ("def serve_and_register():", "REGISTERED = False\n\n\ndef serve_and_register():"))
