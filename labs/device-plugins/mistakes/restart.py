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
    _write(env, ('''            server.stop(0)
            try:
                server = serve_and_register()''', '''            try:
                api.register(str(PLUGIN_DIR / api.KUBELET_SOCKET), SOCKET, RESOURCE, OPTIONS)'''))


@mistake("registered", "times")
def registers_again_every_second(env):
    """Serves anew and registers again every second instead of noticing that kubelet.sock was
    created anew: it is registered again after a restart too, but also again and again with a
    kubelet that never restarted."""
    _write(env, ('''        now = kubelet_socket()
        if now is not None and now != registered_with:''', '''        time.sleep(0.8)
        now = kubelet_socket()
        if now is not None:'''))
