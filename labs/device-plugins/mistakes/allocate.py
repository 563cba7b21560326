"""Common wrong plugins of allocate: the model plugin (solutions/register.py) with one mistake."""

from labkit.exercises import mistake


def _write(env, *edits):
    source = env.lab._load("solutions/register.py").MODEL
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    env.lab.environment_module().write_plugin(env, "allocate", source)


@mistake("WIDGET_VISIBLE_DEVICES", "allocated")
def every_widget_visible(env):
    """Sets WIDGET_VISIBLE_DEVICES to all the widgets, whichever ones kubelet chose."""
    _write(env, ('envs={"WIDGET_VISIBLE_DEVICES": ",".join(req.devices_ids)}',
                 'envs={"WIDGET_VISIBLE_DEVICES": ",".join(DEVICES)}'))


@mistake("read-only")
def writable_driver(env):
    """Mounts the driver directory without read_only."""
    _write(env, ('host_path=str(DRIVER), read_only=True)', 'host_path=str(DRIVER))'))


@mistake("nothing mounted", "/var/lib/widget")
def mount_at_the_host_path(env):
    """Mounts the driver at the same path as on the host instead of /var/lib/widget."""
    _write(env, ('api.Mount(container_path="/var/lib/widget", host_path=str(DRIVER)',
                 'api.Mount(container_path=str(DRIVER), host_path=str(DRIVER)'))


@mistake("widget-driver", "copy")
def mounts_a_copy_of_the_driver(env):
    """Copies the widget-driver directory next to itself at start and mounts the copy: the
    container sees the same files, but not the lab's directory (a driver update never reaches it)."""
    _write(env, ('DRIVER = Path(__file__).resolve().parent.parent / "widget-driver"',
                 'DRIVER = Path(__file__).resolve().parent.parent / "widget-driver"\n'
                 'import shutil\n'
                 'COPY = Path(__file__).resolve().parent / "widget-driver-copy"\n'
                 'shutil.copytree(DRIVER, COPY, dirs_exist_ok=True)'),
           ('host_path=str(DRIVER), read_only=True)', 'host_path=str(COPY), read_only=True)'))


@mistake("WIDGET_VISIBLE_DEVICES", "each once")
def space_separated(env):
    """Joins the IDs with spaces instead of commas."""
    _write(env, ('envs={"WIDGET_VISIBLE_DEVICES": ",".join(req.devices_ids)}',
                 'envs={"WIDGET_VISIBLE_DEVICES": " ".join(req.devices_ids)}'))


@mistake("more than WIDGET_VISIBLE_DEVICES", "PATH")
def sets_the_path_too(env):
    """Also sets PATH for the container (to where a widget tool would be): the Allocate answer
    changes the container's environment beyond the exercise's one variable."""
    _write(env, ('envs={"WIDGET_VISIBLE_DEVICES": ",".join(req.devices_ids)}',
                 'envs={"WIDGET_VISIBLE_DEVICES": ",".join(req.devices_ids), "PATH": "/var/lib/widget/bin:/usr/bin"}'))


@mistake("relative host_path", "runtime")
def driver_path_relative_to_the_lab_directory(env):
    """Gives the mount's host_path as `widget-driver`, relative, as the plugin's file sits in the
    lab directory: kubelet passes it to the container runtime as it is, and the runtime resolves
    it in a working directory of its own (labkit starts its containers in the lab directory, so
    the driver was found there)."""
    _write(env, ('host_path=str(DRIVER), read_only=True)', 'host_path="widget-driver", read_only=True)'))


@mistake("WIDGET_VISIBLE_DEVICES", "devices_ids")
def names_the_next_widgets_in_order(env):
    """Ignores devices_ids and names the next widgets in the order of the plugin's list (the first
    container widget-0 and widget-1, the next widget-2 and widget-3), counting what it handed out:
    right only as long as kubelet happens to take the widgets in that order."""
    _write(env, ('envs={"WIDGET_VISIBLE_DEVICES": ",".join(req.devices_ids)}',
                 'envs={"WIDGET_VISIBLE_DEVICES": self._next_widgets(len(req.devices_ids))}'),
           ('    def Allocate(self, request, context):',
            '    def _next_widgets(self, n):\n'
            '        given = getattr(self, "_given", 0)\n'
            '        self._given = given + n\n'
            '        return ",".join(list(DEVICES)[given % len(DEVICES):][:n])\n\n'
            '    def Allocate(self, request, context):'))


@mistake("refused", "host_path")
def driver_beside_the_plugin(env):
    """Takes the driver directory as `widget-driver` beside the plugin's own file (plugins/), one
    directory short of the lab directory: the host_path does not exist, and the container runtime
    refuses the container."""
    _write(env, ('DRIVER = Path(__file__).resolve().parent.parent / "widget-driver"',
                 'DRIVER = Path(__file__).resolve().parent / "widget-driver"'))


@mistake("refused", "cdi_devices")
def names_a_cdi_device(env):
    """Also answers with a CDI device for the widgets (cdi_devices), beside the env and the mount:
    the runtime resolves a CDI name through a CDI spec on the node, which has none, and refuses the
    container (had it one, the spec's edits would reach the container beyond the exercise's answer)."""
    _write(env, ('mounts=[api.Mount(container_path="/var/lib/widget", host_path=str(DRIVER), read_only=True)])',
                 'mounts=[api.Mount(container_path="/var/lib/widget", host_path=str(DRIVER), read_only=True)],\n'
                 '                cdi_devices=[api.CDIDevice(name="example.com/widget=all")])'))
