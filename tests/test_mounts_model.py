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
