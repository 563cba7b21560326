"""A container that receives what Allocate returned, as a real process: the runtime options
kubelet hands the container runtime (manager.go GetDeviceRunContainerOptions →
kuberuntime makeDevices/makeMounts, the envs added to the container's environment).

The process runs in its own mount namespace (unshare --mount --propagation private, so no mount
event reaches the host and every mount dies with the process), with

* the environment: the Allocate answer's `envs` (and nothing of labkit's own beyond its owner
  token, PATH and LABKIT_OWNER);
* mounts: each `host_path` bind-mounted at `<root><container_path>` (read-only when `read_only`),
  where `<root>` is the container's root directory, a lab-owned directory: labkit has no image
  filesystem to pivot into, so the container's paths live under it;
* devices: each device spec's `host_path` (a character device) bind-mounted the same way.

Annotations go to the runtime, not into the container; they are kept beside it in `spec.json`.
CDI devices (`cdi_devices`, which kubelet passes on: pod_devices.go deviceRunContainerOptions,
getCDIDeviceInfo) name entries of CDI specs on the node (/etc/cdi, /var/run/cdi) that the runtime
resolves into edits of the container; this node has none, so a container given any is refused, as
containerd refuses one whose CDI device no spec resolves.

    python -m labkit.devices.container SPEC.json     (run under unshare; `argv` follows the setup)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BASE_ENV = ("PATH", "LABKIT_OWNER")


def argv(spec_file: Path) -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "--",
            sys.executable, "-m", "labkit.devices.container", str(spec_file)]


def write_spec(spec_file: Path, root: Path, options: dict, command: list[str]) -> Path:
    spec_file.write_text(json.dumps({"root": str(root), **options, "argv": command}, indent=1))
    return spec_file


def _bind(source: str, target: Path, read_only: bool) -> None:
    if Path(source).is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
    subprocess.run(["mount", "--bind", source, str(target)], check=True)
    if read_only:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)


def missing_source(spec: dict) -> str | None:
    """The runtime's refusal of a mount or device whose host_path is not there, worded as runc's
    (libcontainer rootfs_linux.go mountToRootfs: `error mounting %q to rootfs at %q: %w`, the
    error of stat), or None when every host_path exists."""
    for m in list(spec.get("mounts") or []) + list(spec.get("devices") or []):
        source = str(m.get("host_path") or "")
        if not os.path.lexists(source):
            return (f'error mounting "{source}" to rootfs at "{m.get("container_path")}": '
                    f"stat {source}: no such file or directory")
    return None


def unresolvable_cdi(spec: dict) -> str | None:
    """The runtime's refusal of CDI devices, or None when the answer names none. The node has no CDI
    spec, so no name resolves: containerd's WithCDI (internal/cri/opts) wraps the error of
    container-device-interface's InjectDevices (pkg/cdi/cache.go: `unresolvable CDI devices %s`)."""
    names = [str(c) for c in spec.get("cdi_devices") or []]
    if not names:
        return None
    return f"CDI device injection failed: unresolvable CDI devices {', '.join(names)}"


def inside(spec: dict, error_file: Path | None = None) -> None:
    """Set the mounts up in this (already private) mount namespace, then exec the command; a CDI
    device or a host_path that is not there fails the container as the runtime fails it (written to
    `error_file` and stderr, exit code 1)."""
    root = Path(spec["root"])
    root.mkdir(parents=True, exist_ok=True)
    refused = unresolvable_cdi(spec) or missing_source(spec)
    if refused:
        if error_file is not None:
            error_file.write_text(refused + "\n")
        print(f"container: {refused}", file=sys.stderr)
        raise SystemExit(1)
    for m in spec.get("mounts") or []:
        _bind(m["host_path"], root / m["container_path"].lstrip("/"), bool(m.get("read_only")))
    for d in spec.get("devices") or []:
        _bind(d["host_path"], root / d["container_path"].lstrip("/"), "w" not in (d.get("permissions") or "rw"))
    env = {k: v for k, v in os.environ.items() if k in BASE_ENV}
    env.update(spec.get("envs") or {})
    os.chdir(root)
    os.execvpe(spec["argv"][0], spec["argv"], env)


def added_envs(environment: dict[str, str], options: dict) -> dict[str, str]:
    """What of a container process's environment the Allocate answer accounts for and anything
    else but labkit's own variables: a variable of BASE_ENV counts when the answer sets it (an
    answer that sets PATH changes the container's PATH)."""
    answered = options.get("envs") or {}
    return {k: v for k, v in environment.items() if k not in BASE_ENV or k in answered}


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def mounts(pid: int) -> dict[str, dict]:
    """The mount points of the process's own mount namespace: path -> {root, options}."""
    out = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        out[fields[4].replace("\\040", " ")] = {"root": fields[3], "options": fields[5].split(",")}
    return out


if __name__ == "__main__":
    inside(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[1]).with_name("error"))
