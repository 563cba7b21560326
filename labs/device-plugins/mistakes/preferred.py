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


# the model's choice, from its must-include devices to its answer: the mistakes below replace it
MODEL_CHOICE = '''            chosen = list(req.must_include_deviceIDs)
            near = {DEVICES.get(dev) for dev in chosen}
            per_node = {}
            for dev in req.available_deviceIDs:
                if dev not in chosen:
                    per_node.setdefault(DEVICES.get(dev), []).append(dev)
            # the NUMA nodes of the must-include devices first, then the node with most available
            for node in sorted(per_node, key=lambda n: (n not in near, -len(per_node[n]), str(n))):
                for dev in sorted(per_node[node]):
                    if len(chosen) < req.allocation_size:
                        chosen.append(dev)
'''


def _choice(env, nodes: str, take: str):
    """A student's own choice: the must-include devices, then the first NUMA node of `nodes` (an
    expression of `near`: the must-include devices' nodes, and `count`: available devices per
    node) that can hold the rest,
    taking `take` of its devices (`pool`: the node's available ones, `need`: how many are missing);
    when none can, the first available ones."""
    _write(env, (MODEL_CHOICE, f'''            chosen = list(dict.fromkeys(req.must_include_deviceIDs))
            size = req.allocation_size
            count = {{}}
            for dev in req.available_deviceIDs:
                count[DEVICES.get(dev)] = count.get(DEVICES.get(dev), 0) + 1
            near = {{DEVICES.get(dev) for dev in chosen}}
            nodes = {nodes}
            for n in nodes:
                pool = sorted(dev for dev in req.available_deviceIDs if DEVICES.get(dev) == n and dev not in chosen)
                need = size - len(chosen)
                if len(near) <= 1 and len(pool) >= need:
                    chosen += {take}
                    break
            else:
                chosen += [dev for dev in sorted(req.available_deviceIDs) if dev not in chosen][:size - len(chosen)]
'''))


@mistake("allocation_size")
def answers_the_whole_numa_node(env):
    """Picks the right NUMA node, then answers with every available device on it (the whole node
    for the container) rather than allocation_size of them: right whenever the node has exactly as
    many available as asked."""
    _choice(env, "sorted(near) or sorted(count, key=lambda n: (-count[n], n))", "pool")


@mistake("NUMA")
def forgets_the_must_include_node(env):
    """Fills up from the NUMA node with the most available devices (the lower one on a tie),
    whatever node the must-include devices are on: right when they happen to be on that node."""
    _choice(env, "sorted(count, key=lambda n: (-count[n], n))", "pool[:need]")
