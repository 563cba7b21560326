"""Joining a mount namespace from a process that used grpc (as the device-plugins tests do in the
same worker): grpc's fork handlers start threads in a forked child, and the kernel refuses
setns(CLONE_NEWNS) to a caller whose fs_struct other threads share (EINVAL) unless it first
unshares CLONE_FS. Every mount-propagation scenario failed so in one whole run."""

from __future__ import annotations

import os
import subprocess
import time

import grpc

from labkit.mounts import kernel


def test_a_forked_child_with_grpcs_threads_still_joins_a_mount_namespace():
    target = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "60"])
    channel = grpc.insecure_channel("unix:/nonexistent/labkit-test.sock")
    try:
        try:
            grpc.channel_ready_future(channel).result(timeout=0.3)     # starts grpc's threads
        except grpc.FutureTimeoutError:
            pass
        # the sleep has entered its own mount namespace once its ns link differs from ours
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{target.pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt"):
            assert time.monotonic() < deadline, "unshare never entered a mount namespace of its own"
            time.sleep(0.01)
        threads, namespace = kernel.in_namespace(target.pid, lambda: (
            len(os.listdir(f"/proc/{os.getpid()}/task")), os.readlink("/proc/self/ns/mnt")))
        assert namespace == os.readlink(f"/proc/{target.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert threads >= 1
    finally:
        channel.close()
        target.kill()
        target.wait()
