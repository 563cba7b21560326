"""Common wrong plugins of preferred: the model plugin (solutions/register.py) with one mistake."""

from labkit.exercises import mistake


def _write(env, *edits):
    source = env.lab._load("solutions/register.py").MODEL
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, "preferred", source)


@mistake("get_preferred_allocation_available")
def options_only_in_register(env):
    """Says get_preferred_allocation_available in the RegisterRequest, but GetDevicePluginOptions
    answers the defaults."""
    _write(env, ('''    def GetDevicePluginOptions(self, request, context):
        return OPTIONS''', '''    def GetDevicePluginOptions(self, request, context):
        return api.DevicePluginOptions()'''))


@mistake("NUMA")
def first_available(env):
    """Answers with the must-include devices and then the first available ones, whatever their NUMA node."""
    _write(env, ('''            for node in sorted(per_node, key=lambda n: (n not in near, -len(per_node[n]), str(n))):''',
                 '''            for node in sorted(per_node, key=str):'''))


@mistake("must_include")
def ignores_must_include(env):
    """Chooses from the available devices only, leaving out the ones kubelet says it must include."""
    _write(env, ('''            chosen = list(req.must_include_deviceIDs)''', '''            chosen = []'''))


@mistake("reference plugin", "yours to write")
def runs_labkits_reference_plugin(env):
    """Writes no plugin: execs `labkit devices plugin serve` with a spec of the four widgets and
    `preferred: true`, so that labkit's own plugin answers GetPreferredAllocation."""
    spec = {"resource": "example.com/widget", "socket": "widget.sock", "preferred": True,
            "devices": [{"id": f"widget-{i}", "numa": i // 2} for i in range(4)]}
    env.lab.environment_module().write_plugin(env, "preferred", f'''\
import json, os, sys
from pathlib import Path

spec = Path(__file__).with_suffix(".spec.json")
spec.write_text(json.dumps({spec!r}))
os.execvp(sys.executable, [sys.executable, "-m", "labkit", "devices", "plugin", "serve",
                           "--dir", os.environ["DEVICE_PLUGIN_DIR"], "-f", str(spec)])
''')
