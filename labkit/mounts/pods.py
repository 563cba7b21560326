"""Pods as the mount lab understands them, and the decisions the API server, kubelet and
containerd make about their volume mounts before any mount(2) happens.

What is read from a Pod (everything else, e.g. image or resources, is accepted and ignored):
metadata.name; spec.volumes[] with hostPath {path, type}; spec.containers[] with name,
command, args, workingDir, securityContext.privileged, securityContext.capabilities {add, drop}
and volumeMounts[] {name, mountPath, readOnly, mountPropagation}. Every container runs the node's
own binaries in place of an image.

The decisions, each from the upstream code named beside it (read at kubernetes/kubernetes
001a80e9 for kubelet, the API validation as of release 1.30+, containerd bbac058c (v2.x) and
runc 7c71a227):
  validate()            API server validation (pkg/apis/core/validation/validation.go: the
                        containers as labkit.apiserver.podvalidation checks them for the API
                        server too, then validateMountPropagation): only None / HostToContainer / Bidirectional,
                        and Bidirectional only in privileged containers. The field path really is
                        "...volumeMounts.mountPropagation" without an index (fldPath.Child).
  cri_propagation()     kubelet translateMountPropagation (pkg/kubelet/kubelet_pods.go): unset and
                        None -> PROPAGATION_PRIVATE, HostToContainer -> PROPAGATION_HOST_TO_CONTAINER,
                        Bidirectional -> PROPAGATION_BIDIRECTIONAL.
  runtime_plan()        containerd WithMounts (internal/cri/opts/spec_linux_opts.go, v2): rbind plus
                        rprivate / rslave / rshared; Bidirectional requires the host mount holding the
                        path to be shared, HostToContainer shared or slave (ensureShared /
                        ensureSharedOrSlave, same wording); rootfsPropagation rshared for
                        Bidirectional, rslave for HostToContainer unless already rshared, otherwise
                        unset, which runc turns into its default MS_SLAVE|MS_REC; mounts sorted by
                        the number of parts of their container path (orderedMounts). A refusal is
                        wrapped as CreateContainer wraps it (internal/cri/server/container_create.go).
  capabilities()        what the container's process may do: containerd's default set
                        (pkg/oci/spec.go defaultUnixCaps; no CAP_SYS_ADMIN, so mount(2) fails with
                        EPERM), changed by securityContext.capabilities add/drop (internal/cri/opts
                        WithCapabilities, "ALL" included), and for a privileged container every
                        capability the runtime itself has (pkg/oci WithPrivileged ->
                        WithAllCurrentCapabilities). Not modelled: seccomp and AppArmor profiles
                        (on a node with AppArmor, containerd's default profile also denies mount to
                        unprivileged containers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from labkit.errors import ConfigError
from labkit.mounts import kernel, mountinfo

NONE, HOST_TO_CONTAINER, BIDIRECTIONAL = "None", "HostToContainer", "Bidirectional"
SUPPORTED_PROPAGATIONS = (BIDIRECTIONAL, HOST_TO_CONTAINER, NONE)   # sorted, as the API lists them
CRI_PRIVATE, CRI_HOST_TO_CONTAINER, CRI_BIDIRECTIONAL = "PROPAGATION_PRIVATE", "PROPAGATION_HOST_TO_CONTAINER", "PROPAGATION_BIDIRECTIONAL"
HOST_PATH_TYPES = ("", "DirectoryOrCreate", "Directory")
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# containerd pkg/oci/spec.go defaultUnixCaps: what a container that is not privileged gets.
DEFAULT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
                        "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    propagation: str | None = None     # as written in the Pod: None when the field is unset
    read_only: bool = False


@dataclass(frozen=True)
class Container:
    name: str
    volume_mounts: tuple[VolumeMount, ...]
    privileged: bool = False
    command: tuple[str, ...] = ()
    working_dir: str = ""
    capabilities_add: tuple[str, ...] = ()      # securityContext.capabilities, as written
    capabilities_drop: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostPathVolume:
    name: str
    path: str
    type: str = ""


@dataclass(frozen=True)
class Pod:
    name: str
    containers: tuple[Container, ...]
    volumes: dict = field(default_factory=dict)    # name -> HostPathVolume
    source: dict = field(default_factory=dict, compare=False, repr=False)   # the object as read

    def container(self, name: str) -> Container:
        for c in self.containers:
            if c.name == name:
                return c
        raise KeyError(name)


class Refused(Exception):
    """The API server, kubelet or the runtime refuses: the message is theirs."""

    def __init__(self, message: str, by: str):
        super().__init__(message)
        self.message = message
        self.by = by      # "api" or "runtime"


# -- reading Pod objects -----------------------------------------------------------------------


def _expect(path, where, value, kind, what):
    if not isinstance(value, kind):
        shown = "nothing" if value is None else f"{type(value).__name__} {value!r}"[:60]
        raise ConfigError(path, where, f"expected {what}, got {shown}")
    return value


def absolute_path(path, where, value) -> str:
    """`value` as a normalized absolute path, or ConfigError naming file and field."""
    _expect(path, where, value, str, "an absolute path")
    if not value.startswith("/"):
        raise ConfigError(path, where, f"expected an absolute path, got {value!r}")
    return "/" + "/".join(p for p in value.split("/") if p and p != ".")


def parse_pod(obj, path, where: str = "") -> Pod:
    """A Pod from a decoded YAML object; a malformed one raises ConfigError naming the field."""
    at = (lambda f: f"{where}.{f}" if where else f)
    _expect(path, where or None, obj, dict, "a Pod object (a mapping)")
    if obj.get("kind", "Pod") != "Pod":
        raise ConfigError(path, at("kind"), f"expected Pod, got {obj.get('kind')!r}")
    meta = _expect(path, at("metadata"), obj.get("metadata"), dict, "a mapping with a name")
    name = _expect(path, at("metadata.name"), meta.get("name"), str, "a Pod name")
    if not NAME_RE.match(name) or len(name) > 63:
        raise ConfigError(path, at("metadata.name"), f"expected lowercase letters, digits and '-', got {name!r}")
    spec = _expect(path, at("spec"), obj.get("spec"), dict, "a mapping")
    volumes = {}
    for i, raw in enumerate(_expect(path, at("spec.volumes"), spec.get("volumes", []) or [], list, "a list")):
        w = at(f"spec.volumes[{i}]")
        _expect(path, w, raw, dict, "a mapping")
        vname = _expect(path, f"{w}.name", raw.get("name"), str, "a volume name")
        if "hostPath" not in raw:
            kinds = [k for k in raw if k != "name"]
            raise ConfigError(path, f"{w}", f"only hostPath volumes are supported in this lab, got {', '.join(kinds) or 'none'}")
        hp = _expect(path, f"{w}.hostPath", raw["hostPath"], dict, "a mapping with a path")
        vtype = hp.get("type", "") or ""
        if vtype not in HOST_PATH_TYPES:
            raise ConfigError(path, f"{w}.hostPath.type", f"expected one of {', '.join(repr(t) for t in HOST_PATH_TYPES)}, got {vtype!r}")
        volumes[vname] = HostPathVolume(vname, absolute_path(path, f"{w}.hostPath.path", hp.get("path")), vtype)
    raw_containers = _expect(path, at("spec.containers"), spec.get("containers"), list, "a non-empty list of containers")
    if not raw_containers:
        raise ConfigError(path, at("spec.containers"), "expected a non-empty list of containers, got an empty list")
    containers = []
    for i, raw in enumerate(raw_containers):
        w = at(f"spec.containers[{i}]")
        _expect(path, w, raw, dict, "a mapping")
        cname = _expect(path, f"{w}.name", raw.get("name"), str, "a container name")
        if not NAME_RE.match(cname) or len(cname) > 63:
            raise ConfigError(path, f"{w}.name", f"expected lowercase letters, digits and '-', got {cname!r}")
        command = [*(raw.get("command") or []), *(raw.get("args") or [])]
        if not all(isinstance(c, str) for c in command):
            raise ConfigError(path, f"{w}.command", "expected a list of strings")
        sc = raw.get("securityContext") or {}
        _expect(path, f"{w}.securityContext", sc, dict, "a mapping")
        privileged = sc.get("privileged", False)
        _expect(path, f"{w}.securityContext.privileged", privileged, bool, "true or false")
        caps = sc.get("capabilities") or {}
        _expect(path, f"{w}.securityContext.capabilities", caps, dict, "a mapping {add, drop}")
        changes = {}
        for key in ("add", "drop"):
            names = caps.get(key) or []
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ConfigError(path, f"{w}.securityContext.capabilities.{key}", "expected a list of capability names")
            changes[key] = tuple(names)
        mounts = []
        for j, vm in enumerate(_expect(path, f"{w}.volumeMounts", raw.get("volumeMounts", []) or [], list, "a list")):
            wm = f"{w}.volumeMounts[{j}]"
            _expect(path, wm, vm, dict, "a mapping")
            prop = vm.get("mountPropagation")
            if prop is not None:
                _expect(path, f"{wm}.mountPropagation", prop, str, "None, HostToContainer or Bidirectional")
            read_only = vm.get("readOnly", False)
            _expect(path, f"{wm}.readOnly", read_only, bool, "true or false")
            mounts.append(VolumeMount(_expect(path, f"{wm}.name", vm.get("name"), str, "a volume name"),
                                      absolute_path(path, f"{wm}.mountPath", vm.get("mountPath")), prop, read_only))
        workdir = raw.get("workingDir") or ""
        containers.append(Container(cname, tuple(mounts), privileged, tuple(command), workdir,
                                    changes["add"], changes["drop"]))
    return Pod(name, tuple(containers), volumes, obj)


def load_pods(path, strict: bool = False) -> list[Pod]:
    """Every Pod in a YAML file (several documents, or a List with items).

    With `strict`, a Pod with a field the API's Pod type does not have, or a key given twice,
    is refused as kube-apiserver v1.34 refuses it under kubectl's default --validate=strict
    (labkit.strict.StrictDecodingError, in kubectl's words), before anything else is read: a
    misspelt `mountPropagaton` would otherwise be dropped without a word."""
    from labkit.inputs import load_yaml_all, read_text

    text = read_text(path)
    raw = load_yaml_all(path, text)
    if strict:
        from labkit.strict import KeyPositions, check_object, key_positions

        positions = key_positions(text)
        for index, doc in enumerate(raw):
            where = positions[index] if index < len(positions) else KeyPositions()
            if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                for i, item in enumerate(doc["items"]):
                    check_object(item, str(path), where.within(f"items[{i}]."))
            else:
                check_object(doc, str(path), where)
    docs = [d for d in raw if d is not None]
    pods = []
    for d, doc in enumerate(docs):
        where = f"document {d + 1}" if len(docs) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = _expect(path, f"{where}.items".lstrip("."), doc.get("items"), list, "a list of Pods")
            pods += [parse_pod(item, path, f"{where}.items[{i}]".lstrip(".")) for i, item in enumerate(items)]
        else:
            pods.append(parse_pod(doc, path, where))
    if not pods:
        raise ConfigError(path, None, "expected at least one Pod, found none")
    return pods


# -- API server --------------------------------------------------------------------------------


def validate(pod: Pod) -> None:
    """API server validation; raises Refused with the server's message. The containers' names,
    ports and resources go through the API server's own validator (labkit.apiserver.podvalidation;
    no image required: the node's binaries run in its place), then the volume mounts."""
    from labkit.apiserver.podvalidation import validate_pod_containers, with_defaults

    spec = (pod.source or {}).get("spec") if isinstance(pod.source, dict) else None
    errors = [str(e) for e in validate_pod_containers(with_defaults(spec or {}), require_image=False)] if spec else []
    for i, c in enumerate(pod.containers):
        seen_paths = set()
        for j, vm in enumerate(c.volume_mounts):
            if vm.name not in pod.volumes:
                errors.append(f'spec.containers[{i}].volumeMounts[{j}].name: Not found: "{vm.name}"')
            if vm.mount_path in seen_paths:
                errors.append(f'spec.containers[{i}].volumeMounts[{j}].mountPath: Invalid value: "{vm.mount_path}": must be unique')
            seen_paths.add(vm.mount_path)
            if vm.propagation is None:
                continue
            where = f"spec.containers[{i}].volumeMounts.mountPropagation"
            if vm.propagation not in SUPPORTED_PROPAGATIONS:
                supported = ", ".join(f'"{p}"' for p in SUPPORTED_PROPAGATIONS)
                errors.append(f'{where}: Unsupported value: "{vm.propagation}": supported values: {supported}')
            if vm.propagation == BIDIRECTIONAL and not c.privileged:
                errors.append(f"{where}: Forbidden: Bidirectional mount propagation is available only to privileged containers")
    if errors:
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise Refused(f'Pod "{pod.name}" is invalid: {detail}', by="api")


# -- kubelet and the runtime -------------------------------------------------------------------


def cri_propagation(mode: str | None) -> str:
    if mode is None or mode == NONE:
        return CRI_PRIVATE
    if mode == HOST_TO_CONTAINER:
        return CRI_HOST_TO_CONTAINER
    if mode == BIDIRECTIONAL:
        return CRI_BIDIRECTIONAL
    raise Refused(f'invalid MountPropagation mode: "{mode}"', by="kubelet")


@dataclass(frozen=True)
class RuntimeMount:
    source: str            # host path, in the node's view
    destination: str       # path in the container
    options: tuple[str, ...]
    read_only: bool

    @property
    def propagation(self) -> str:
        return {"rprivate": "private", "rslave": "slave", "rshared": "shared"}[self.options[1]]


@dataclass(frozen=True)
class RuntimePlan:
    mounts: tuple[RuntimeMount, ...]
    rootfs_propagation: str          # "rshared", "rslave" or "" (runc's default: rslave)

    @property
    def root_propagation(self) -> str:
        return "shared" if self.rootfs_propagation == "rshared" else "slave"


def capabilities(container: Container, runtime_capabilities: int) -> int:
    """The capability mask of the container's process: containerd's default set, changed by
    securityContext.capabilities ("ALL" first, then each name, which the CRI plugin prefixes with
    CAP_ and upper-cases), or everything the runtime has for a privileged container. Names this
    kernel does not know are left out, as runc leaves them out (with a warning)."""
    if container.privileged:
        return runtime_capabilities
    known = set(kernel.CAPABILITIES[:kernel.last_capability() + 1])
    caps = set(DEFAULT_CAPABILITIES)
    upper = lambda names: [n.upper() for n in names]   # ("CAP_X" becomes CAP_CAP_X: unknown)
    if "ALL" in upper(container.capabilities_add):
        caps = set(known)
    if "ALL" in upper(container.capabilities_drop):
        caps = set()
    caps |= {n for n in upper(container.capabilities_add) if n != "ALL"}
    caps -= set(upper(container.capabilities_drop))
    return kernel.capability_mask(caps & known)


def create_error(container_id: str, refusal: Refused) -> str:
    """How CreateContainer reports a spec the runtime refuses (containerd internal/cri/server/
    container_create.go and oci.GenerateSpec's wrapping), as kubelet shows it in the container's
    CreateContainerError."""
    return f"failed to generate container {_go_quote(container_id)} spec: failed to generate spec: {refusal.message}"


def _go_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def runtime_plan(pod: Pod, container: Container, node_mounts: list[mountinfo.Mount]) -> RuntimePlan:
    """The OCI mounts and root propagation containerd asks runc for, or Refused with its error."""
    mounts = []
    rootfs_propagation = ""
    ordered = sorted(container.volume_mounts, key=lambda vm: len([p for p in vm.mount_path.split("/") if p]))
    for vm in ordered:
        source = pod.volumes[vm.name].path
        mode = cri_propagation(vm.propagation)
        if mode == CRI_PRIVATE:
            option = "rprivate"
        else:
            holder = mountinfo.containing_mount(node_mounts, source)
            fields = holder.optional if holder else ()
            shared = any(f.startswith("shared:") for f in fields)
            slave = any(f.startswith("master:") for f in fields)
            where = holder.mountpoint if holder else "/"
            if mode == CRI_BIDIRECTIONAL:
                if not shared:
                    raise Refused(f"path {_go_quote(source)} is mounted on {_go_quote(where)} but it is not a shared mount", by="runtime")
                option = "rshared"
                rootfs_propagation = "rshared"
            else:
                if not (shared or slave):
                    raise Refused(f"path {_go_quote(source)} is mounted on {_go_quote(where)} but it is not a shared or slave mount", by="runtime")
                option = "rslave"
                if rootfs_propagation not in ("rshared", "rslave"):
                    rootfs_propagation = "rslave"
        mounts.append(RuntimeMount(source, vm.mount_path, ("rbind", option, "ro" if vm.read_only else "rw"), vm.read_only))
    return RuntimePlan(tuple(mounts), rootfs_propagation)
