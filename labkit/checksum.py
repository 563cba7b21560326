"""kubelet's checkpoint checksum (pkg/kubelet/checkpointmanager/checksum, v1.34.1): FNV-1a, 32 bit
(`hash/fnv` New32a), over the go-spew `%#v` dump of the checkpoint's data (k8s.io/utils/dump
ForHash). Each checkpoint renders its own dump (labkit.numa.checkpoint: the CPU and Memory
Managers'; labkit.devices.checkpoint: the device manager's); the hash over it is this one."""


def fnv1a32(text: str) -> int:
    h = 0x811C9DC5
    for byte in text.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h
