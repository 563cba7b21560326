"""tkestack/gpu-manager's share mode (pkg/algorithm/nvidia/share.go, sort keys in
pkg/device/nvidia/sort.go): a fractional request (vcuda-core < 100) goes to the first GPU, in the
order of fewest allocatable cores, then fewest free 256 MiB memory blocks, then fewest processes,
then lowest minor number, that has enough cores and memory — best fit. kubelet itself only ever
sees whole, interchangeable fake device IDs; the fraction lives in gpu-manager's accounting."""

from __future__ import annotations

from dataclasses import dataclass

MEMORY_BLOCK = 268435456


@dataclass
class GPU:
    minor: int
    allocatable_cores: int
    allocatable_memory_bytes: int
    pids: int = 0

    @property
    def path(self) -> str:
        return f"/dev/nvidia{self.minor}"


def evaluate_share(gpus: list[GPU], cores: int, memory_bytes: int) -> list[GPU]:
    ordered = sorted(gpus, key=lambda g: (g.allocatable_cores, g.allocatable_memory_bytes // MEMORY_BLOCK, g.pids, g.minor))
    for gpu in ordered:
        if gpu.allocatable_cores >= cores and gpu.allocatable_memory_bytes >= memory_bytes:
            return [gpu]
    return []


def mark_occupied(gpu: GPU, cores: int, memory_bytes: int) -> None:
    gpu.allocatable_cores -= cores
    gpu.allocatable_memory_bytes -= memory_bytes
