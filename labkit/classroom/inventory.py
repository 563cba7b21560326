"""The class inventory: which machine belongs to which student and how to reach it over SSH.

Six formats, chosen by the file name and, failing that, by the content:

YAML (`.yaml` / `.yml`): a list of machines, or a mapping with `machines:` and optional
`defaults:` (any machine field, applied where a machine leaves it out):

    defaults: {user: root, key: ~/.ssh/workshop}
    machines:
      - {name: alice, host: 10.0.0.11}
      - {name: bob, host: 10.0.0.12, port: 2222}

CSV (`.csv`): a header line naming the columns `name,host[,port][,user][,key]`, then one
machine per line.

`vagrant ssh-config` output, as is: `Host NAME` blocks with `HostName`, `Port`, `User`,
`IdentityFile`. Of the other keywords, the key and host-key algorithm lists are passed on to ssh
(old boxes need `+ssh-rsa`); the rest are ignored, notably `StrictHostKeyChecking no` and
`UserKnownHostsFile /dev/null` (labkit pins host keys itself, see remote.py).

Ansible inventories (ansible_inventory.py): INI (`.ini`, or a first line that is a `[group]`
header), YAML (a mapping of groups with `hosts:` / `children:` / `vars:`), and the JSON of
`ansible-inventory --list` (`.json`, or content starting with `{`). The host name is the
student's name; `ansible_host`, `ansible_port`, `ansible_user`, `ansible_ssh_private_key_file`
the rest. `group` takes one group's hosts only (Ansible inventories only).

Fields: `name` (the student; also a directory name in the output, so letters, digits, `.`, `_`,
`-`), `host`, `port` (default 22), `user` (default root; other users run labkit through
`sudo -n`), `key` (a private key file; relative paths are relative to the inventory file).
Every error names the file and the field: `FILE: machines[2].port: expected ...`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from labkit.classroom import ansible_inventory
from labkit.errors import ConfigError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# host names, IPv4/IPv6 addresses; never starting with '-' (it would read as an ssh option)
HOST_RE = re.compile(r"^[A-Za-z0-9_\[][A-Za-z0-9._:%\[\]-]{0,252}$")
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$")
# names the outputs use at the top of the output directory
RESERVED_NAMES = {"gradebook.csv", "report.html", "class.json", "known_hosts", "passes-seen.jsonl"}
FIELDS = ("name", "host", "port", "user", "key")
# ssh-config keywords passed on to ssh as -o KEY=VALUE (lower-case keyword -> ssh's spelling)
PASSED_OPTIONS = {
    "pubkeyacceptedkeytypes": "PubkeyAcceptedKeyTypes",
    "pubkeyacceptedalgorithms": "PubkeyAcceptedAlgorithms",
    "hostkeyalgorithms": "HostKeyAlgorithms",
}
OPTION_VALUE_RE = re.compile(r"^[A-Za-z0-9@.,+_-]{1,500}$")


@dataclass(frozen=True)
class Machine:
    name: str
    host: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    options: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"name": self.name, "host": self.host, "port": self.port, "user": self.user, "key": self.key}


def load(path: Path, group: str | None = None) -> list[Machine]:
    """Read an inventory; raises ConfigError (one line, exit 2) naming the file and field."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(path, None, "no such file")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, None, f"cannot read it: {exc}")
    suffix = path.suffix.lower()
    data = None
    if suffix == ".json":
        data = _json(path, text)                                   # ansible-inventory --list
    elif suffix not in (".csv", ".yaml", ".yml", ".ini") and _listed_json(text) is not None:
        data = _listed_json(text)
    elif suffix == ".ini" or (suffix not in (".csv", ".yaml", ".yml") and ansible_inventory.looks_like_ini(text)):
        data = ansible_inventory.list_with_ansible(path)           # Ansible INI
    elif suffix != ".csv" and (suffix in (".yaml", ".yml") or not _looks_like_ssh_config(text)):
        raw = _yaml(path, text)
        if ansible_inventory.looks_like_yaml(raw):
            data = ansible_inventory.list_with_ansible(path)       # Ansible YAML
        else:
            machines = _from_yaml(path, raw)
    elif suffix == ".csv":
        machines = _from_csv(path, text)
    else:
        machines = _from_ssh_config(path, text)
    if data is not None:
        machines = _from_ansible(path, data, group)
    elif group is not None:
        raise ConfigError(path, None, "a group can be chosen in an Ansible inventory only; this one is not")
    if not machines:
        raise ConfigError(path, None, "lists no machines")
    seen: dict[str, str] = {}
    for m, where in machines:
        if m.name in seen:
            raise ConfigError(path, _at(where, "name"), f"{m.name!r} is listed twice (also at {seen[m.name]})")
        seen[m.name] = where
    return [m for m, _ in machines]


# -- checking one machine's fields ---------------------------------------------------------------

def _at(where: str, name: str) -> str:
    """machines[2].port (YAML), line 3: port (CSV), Host alice: port (ssh-config)."""
    return f"{where}.{name}" if where.startswith("machines") else f"{where}: {name}"


def _machine(path: Path, where: str, raw: dict, options=()) -> tuple[Machine, str]:
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise ConfigError(path, _at(where, unknown[0]), f"unknown field (fields: {', '.join(FIELDS)})")
    for required in ("name", "host"):
        if raw.get(required) in (None, ""):
            raise ConfigError(path, _at(where, required), "missing")
    name = _text(path, _at(where, "name"), raw["name"])
    if not NAME_RE.match(name) or name in RESERVED_NAMES:
        raise ConfigError(path, _at(where, "name"), f"{name!r}: expected 1-64 letters, digits, '.', '_' or '-', "
                                                 f"starting with a letter or digit (and none of {', '.join(sorted(RESERVED_NAMES))})")
    host = _text(path, _at(where, "host"), raw["host"])
    if not HOST_RE.match(host):
        raise ConfigError(path, _at(where, "host"), f"{host!r} is not a host name or address")
    port = raw.get("port")
    if port in (None, ""):
        port = 22
    elif isinstance(port, bool) or not (isinstance(port, int) or (isinstance(port, str) and port.strip().isdigit())):
        raise ConfigError(path, _at(where, "port"), f"expected a number 1-65535, got {port!r}")
    port = int(port)
    if not 1 <= port <= 65535:
        raise ConfigError(path, _at(where, "port"), f"expected a number 1-65535, got {port}")
    user = raw.get("user")
    user = "root" if user in (None, "") else _text(path, _at(where, "user"), user)
    if not USER_RE.match(user):
        raise ConfigError(path, _at(where, "user"), f"{user!r} is not a user name")
    key = raw.get("key")
    if key in (None, ""):
        key = None
    else:
        key_path = Path(_text(path, _at(where, "key"), key)).expanduser()
        if not key_path.is_absolute():
            key_path = path.parent / key_path
        if not key_path.is_file():
            raise ConfigError(path, _at(where, "key"), f"{str(key_path)!r}: no such key file")
        key = str(key_path)
    return Machine(name, host, port, user, key, tuple(options)), where


def _text(path: Path, where: str, value) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        raise ConfigError(path, where, f"expected a string, got {value!r}")
    text = str(value).strip()
    if any(c in text for c in "\n\r\0"):
        raise ConfigError(path, where, f"{text!r}: line breaks are not allowed")
    return text


# -- YAML ----------------------------------------------------------------------------------------

def _yaml(path: Path, text: str):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise ConfigError(path, where, f"not valid YAML: {getattr(exc, 'problem', None) or exc}")


def _from_yaml(path: Path, data) -> list[tuple[Machine, str]]:
    defaults: dict = {}
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"machines", "defaults"}, key=str)
        if unknown:
            raise ConfigError(path, str(unknown[0]), "unknown key (expected machines and optionally defaults)")
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, dict):
            raise ConfigError(path, "defaults", f"expected a mapping, got {type(defaults).__name__}")
        if "name" in defaults:
            raise ConfigError(path, "defaults.name", "every machine needs a name of its own")
        for key in defaults:
            if key not in FIELDS:
                raise ConfigError(path, f"defaults.{key}", f"unknown field (fields: {', '.join(FIELDS[1:])})")
        data = data.get("machines")
        prefix = "machines"
    else:
        prefix = "machines"
    if not isinstance(data, list):
        raise ConfigError(path, prefix, "expected a list of machines (name, host, port, user, key), "
                                        "or `vagrant ssh-config` output")
    out = []
    for i, item in enumerate(data):
        where = f"{prefix}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(path, where, f"expected a mapping with name, host, port, user, key, got {item!r}")
        out.append(_machine(path, where, {**defaults, **item}))
    return out


# -- Ansible -------------------------------------------------------------------------------------

def _json(path: Path, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, f"line {exc.lineno}", f"not valid JSON: {exc.msg}")


def _listed_json(text: str):
    """The content as `ansible-inventory --list` JSON, or None when it is not that (YAML may start with { too)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if ansible_inventory.looks_like_json_list(data) else None


def _from_ansible(path: Path, data, group: str | None) -> list[tuple[Machine, str]]:
    return [_machine(path, where, fields) for where, fields in ansible_inventory.hosts(path, data, group)]


# -- CSV -----------------------------------------------------------------------------------------

def _from_csv(path: Path, text: str) -> list[tuple[Machine, str]]:
    lines = [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
    except csv.Error as exc:
        raise ConfigError(path, None, f"not valid CSV: {exc}")
    if not rows:
        raise ConfigError(path, None, "lists no machines")
    header = [h.strip().lower() for h in rows[0]]
    for column in header:
        if column not in FIELDS:
            raise ConfigError(path, f"header.{column or '(empty)'}", f"unknown column (columns: {', '.join(FIELDS)})")
    for required in ("name", "host"):
        if required not in header:
            raise ConfigError(path, "header", f"needs a {required!r} column (columns: {', '.join(FIELDS)})")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        where = f"line {number}"
        if len(row) != len(header):
            raise ConfigError(path, where, f"expected {len(header)} columns ({', '.join(header)}), got {len(row)}")
        out.append(_machine(path, where, dict(zip(header, (c.strip() for c in row)))))
    return out


# -- vagrant ssh-config --------------------------------------------------------------------------

def _looks_like_ssh_config(text: str) -> bool:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line.split(None, 1)[0].lower() == "host"
    return False


def _ssh_words(path: Path, number: int, line: str) -> tuple[str, str]:
    keyword, _, rest = line.partition(" ") if " " in line.split("=")[0] else line.partition("=")
    rest = rest.strip().lstrip("=").strip()
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(path, f"line {number}: {keyword}", f"cannot parse the value: {exc}")
    if len(words) != 1:
        raise ConfigError(path, f"line {number}: {keyword}", f"expected one value, got {rest!r}")
    return keyword.strip().lower(), words[0]


def _from_ssh_config(path: Path, text: str) -> list[tuple[Machine, str]]:
    blocks: list[tuple[str, int, dict, list]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, value = _ssh_words(path, number, line)
        if keyword == "match":
            raise ConfigError(path, f"line {number}: Match", "Match blocks are not supported; give one Host block per machine")
        if keyword == "host":
            if any(c in value for c in "*?!"):
                raise ConfigError(path, f"line {number}: Host", f"{value!r}: patterns are not supported; give one Host block per machine")
            blocks.append((value, number, {"name": value}, []))
            continue
        if not blocks:
            raise ConfigError(path, f"line {number}: {keyword}", "comes before the first Host line")
        name, _, fields, options = blocks[-1]
        where = f"Host {name}"
        if keyword == "hostname":
            fields["host"] = value
        elif keyword == "port":
            fields["port"] = value
        elif keyword == "user":
            fields["user"] = value
        elif keyword == "identityfile":
            fields.setdefault("key", value)   # ssh tries them in order; the first one is used here
        elif keyword in PASSED_OPTIONS:
            if not OPTION_VALUE_RE.match(value):
                raise ConfigError(path, f"{where}: {PASSED_OPTIONS[keyword]}", f"unexpected value {value!r}")
            options.append((PASSED_OPTIONS[keyword], value))
    out = []
    for name, _number, fields, options in blocks:
        fields.setdefault("host", name)
        machine, _ = _machine(path, f"Host {name}", fields, options)
        out.append((machine, f"Host {name}"))
    return out
