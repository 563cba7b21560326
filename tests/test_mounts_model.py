"""labkit.mounts without namespaces: mountinfo parsing, Pod files, the API server's and containerd's
decisions (messages compared with the upstream wording)."""

import textwrap

import pytest

from labkit.errors import ConfigError
from labkit.mounts import mountinfo
from labkit.mounts.pods import Refused, load_pods, parse_pod, runtime_plan, validate

SAMPLE = textwrap.dedent("""\
    63 42 254:0 /srv/lab/rootfs / rw,relatime - ext4 /dev/vda rw
    43 63 254:0 /srv/lab/rootfs/var/lib/kubelet /var/lib/kubelet rw,relatime shared:1 - ext4 /dev/vda rw
    80 43 0:50 / /var/lib/kubelet/e2e/master rw,relatime shared:24 master:3 - tmpfs e2e-mount-propagation-master rw
    81 63 0:51 / /mnt/with\\040space rw propagate_from:7 master:9 - tmpfs a\\134b rw
    82 63 0:52 / /srv/data rw unbindable - tmpfs data rw
    83 63 254:0 /srv/lab/rootfs/srv/data /srv/data rw master:4 - ext4 /dev/vda rw
    """)


def test_mountinfo_optional_fields_and_escapes():
    mounts = mountinfo.parse(SAMPLE)
    root, kubelet, tmp, spaced, unbind, slave = mounts
    assert (root.propagation, root.tags) == ("private", "")
    assert (kubelet.shared, kubelet.master, kubelet.propagation, kubelet.tags) == (1, None, "shared", "shared:1")
    assert (tmp.shared, tmp.master, tmp.propagation) == (24, 3, "slave+shared")
    assert (tmp.fstype, tmp.source, tmp.mountpoint) == ("tmpfs", "e2e-mount-propagation-master", "/var/lib/kubelet/e2e/master")
    assert (spaced.mountpoint, spaced.source, spaced.master, spaced.propagate_from) == ("/mnt/with space", "a\\b", 9, 7)
    assert (unbind.unbindable, unbind.propagation) == (True, "unbindable")
    assert slave.propagation == "slave" and slave.root == "/srv/lab/rootfs/srv/data"


def test_containing_mount_takes_the_longest_prefix_and_the_first_of_stacked_ones():
    mounts = mountinfo.parse(SAMPLE)
    assert mountinfo.containing_mount(mounts, "/var/lib/kubelet/e2e").mountpoint == "/var/lib/kubelet"
    # containerd's string-prefix test: /var/lib/kubeletx counts as held by /var/lib/kubelet
    assert mountinfo.containing_mount(mounts, "/var/lib/kubeletx").mountpoint == "/var/lib/kubelet"
    assert mountinfo.containing_mount(mounts, "/var/lib/kube").mountpoint == "/"
    # two mounts on /srv/data: containerd's lookup keeps the first listed, a process sees the last
    assert mountinfo.containing_mount(mounts, "/srv/data/x").mount_id == 82
    assert mountinfo.visible_at(mounts, "/srv/data").mount_id == 83
    assert [m.mount_id for m in mountinfo.submounts(mounts, "/var/lib/kubelet")] == [80]


def test_a_mount_is_covered_by_one_made_later_on_its_place_or_above_it():
    mounts = mountinfo.parse(SAMPLE + textwrap.dedent("""\
        90 43 0:60 / /var/lib/kubelet/e2e rw - tmpfs cover rw
        91 90 0:61 / /var/lib/kubelet/e2e/x rw - tmpfs x rw
        """))
    by_id = {m.mount_id: m for m in mounts}
    # a tmpfs made on /var/lib/kubelet/e2e after e2e/master hides it; what is mounted on it is reached
    assert mountinfo.covered(mounts, by_id[80])
    assert not any(mountinfo.covered(mounts, by_id[i]) for i in (63, 43, 90, 91, 81, 83))
    # the first of two mounts stacked on /srv/data is covered by the second
    assert mountinfo.covered(mounts, by_id[82])


def test_live_mountinfo_of_this_process_parses():
    mounts = mountinfo.read("self")
    assert any(m.mountpoint == "/" for m in mounts)


def pod(propagation=None, privileged=False, path="/var/lib/kubelet/e2e", extra_mount=None):
    mount = {"name": "host", "mountPath": "/mnt/test"}
    if propagation is not None:
        mount["mountPropagation"] = propagation
    mounts = [mount] + ([extra_mount] if extra_mount else [])
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                      "spec": {"containers": [{"name": "c", "image": "busybox", "volumeMounts": mounts,
                                               "securityContext": {"privileged": privileged}}],
                               "volumes": [{"name": "host", "hostPath": {"path": path}}]}}, "pod.yaml")


def test_api_validation_messages_are_the_api_servers():
    with pytest.raises(Refused) as info:
        validate(pod("Bidirectional"))
    assert info.value.message == ('Pod "p" is invalid: spec.containers[0].volumeMounts.mountPropagation: Forbidden: '
                                  "Bidirectional mount propagation is available only to privileged containers")
    with pytest.raises(Refused) as info:
        validate(pod("Sideways", privileged=True))
    assert info.value.message == ('Pod "p" is invalid: spec.containers[0].volumeMounts.mountPropagation: Unsupported value: '
                                  '"Sideways": supported values: "Bidirectional", "HostToContainer", "None"')
    for ok in (pod(), pod("None"), pod("HostToContainer"), pod("Bidirectional", privileged=True)):
        validate(ok)


NODE = mountinfo.parse(textwrap.dedent("""\
    63 42 254:0 /rootfs / rw - ext4 /dev/vda rw
    43 63 254:0 /rootfs/var/lib/kubelet /var/lib/kubelet rw shared:1 - ext4 /dev/vda rw
    44 63 254:0 /rootfs/srv/slave /srv/slave rw master:5 - ext4 /dev/vda rw
    """))


@pytest.mark.parametrize("propagation, path, options, rootfs, error", [
    (None, "/var/lib/kubelet/e2e", ("rbind", "rprivate", "rw"), "", None),
    ("None", "/srv/private", ("rbind", "rprivate", "rw"), "", None),
    ("HostToContainer", "/var/lib/kubelet/e2e", ("rbind", "rslave", "rw"), "rslave", None),
    ("HostToContainer", "/srv/slave/x", ("rbind", "rslave", "rw"), "rslave", None),
    ("Bidirectional", "/var/lib/kubelet/e2e", ("rbind", "rshared", "rw"), "rshared", None),
    ("HostToContainer", "/srv/private", None, None,
     'path "/srv/private" is mounted on "/" but it is not a shared or slave mount'),
    ("Bidirectional", "/srv/slave/x", None, None,
     'path "/srv/slave/x" is mounted on "/srv/slave" but it is not a shared mount'),
])
def test_runtime_plan_follows_containerd(propagation, path, options, rootfs, error):
    p = pod(propagation, privileged=True, path=path)
    if error:
        with pytest.raises(Refused) as info:
            runtime_plan(p, p.containers[0], NODE)
        assert info.value.message == error and info.value.by == "runtime"
        return
    plan = runtime_plan(p, p.containers[0], NODE)
    assert plan.mounts[0].options == options
    assert plan.rootfs_propagation == rootfs
    assert plan.root_propagation == ("shared" if rootfs == "rshared" else "slave")


def test_rshared_root_wins_and_mounts_are_ordered_by_depth():
    p = parse_pod({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "securityContext": {"privileged": True}, "volumeMounts": [
            {"name": "a", "mountPath": "/a/b/c", "mountPropagation": "HostToContainer"},
            {"name": "b", "mountPath": "/a", "mountPropagation": "Bidirectional"}]}],
        "volumes": [{"name": "a", "hostPath": {"path": "/var/lib/kubelet/a"}},
                    {"name": "b", "hostPath": {"path": "/var/lib/kubelet/b"}}]}}, "p.yaml")
    plan = runtime_plan(p, p.containers[0], NODE)
    assert [m.destination for m in plan.mounts] == ["/a", "/a/b/c"]
    assert plan.rootfs_propagation == "rshared"


@pytest.mark.parametrize("mutate, field, expected", [
    (lambda d: d.pop("metadata"), "metadata", "a mapping with a name"),
    (lambda d: d["metadata"].update(name="Bad_Name"), "metadata.name", "lowercase"),
    (lambda d: d["spec"].update(containers=[]), "spec.containers", "non-empty list"),
    (lambda d: d["spec"]["volumes"][0].pop("hostPath") or d["spec"]["volumes"][0].update(emptyDir={}),
     "spec.volumes[0]", "only hostPath volumes"),
    (lambda d: d["spec"]["volumes"][0]["hostPath"].update(path="relative"), "spec.volumes[0].hostPath.path", "absolute path"),
    (lambda d: d["spec"]["containers"][0]["volumeMounts"][0].update(mountPath=3),
     "spec.containers[0].volumeMounts[0].mountPath", "absolute path"),
    (lambda d: d["spec"]["containers"][0].update(securityContext={"privileged": "yes"}),
     "spec.containers[0].securityContext.privileged", "true or false"),
])
def test_malformed_pod_names_file_and_field(tmp_path, mutate, field, expected):
    import yaml

    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/m"}]}],
                    "volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}}
    mutate(doc)
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as info:
        load_pods(path)
    assert (info.value.path, info.value.field) == (str(path), field)
    assert expected in info.value.problem


def test_pod_files_with_several_documents_and_lists(tmp_path):
    one = "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec: {containers: [{name: c}]}\n"
    path = tmp_path / "pods.yaml"
    path.write_text(one % "a" + "---\n" + one % "b")
    assert [p.name for p in load_pods(path)] == ["a", "b"]
    path.write_text("kind: List\nitems:\n  - {kind: Pod, metadata: {name: c}, spec: {containers: [{name: x}]}}\n")
    assert [p.name for p in load_pods(path)] == ["c"]
    path.write_text("kind: Service\nmetadata: {name: s}\n")
    with pytest.raises(ConfigError, match="kind: expected Pod"):
        load_pods(path)


def test_capabilities_are_containerds_default_set_unless_privileged():
    from labkit.mounts import kernel
    from labkit.mounts.pods import capabilities

    everything = (1 << (kernel.last_capability() + 1)) - 1
    default = capabilities(pod().containers[0], everything)
    # CapEff a container gets from containerd's default spec (pkg/oci/spec.go defaultUnixCaps)
    assert default == 0x00000000a80425fb
    assert "SYS_ADMIN" not in kernel.capability_names(default)
    runtime_own = 0x000001fffeffffff      # whatever the runtime has: WithAllCurrentCapabilities
    assert capabilities(pod(privileged=True).containers[0], runtime_own) == runtime_own

    def with_caps(add=(), drop=()):
        p = parse_pod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "securityContext": {
            "capabilities": {"add": list(add), "drop": list(drop)}}}]}}, "p.yaml")
        return kernel.capability_names(capabilities(p.containers[0], everything))

    assert "SYS_ADMIN" in with_caps(add=["SYS_ADMIN"]) and "NET_RAW" not in with_caps(drop=["NET_RAW"])
    assert with_caps(drop=["ALL"], add=["CHOWN"]) == ["CHOWN"]
    assert with_caps(add=["ALL"], drop=["CHOWN"]) == [n for n in kernel.CAPABILITIES[1:kernel.last_capability() + 1]]
    # the CRI plugin prefixes CAP_ itself: CAP_SYS_ADMIN becomes CAP_CAP_SYS_ADMIN, which no kernel knows
    assert "SYS_ADMIN" not in with_caps(add=["CAP_SYS_ADMIN"]) and "SYS_ADMIN" in with_caps(add=["sys_admin"])


def test_a_refused_spec_is_reported_as_create_container_reports_it():
    from labkit.mounts.pods import create_error

    p = pod("HostToContainer", privileged=True, path="/srv/private")
    with pytest.raises(Refused) as info:
        runtime_plan(p, p.containers[0], NODE)
    assert create_error("ab" * 32, info.value) == (
        f'failed to generate container "{"ab" * 32}" spec: failed to generate spec: '
        'path "/srv/private" is mounted on "/" but it is not a shared or slave mount')


def _in_fresh_namespace(action):
    """Run `action()` in a forked child with a mount namespace of its own (made rprivate first,
    so nothing reaches this one); returns what it returned (JSON), re-raising its error."""
    import json
    import os

    from labkit.mounts import kernel

    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            kernel.unshare_mount_namespace()
            kernel.change_propagation("/", "private", recursive=True)
            reply = {"ok": action()}
        except BaseException as exc:
            reply = {"error": repr(exc)}
        os.write(write_fd, json.dumps(reply).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        reply = json.loads(pipe.read())
    os.waitpid(child, 0)
    assert "ok" in reply, reply["error"]
    return reply["ok"]


def test_make_rshared_leaves_a_path_on_a_shared_mount_alone(tmp_path):
    # kubelet's DoMakeRShared: nothing when the path already lies on a shared mount (a systemd
    # host's /); otherwise bind it onto itself and make it rshared
    from labkit.mounts import kernel
    from labkit.mounts.party import make_rshared

    def act():
        shared, private = tmp_path / "shared", tmp_path / "private"
        for disk in (shared, private):
            disk.mkdir()
            kernel.mount("disk", str(disk), "tmpfs")
            (disk / "kubelet").mkdir()
        kernel.change_propagation(str(shared), "shared")
        make_rshared(str(shared / "kubelet"))
        make_rshared(str(private / "kubelet"))
        mounts = mountinfo.read("self")
        return {str(p): [m.tags for m in mounts if m.mountpoint == str(p / "kubelet")] for p in (shared, private)}

    seen = _in_fresh_namespace(act)
    assert seen[str(tmp_path / "shared")] == []
    [tags] = seen[str(tmp_path / "private")]
    assert tags.startswith("shared:")


# -- labkit.mounts.model: the reconstruction mutants are judged with ------------------------------


def test_model_node_table_follows_the_kernels_rules():
    from labkit.mounts import model
    table = model.NodeTable.from_rows([["/", "root", "private", "", "/", "0:43"],
                                       ["/var/lib/kubelet", "root", "shared", "shared:3", "/var/lib/kubelet", "0:43"]])
    with pytest.raises(OSError) as info:          # not a mount point: EINVAL, nothing changes
        table.change("/srv/data", "shared", recursive=True)
    assert info.value.errno == 22 and len(table.entries) == 2
    table.bind("/srv/data", "/srv/data")          # a bind of a private mount is private, showing the directory
    assert table.rows()[-1] == ["/srv/data", "root", "private", "", "/srv/data", "0:43"]     # of the same filesystem
    table.change("/srv/data", "slave")            # a slave of nobody is private
    assert table.holding("/srv/data/x").propagation == "private"
    table.change("/srv/data", "shared", recursive=True)
    group = table.holding("/srv/data").shared
    assert group is not None and group != 3 and group >= model.GROUPS_FROM
    table.bind("/var/lib/kubelet/pods", "/mnt")   # a bind of a shared mount joins its peer group
    assert table.holding("/mnt").tags == "shared:3" and table.holding("/mnt").root == "/var/lib/kubelet/pods"
    with pytest.raises(OSError) as info:          # mounts below: EBUSY unless lazy
        table.umount("/")
    assert info.value.errno == 16
    table.umount("/srv/data")
    assert [e.mountpoint for e in table.entries] == ["/", "/var/lib/kubelet", "/mnt"]


def test_model_volume_tags_and_reach():
    from labkit.mounts import model
    node = mountinfo.parse("1 0 0:1 / / rw - tmpfs root rw\n"
                           "2 1 0:1 /var/lib/kubelet /var/lib/kubelet rw shared:7 - tmpfs root rw\n")
    tags = {}
    for mode in ("None", "HostToContainer", "Bidirectional"):
        pod = parse_pod({"metadata": {"name": "p"}, "spec": {
            "volumes": [{"name": "v", "hostPath": {"path": "/var/lib/kubelet/x"}}],
            "containers": [{"name": "c", "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "v", "mountPath": "/d", "mountPropagation": mode}]}]}}, "p.yaml")
        tags[mode] = model.volume_tags(pod, pod.containers[0], node)["/d"]
    assert tags == {"None": "", "HostToContainer": "master:7", "Bidirectional": "shared:7"}
    assert [model.reaches("shared:7", t) for t in tags.values()] == [False, True, True]      # from the node
    assert [model.reaches(t, "shared:7") for t in tags.values()] == [False, False, True]     # to the node
