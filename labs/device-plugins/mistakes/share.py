"""Common wrong plugins of share: the reference vcore plugin (solutions/share.py) with one mistake."""

from labkit.exercises import mistake


def _write(env, *edits):
    source = env.lab._load("solutions/share.py").MODEL
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, "share", source)


@mistake("get_preferred_allocation_available")
def preference_only_in_register(env):
    """Says get_preferred_allocation_available in the RegisterRequest, but GetDevicePluginOptions
    answers the defaults: kubelet never asks."""
    _write(env, ('''    def GetDevicePluginOptions(self, request, context):
        return OPTIONS''', '''    def GetDevicePluginOptions(self, request, context):
        return api.DevicePluginOptions()'''))


@mistake("fewest")
def most_room_first(env):
    """Spreads the load instead of packing: of the widgets that can hold the request, takes the
    one with the most free vcores (worst fit)."""
    _write(env, ("pool = per_widget[min(fits, key=lambda w: (len(per_widget[w]), str(w)))]",
                 "pool = per_widget[max(fits, key=lambda w: (len(per_widget[w]), str(w)))]"))


@mistake("one widget")
def first_available_ids(env):
    """Answers with the must_include IDs and then the first available ones in order, whichever
    widgets they are quarters of."""
    _write(env, ("            if fits:\n", "            if False:\n"))


@mistake("must_include")
def ignores_must_include(env):
    """Packs the request best fit but starts from nothing, leaving out the IDs kubelet says it
    must include."""
    _write(env, ("            must = list(req.must_include_deviceIDs)", "            must = []"))


@mistake("more than once")
def one_widget_per_vcore(env):
    """Names a widget in WIDGET_VISIBLE_DEVICES once per vcore of it: `widget-1,widget-1`."""
    _write(env, ('",".join(sorted({VCORES.get(v, v) for v in req.devices_ids}))',
                 '",".join(sorted(VCORES.get(v, v) for v in req.devices_ids))'))


@mistake("WIDGET_VISIBLE_DEVICES", "devices_ids")
def vcore_ids_as_devices(env):
    """Puts the vcore IDs themselves into WIDGET_VISIBLE_DEVICES, as for whole widgets."""
    _write(env, ('",".join(sorted({VCORES.get(v, v) for v in req.devices_ids}))', '",".join(req.devices_ids)'))


@mistake("WIDGET_VISIBLE_DEVICES", "which Pod")
def trusts_its_own_preference(env):
    """Remembers the widgets of its last GetPreferredAllocation answer and gives them to the
    next Allocate, taking for granted that kubelet allocates what it preferred, for the same Pod."""
    _write(env, ('''            answers.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen[:req.allocation_size]))''',
                 '''            answers.append(api.ContainerPreferredAllocationResponse(deviceIDs=chosen[:req.allocation_size]))
            self.last = chosen[:req.allocation_size]'''),
           ('''            for req in request.container_requests])

    def PreStartContainer''', '''            for req in request.container_requests]) if not getattr(self, "last", None) else \\
            api.AllocateResponse(container_responses=[api.ContainerAllocateResponse(envs={
                "WIDGET_VISIBLE_DEVICES": ",".join(sorted({VCORES[v] for v in self.last}))})
                for _req in request.container_requests])

    def PreStartContainer'''))


@mistake("device IDs")
def whole_widgets(env):
    """Advertises the four widgets themselves under example.com/vcore, one device each."""
    _write(env, ('VCORES = {f"{widget}-vcore-{k}": widget for widget in WIDGETS for k in range(4)}',
                 'VCORES = {widget: widget for widget in WIDGETS}'))


@mistake("NUMA")
def every_vcore_on_node_zero(env):
    """Lists every vcore on NUMA node 0, whichever widget it is a quarter of."""
    _write(env, ("topology=api.TopologyInfo(nodes=[api.NUMANode(ID=WIDGETS[widget])])",
                 "topology=api.TopologyInfo(nodes=[api.NUMANode(ID=0)])"))

