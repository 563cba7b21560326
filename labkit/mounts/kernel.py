"""The system calls mount propagation needs, through ctypes: mount, umount2, unshare, setns, pivot_root,
and the capability calls a container runtime makes before it starts the container's process.

Python 3.11 has no os.unshare / os.setns, and no Python version has os.mount, so these go
straight to libc. Namespace calls only work in a single-threaded process: setns(CLONE_NEWNS)
fails with EINVAL when another thread shares the caller's fs_struct, and unshare(CLONE_NEWNS)
would move only the calling thread. labkit therefore calls them only in freshly started
"party" processes (labkit.mounts.party) and in freshly forked children (`in_namespace`).

Flag values are the kernel's (include/uapi/linux/mount.h, sched.h); the propagation flags are
the ones mount(2) documents for changing a mount's type: exactly one of MS_SHARED, MS_SLAVE,
MS_PRIVATE, MS_UNBINDABLE, optionally with MS_REC.
"""

from __future__ import annotations

import ctypes
import json
import os
import traceback

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_UNBINDABLE = 0x20000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000
MS_SHARED = 0x100000
CLONE_FS = 0x00000200
CLONE_NEWNS = 0x20000
MNT_DETACH = 2

PROPAGATION_FLAGS = {"shared": MS_SHARED, "slave": MS_SLAVE, "private": MS_PRIVATE, "unbindable": MS_UNBINDABLE}

# pivot_root has no glibc wrapper: syscall numbers per architecture (arch/*/syscall tables).
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217, "i686": 217}

# glibc by its soname (Debian, Ubuntu): ctypes.util.find_library("c") runs `ldconfig -p` in a child
# process, for every labkit process that imports this module
_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

# Capabilities (include/uapi/linux/capability.h), by the names runtimes use without the CAP_ prefix.
CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
)
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(rc: int, what: str, path=None) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}", path)


def _b(value) -> bytes | None:
    return None if value is None else os.fsencode(value)


def mount(source, target, fstype=None, flags: int = 0, data=None) -> None:
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}", target)


def change_propagation(target, kind: str, recursive: bool = False) -> None:
    """`mount --make-[r]<kind> target`: one propagation flag per mount(2) call, as the kernel requires."""
    mount(None, target, None, PROPAGATION_FLAGS[kind] | (MS_REC if recursive else 0))


def bind(source, target, recursive: bool = False, readonly: bool = False) -> None:
    mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    if readonly:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def umount(target, lazy: bool = False) -> None:
    _check(_libc.umount2(_b(target), MNT_DETACH if lazy else 0), f"umount {target}", target)


def unshare_mount_namespace() -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")


def enter_mount_namespace(pid: int) -> None:
    """setns into the mount namespace of `pid`; root and cwd become that namespace's root.

    The kernel refuses (EINVAL) a caller whose root and cwd (its fs_struct) other threads share
    (mntns_install: fs->users != 1). A forked child can have threads after all: grpc's fork
    handlers start some in the child of a process that used grpc. unshare(CLONE_FS) first gives
    the caller its own copy."""
    _check(_libc.unshare(CLONE_FS), "unshare(CLONE_FS)")
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, CLONE_NEWNS), f"setns into the mount namespace of pid {pid}")
    finally:
        os.close(fd)


def pivot_root(new_root, put_old) -> None:
    machine = os.uname().machine
    number = _SYS_PIVOT_ROOT.get(machine)
    if number is None:
        raise OSError(38, f"pivot_root: unknown syscall number on {machine}")
    _check(_libc.syscall(ctypes.c_long(number), _b(new_root), _b(put_old)), "pivot_root", new_root)


def last_capability() -> int:
    """The highest capability number this kernel knows (/proc/sys/kernel/cap_last_cap)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        return int(f.read())


def capability_mask(names) -> int:
    return sum(1 << CAPABILITIES.index(name) for name in names)


def capability_names(mask: int) -> list[str]:
    return [name for bit, name in enumerate(CAPABILITIES) if mask >> bit & 1]


def status_mask(pid, field: str = "CapEff") -> int:
    """A capability set of a process as /proc/<pid>/status shows it (CapEff, CapBnd, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise ValueError(f"/proc/{pid}/status has no {field}")


def limit_capabilities(mask: int) -> None:
    """What runc does with a process spec's capabilities before it executes the container's
    command (libcontainer/capabilities): drop everything outside `mask` from the bounding set,
    clear the ambient set, then set effective = permitted = `mask` and inheritable = none (the
    spec containerd writes has no inheritable set). A root process that executes a program after
    this gets permitted = inheritable | bounding = `mask` again, and no more.
    """
    for bit in range(last_capability() + 1):
        if not mask >> bit & 1:
            _check(_libc.prctl(_PR_CAPBSET_DROP, bit, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {bit})")
    _check(_libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    for word in (0, 1):
        bits = (mask >> (32 * word)) & 0xFFFFFFFF
        data[word].effective = data[word].permitted = bits
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def exec_wrapper(mask: int) -> tuple[str, ...]:
    """A command prefix (util-linux setpriv) that runs a program with only the capabilities in
    `mask`, as limit_capabilities leaves a process: what `runc exec` gives a process started in
    a running container (kubectl exec)."""
    keep = "".join(f",+{name.lower()}" for name in capability_names(mask))
    return ("setpriv", "--inh-caps=-all", "--ambient-caps=-all", f"--bounding-set=-all{keep}", "--")


def in_namespace(pid: int, action, *args, capabilities: int | None = None):
    """Run `action(*args)` in a forked child that has joined the mount namespace of `pid`.

    The child is single-threaded (fork keeps only the calling thread), so setns works even when
    this process has threads. With `capabilities` (a mask), the child keeps only those before it
    acts, as a process of a container with that capability set would. The result (JSON-serializable) or the error comes back over a pipe;
    an OSError is raised again here with its errno.
    """
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        try:
            enter_mount_namespace(pid)
            if capabilities is not None:
                limit_capabilities(capabilities)
            reply = {"ok": action(*args)}
        except OSError as exc:
            reply = {"errno": exc.errno, "error": exc.strerror or str(exc), "path": exc.filename}
        except BaseException as exc:  # the child must always answer and exit
            reply = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        try:
            os.write(write_fd, json.dumps(reply).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    with os.fdopen(read_fd, "rb") as pipe:
        while chunk := pipe.read(65536):
            chunks.append(chunk)
    os.waitpid(child, 0)
    reply = json.loads(b"".join(chunks) or b'{"error": "the namespace helper died"}')
    if "ok" in reply:
        return reply["ok"]
    if reply.get("errno") is not None:
        raise OSError(reply["errno"], reply["error"], reply.get("path"))
    raise RuntimeError(reply["error"])
