"""Ansible inventories as class inventories: INI, YAML, and `ansible-inventory --list` JSON.

The JSON that `ansible-inventory -i FILE --list` prints is read directly. INI and YAML inventories
are handed to ansible-core's own parser (`ansible-inventory --list`, from the same virtualenv as
labkit or else from PATH), with only its `ini` and `yaml` inventory plugins enabled: an executable
inventory file is never run as a script, and a file the parser cannot read is an error, not an
empty class. So whatever Ansible makes of the file (groups, group vars, host ranges like
`student-[01:20]`) is what labkit grades.

Each host becomes a machine: the inventory host name is the student's name; `ansible_host`,
`ansible_port`, `ansible_user` and `ansible_ssh_private_key_file` (or their older `ansible_ssh_*`
spellings) give host, port, user and key. `group` picks the hosts of one group (with its child
groups); by default every host of the inventory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from labkit.errors import ConfigError

FIELD_VARS = {
    "host": ("ansible_host", "ansible_ssh_host"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "user": ("ansible_user", "ansible_ssh_user", "ansible_remote_user"),
    "key": ("ansible_ssh_private_key_file", "ansible_private_key_file"),
}
GROUP_KEYS = {"hosts", "children", "vars"}


def looks_like_json_list(data) -> bool:
    """`ansible-inventory --list` output: a mapping with `_meta` or an `all` group."""
    return isinstance(data, dict) and ("_meta" in data or isinstance(data.get("all"), dict))


def looks_like_ini(text: str) -> bool:
    """An Ansible INI inventory: its first line that says anything is a [group] header or a host
    line with ansible_* variables."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";")):
            return line.startswith("[") or " ansible_" in line
    return False


def looks_like_yaml(data) -> bool:
    """An Ansible YAML inventory: a mapping of groups, each a mapping of hosts / children / vars."""
    return (isinstance(data, dict) and bool(data) and "machines" not in data
            and all(isinstance(g, dict) and set(g) <= GROUP_KEYS or g is None for g in data.values()))


def ansible_inventory_command() -> str | None:
    beside = Path(sys.executable).parent / "ansible-inventory"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ansible-inventory")


def list_with_ansible(path: Path, timeout: float = 120) -> dict:
    """`ansible-inventory -i PATH --list`, parsed; ConfigError with Ansible's reason when it fails."""
    command = ansible_inventory_command()
    if command is None:
        raise ConfigError(path, None, "an Ansible inventory: reading it needs ansible-core "
                                      "(pip install 'labkit[class]' or ansible-core), which is not installed")
    env = {**os.environ, "ANSIBLE_INVENTORY_ENABLED": "ini,yaml", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
           "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true", "PYTHONWARNINGS": "ignore", "ANSIBLE_NOCOLOR": "1"}
    try:
        run = subprocess.run([command, "-i", str(path), "--list"], capture_output=True, text=True,
                             timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(path, None, f"ansible-inventory failed: {exc}")
    if run.returncode != 0:
        lines = [l.strip() for l in run.stderr.splitlines() if l.strip() and "<<<" not in l]
        reason = next((l for l in lines if "Failed to parse" in l or "Expected" in l), lines[-1] if lines else "")
        raise ConfigError(path, None, f"ansible-inventory cannot read it: {reason[:300] or f'exit {run.returncode}'}")
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, None, f"ansible-inventory printed no JSON ({exc.msg})")


def hosts(path: Path, data: dict, group: str | None = None) -> list[tuple[str, dict]]:
    """(where, machine fields) per host of the listed inventory, in the inventory's order."""
    if not looks_like_json_list(data):
        raise ConfigError(path, None, "not `ansible-inventory --list` output (no _meta, no all group)")
    meta = data.get("_meta", {})
    hostvars = meta.get("hostvars", {}) if isinstance(meta, dict) else None
    if not isinstance(hostvars, dict):
        raise ConfigError(path, "_meta.hostvars", "expected a mapping of host names to variables")
    start = group or "all"
    if start != "all" and start not in data:
        groups = sorted(k for k in data if k != "_meta")
        raise ConfigError(path, None, f"no group {start!r} (groups: {', '.join(groups)})")
    names: list[str] = []
    _collect(path, data, start, names, set())
    out = []
    for name in names:
        variables = hostvars.get(name) or {}
        if not isinstance(variables, dict):
            raise ConfigError(path, f"host {name}", "its variables are not a mapping")
        fields = {"name": name}
        for field, keys in FIELD_VARS.items():
            for key in keys:
                if variables.get(key) not in (None, ""):
                    fields[field] = variables[key]
                    break
        fields.setdefault("host", name)
        out.append((f"host {name}", fields))
    return out


def _collect(path: Path, data: dict, group: str, names: list[str], visiting: set[str]) -> None:
    if group in visiting:
        raise ConfigError(path, group, "the group contains itself")
    entry = data.get(group) or {}
    if not isinstance(entry, dict):
        raise ConfigError(path, group, "expected a mapping with hosts and children")
    visiting = visiting | {group}
    for name in entry.get("hosts") or []:
        if not isinstance(name, str):
            raise ConfigError(path, f"{group}.hosts", f"expected host names, got {name!r}")
        if name not in names:
            names.append(name)
    for child in entry.get("children") or []:
        _collect(path, data, child, names, visiting)
