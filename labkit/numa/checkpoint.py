"""kubelet's `cpu_manager_state` and `memory_manager_state` checkpoint files, checksum included.

Format and checks follow kubernetes/kubernetes (v1.34; unchanged since v1.32):
* `cpumanager/state/checkpoint.go` and `state_checkpoint.go`: the V2 file
  {"policyName", "defaultCpuSet", "entries": {podUID: {container: cpuset}} (omitted when empty),
  "checksum"}; on restore kubelet tries the V1 layout (entries keyed by container ID) first, then
  V2; a checksum of 0 is accepted; then the policy name, the default set and every entry are checked;
* `memorymanager/state/checkpoint.go` and `state_checkpoint.go`: {"policyName", "machineState":
  {node: {"numberOfAssignments", "memoryMap": {type: {"total", "systemReserved", "allocatable",
  "reserved", "free"}}, "cells"}}, "entries": {podUID: {container: [{"numaAffinity", "type",
  "size"}]}} (omitted when empty), "checksum"};
* `checkpointmanager/checksum`: the checksum is FNV-1a (32 bit) over a go-spew `%#v` dump of the
  checkpoint struct with its checksum field set to 0 (`k8s.io/utils/dump.ForHash`: SortKeys,
  DisableMethods, no pointer addresses). `_spew_*` below render exactly that dump for these two
  structs: types in parentheses for the top level and struct fields, none for map keys/values and
  slice elements, pointers inside maps as `<*>`, nil maps and slices as `<nil>`.

Both dumps are checked against checksums from kubelet's own tests (TestCheckpointStateRestore of
both managers). Restore errors carry kubelet's messages, wrapped as kubelet wraps them when it
refuses to start. Go's own JSON syntax errors are reproduced for the common cases (truncated file,
a stray character); other JSON type errors are reported in Go's form for the top-level fields.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from labkit.checksum import fnv1a32
from labkit.gojson import value_type
from labkit.numa import cpuset
from labkit.numa.cpumanager import CPUState
from labkit.numa.memorymanager import Block, MemoryState, MemoryTable, NUMANodeState

CPU_MANAGER_STATE = "cpu_manager_state"
MEMORY_MANAGER_STATE = "memory_manager_state"


class CheckpointError(Exception):
    """Why kubelet refuses a checkpoint (the message kubelet prints)."""


# -- go-spew dumps -------------------------------------------------------------------------------

def _spew_string_map(m: dict | None, value) -> str:
    if m is None:
        return "<nil>"
    return "map[" + " ".join(f"{k}:{value(m[k])}" for k in sorted(m)) + "]"


def _spew_ints(values: list[int] | None) -> str:
    return "<nil>" if values is None else "[" + " ".join(str(v) for v in values) + "]"


def cpu_checkpoint_dump(policy: str, default_cpu_set: str, entries: dict | None, v1: bool = False) -> str:
    """The string kubelet hashes for a CPU Manager checkpoint (V1 layout: entries by container ID)."""
    if v1:
        rendered = _spew_string_map(entries, lambda v: v)
        entries_type = "map[string]string"
    else:
        rendered = _spew_string_map(entries, lambda inner: _spew_string_map(inner, lambda v: v))
        entries_type = "map[string]map[string]string"
    return (f"(*state.CPUManagerCheckpoint){{PolicyName:(string){policy} DefaultCPUSet:(string){default_cpu_set} "
            f"Entries:({entries_type}){rendered} Checksum:(checksum.Checksum)0}}")


def cpu_checksum(policy: str, default_cpu_set: str, entries: dict | None, v1: bool = False) -> int:
    return fnv1a32(cpu_checkpoint_dump(policy, default_cpu_set, entries, v1))


def _spew_table(t: dict | None) -> str:
    if t is None:
        return "<nil>"
    return (f"<*>{{TotalMemSize:(uint64){t['total']} SystemReserved:(uint64){t['systemReserved']} "
            f"Allocatable:(uint64){t['allocatable']} Reserved:(uint64){t['reserved']} Free:(uint64){t['free']}}}")


def _spew_node_state(n: dict | None) -> str:
    if n is None:
        return "<nil>"
    memory_map = n.get("memoryMap")
    tables = "<nil>" if memory_map is None else \
        "map[" + " ".join(f"{k}:{_spew_table(memory_map[k])}" for k in sorted(memory_map)) + "]"
    return (f"<*>{{NumberOfAssignments:(int){n['numberOfAssignments']} "
            f"MemoryMap:(map[v1.ResourceName]*state.MemoryTable){tables} Cells:([]int){_spew_ints(n.get('cells'))}}}")


def _spew_blocks(blocks: list | None) -> str:
    if blocks is None:
        return "<nil>"
    return "[" + " ".join(f"{{NUMAAffinity:([]int){_spew_ints(b.get('numaAffinity'))} "
                          f"Type:(v1.ResourceName){b.get('type') or ''} Size:(uint64){b.get('size') or 0}}}"
                          for b in blocks) + "]"


def memory_checkpoint_dump(policy: str, machine_state: dict | None, entries: dict | None) -> str:
    """The string kubelet hashes for a Memory Manager checkpoint (JSON-shaped input)."""
    if machine_state is None:
        state = "<nil>"
    else:
        state = "map[" + " ".join(f"{k}:{_spew_node_state(machine_state[k])}"
                                  for k in sorted(machine_state, key=int)) + "]"
    rendered = _spew_string_map(entries, lambda inner: _spew_string_map(inner, _spew_blocks))
    return (f"(*state.MemoryManagerCheckpoint){{PolicyName:(string){policy} MachineState:(state.NUMANodeMap){state} "
            f"Entries:(state.ContainerMemoryAssignments){rendered} Checksum:(checksum.Checksum)0}}")


def memory_checksum(policy: str, machine_state: dict | None, entries: dict | None) -> int:
    return fnv1a32(memory_checkpoint_dump(policy, machine_state, entries))


# -- files ----------------------------------------------------------------------------------------

def _go_json(obj: Any) -> str:
    """encoding/json Marshal: compact; map keys sorted as strings (struct fields keep their order)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _sorted_map(m: dict) -> dict:
    return {k: m[k] for k in sorted(m, key=str)}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_cpu_checkpoint(directory: Path, policy: str, state: CPUState) -> Path:
    entries = {pod: {c: cpuset.format_cpus(cpus) for c, cpus in containers.items()}
               for pod, containers in state.assignments.items()}
    default = cpuset.format_cpus(state.default_cpu_set)
    data: dict[str, Any] = {"policyName": policy, "defaultCpuSet": default}
    if entries:
        data["entries"] = _sorted_map({pod: _sorted_map(c) for pod, c in entries.items()})
    data["checksum"] = cpu_checksum(policy, default, entries)
    path = Path(directory) / CPU_MANAGER_STATE
    _write(path, _go_json(data))
    return path


def memory_state_to_json(state: MemoryState) -> tuple[dict, dict]:
    machine = {}
    for node_id in sorted(state.machine_state):
        node = state.machine_state[node_id]
        machine[str(node_id)] = {
            "numberOfAssignments": node.number_of_assignments,
            "memoryMap": {r: {"total": t.total, "systemReserved": t.system_reserved, "allocatable": t.allocatable,
                              "reserved": t.reserved, "free": t.free}
                          for r, t in sorted(node.memory_map.items())},
            "cells": list(node.cells),
        }
    entries = {pod: {c: [{"numaAffinity": list(b.numa_affinity), "type": b.type, "size": b.size} for b in blocks]
                     for c, blocks in sorted(containers.items())}
               for pod, containers in sorted(state.assignments.items())}
    return machine, entries


def write_memory_checkpoint(directory: Path, policy: str, state: MemoryState) -> Path:
    machine, entries = memory_state_to_json(state)
    data: dict[str, Any] = {"policyName": policy, "machineState": _sorted_map(machine)}
    if entries:
        data["entries"] = entries
    data["checksum"] = memory_checksum(policy, machine, entries)
    path = Path(directory) / MEMORY_MANAGER_STATE
    _write(path, _go_json(data))
    return path


def _go_syntax_error(text: str, exc: json.JSONDecodeError) -> str:
    if not text.strip() or exc.pos >= len(text.rstrip()):
        return "unexpected end of JSON input"
    return f"invalid character {text[exc.pos]!r} looking for beginning of value"


def _load(path: Path) -> Any | None:
    """GetCheckpoint's read + json.Unmarshal; None when there is no file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(_go_syntax_error(text, exc)) from None


def _fields(obj: Any, names: tuple[str, ...]) -> Any:
    """Go decodes JSON object keys into struct fields case-insensitively (the last match wins)."""
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        for name in names:
            if key.lower() == name.lower():
                out[name] = value
    return out


_CPU_FIELDS = ("policyName", "defaultCpuSet", "entries", "checksum")
_MEMORY_FIELDS = ("policyName", "machineState", "entries", "checksum")
_NODE_FIELDS = ("numberOfAssignments", "memoryMap", "cells")
_TABLE_FIELDS = ("total", "systemReserved", "allocatable", "reserved", "free")
_BLOCK_FIELDS = ("numaAffinity", "type", "size")


def _expect(value: Any, kinds: tuple, struct: str, field_name: str, go_type: str) -> None:
    if value is not None and not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise CheckpointError(f"json: cannot unmarshal {value_type(value)} into Go struct field {struct}.{field_name} "
                              f"of type {go_type}")


def _checksum_field(data: dict, struct: str) -> int:
    value = data.get("checksum", 0)
    _expect(value, (int,), struct, "checksum", "checksum.Checksum")
    if value is None:
        return 0
    if value < 0 or value >= 2 ** 64:
        raise CheckpointError(f"json: cannot unmarshal number {value} into Go struct field {struct}.checksum of "
                              "type checksum.Checksum")
    return value


def _decode_cpu(data: Any, v1: bool) -> tuple[str, str, dict | None, int]:
    """json.Unmarshal into CPUManagerCheckpointV1 / CPUManagerCheckpoint (V2)."""
    struct = "CPUManagerCheckpointV1" if v1 else "CPUManagerCheckpoint"
    if not isinstance(data, dict):
        raise CheckpointError(f"json: cannot unmarshal {value_type(data)} into Go value of type state.{struct}")
    data = _fields(data, _CPU_FIELDS)
    _expect(data.get("policyName"), (str,), struct, "policyName", "string")
    _expect(data.get("defaultCpuSet"), (str,), struct, "defaultCpuSet", "string")
    entries = data["entries"] if "entries" in data else {}
    if entries is not None:
        _expect(entries, (dict,), struct, "entries", "map[string]string" if v1 else "map[string]map[string]string")
        for value in entries.values():
            if v1:
                _expect(value, (str,), struct, "entries", "string")
            else:
                _expect(value, (dict,), struct, "entries", "map[string]string")
                for inner in (value or {}).values():
                    _expect(inner, (str,), struct, "entries", "string")
    return data.get("policyName") or "", data.get("defaultCpuSet") or "", entries, _checksum_field(data, struct)


def _restore_cpu(data: Any, configured_policy: str) -> CPUState:
    """restoreState: try the V1 layout, then V2; migrate V1 entries; then check the content."""
    try:
        policy, default, v1_entries, checksum = _decode_cpu(data, v1=True)
        if checksum != 0 and checksum != cpu_checksum(policy, default, v1_entries, v1=True):
            raise CheckpointError("checkpoint is corrupted")
    except CheckpointError:
        v1_entries = None
        policy, default, entries, checksum = _decode_cpu(data, v1=False)
        if checksum != 0 and checksum != cpu_checksum(policy, default, entries):
            raise CheckpointError("checkpoint is corrupted")
    else:
        # migrateV1CheckpointToV2Checkpoint maps container IDs through the running containers;
        # labkit has none, so any V1 entry is an unknown container ID.
        if v1_entries:
            raise CheckpointError("error migrating v1 checkpoint state to v2 checkpoint state: "
                                  f"containerID '{sorted(v1_entries)[0]}' not found in initial containers list")
        entries = {}
    return _cpu_state(policy, default, entries or {}, configured_policy)


def _cpu_state(policy: str, default: str, entries: dict, configured_policy: str) -> CPUState:
    if policy != configured_policy:
        raise CheckpointError(f'configured policy "{configured_policy}" differs from state checkpoint policy "{policy}"')
    try:
        default_set = cpuset.parse(default)
    except cpuset.CPUSetParseError as exc:
        raise CheckpointError(f'could not parse default cpu set "{default}": {exc}') from None
    state = CPUState(default_set, {})
    for pod in sorted(entries):
        for container in sorted(entries[pod] or {}):
            text = entries[pod][container]
            try:
                state.set_cpu_set(pod, container, cpuset.parse(text))
            except cpuset.CPUSetParseError as exc:
                raise CheckpointError(f'could not parse cpuset "{text}" for container "{container}" in pod "{pod}": '
                                      f'{exc}') from None
    return state


def _read_checkpoint(path: Path, restore, configured_policy: str, manager: str):
    """The state `restore` makes of the file, None when there is none; CheckpointError as kubelet
    words it (NewCheckpointState of pkg/kubelet/cm/cpumanager/state/state_checkpoint.go and of
    memorymanager/state/state_checkpoint.go, when restoreState fails: the same words, each naming
    its manager)."""
    try:
        data = _load(path)
        if data is None:
            return None
        return restore(data, configured_policy)
    except CheckpointError as exc:
        raise CheckpointError(f"could not restore state from checkpoint: {exc}, please drain this node and delete "
                              f'the {manager} checkpoint file "{path}" before restarting Kubelet') from None


def read_cpu_checkpoint(directory: Path, configured_policy: str) -> CPUState | None:
    """The restored state, None when there is no file; CheckpointError as kubelet words it."""
    return _read_checkpoint(Path(directory) / CPU_MANAGER_STATE, _restore_cpu, configured_policy, "CPU manager")


def _restore_memory(data: Any, configured_policy: str) -> MemoryState:
    struct = "MemoryManagerCheckpoint"
    if not isinstance(data, dict):
        raise CheckpointError(f"json: cannot unmarshal {value_type(data)} into Go value of type state.{struct}")
    data = _normalize_memory(data)
    _expect(data.get("policyName"), (str,), struct, "policyName", "string")
    _expect(data.get("machineState"), (dict,), struct, "machineState", "state.NUMANodeMap")
    _expect(data.get("entries"), (dict,), struct, "entries", "state.ContainerMemoryAssignments")
    checksum = _checksum_field(data, struct)
    policy = data.get("policyName") or ""
    machine = data["machineState"] if "machineState" in data else {}
    entries = data["entries"] if "entries" in data else {}
    try:
        expected = memory_checksum(policy, _with_defaults(machine), entries)
    except (KeyError, TypeError, AttributeError):
        raise CheckpointError(f"json: cannot unmarshal the machine state into Go struct field {struct}.machineState "
                              "of type state.NUMANodeMap") from None
    if checksum != expected:
        raise CheckpointError("checkpoint is corrupted")
    if policy != configured_policy:
        raise CheckpointError(f'[memorymanager] configured policy "{configured_policy}" differs from state '
                              f'checkpoint policy "{policy}"')
    state = MemoryState()
    for node_id, node in (machine or {}).items():
        node = node or {}
        tables = {r: MemoryTable(t.get("total", 0), t.get("systemReserved", 0), t.get("allocatable", 0),
                                 t.get("reserved", 0), t.get("free", 0)) for r, t in (node.get("memoryMap") or {}).items()}
        state.machine_state[int(node_id)] = NUMANodeState(node.get("numberOfAssignments", 0), tables,
                                                          list(node.get("cells") or []))
    for pod, containers in (entries or {}).items():
        for container, blocks in (containers or {}).items():
            state.set_blocks(pod, container, [Block(list(b.get("numaAffinity") or []), b.get("type", ""),
                                                    b.get("size", 0)) for b in blocks or []])
    return state


def _normalize_memory(data: dict) -> dict:
    data = _fields(data, _MEMORY_FIELDS)
    machine = data.get("machineState")
    if isinstance(machine, dict):
        for node_id, node in machine.items():
            node = _fields(node, _NODE_FIELDS)
            if isinstance(node, dict) and isinstance(node.get("memoryMap"), dict):
                node["memoryMap"] = {r: _fields(t, _TABLE_FIELDS) for r, t in node["memoryMap"].items()}
            machine[node_id] = node
    entries = data.get("entries")
    if isinstance(entries, dict):
        for containers in entries.values():
            if isinstance(containers, dict):
                for name, blocks in containers.items():
                    if isinstance(blocks, list):
                        containers[name] = [_fields(b, _BLOCK_FIELDS) for b in blocks]
    return data


def _with_defaults(machine: dict | None) -> dict | None:
    """Missing numeric fields decode to 0 in Go; missing cells stay nil."""
    if machine is None:
        return None
    out = {}
    for node_id, node in machine.items():
        if node is None:
            out[node_id] = None
            continue
        memory_map = node.get("memoryMap")
        out[node_id] = {
            "numberOfAssignments": node.get("numberOfAssignments", 0),
            "memoryMap": None if memory_map is None else {
                r: None if t is None else {k: t.get(k, 0) for k in ("total", "systemReserved", "allocatable",
                                                                    "reserved", "free")}
                for r, t in memory_map.items()},
            "cells": node.get("cells"),
        }
    return out


def read_memory_checkpoint(directory: Path, configured_policy: str) -> MemoryState | None:
    """The restored state, None when there is no file; CheckpointError as kubelet words it."""
    return _read_checkpoint(Path(directory) / MEMORY_MANAGER_STATE, _restore_memory, configured_policy,
                            "memory manager")
