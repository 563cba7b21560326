"""Near-misses of the container mount: another filesystem type, nothing mounted, mounted where the
host sees it too (judged on the observation only: a host mount is not made live)."""

import subprocess

from labkit.mutants import Mutant


def _in_c(env, *command):
    pid = env.lab.environment_module().hosts(env)["c"].pid
    subprocess.run(["nsenter", f"--target={pid}", "--mount", "--", *command], check=True, capture_output=True)


def _replace(fstype):
    def apply(env):
        directory = str(env.dir / "c-data")
        _in_c(env, "umount", directory)         # the reference solution's tmpfs
        if fstype:
            _in_c(env, "mount", "-t", fstype, fstype, directory)
    return apply


def mutants(ctx):
    yield Mutant("ramfs", "a ramfs instead of a tmpfs", names=("not a tmpfs",), observation=(["ramfs"], []),
                 apply=_replace("ramfs"))
    yield Mutant("unmounted", "nothing mounted", names=("no tmpfs",), observation=([], []), apply=_replace(None))
    yield Mutant("on-the-host", "mounted on the host", names=("visible on the host",),
                 observation=(["tmpfs"], ["tmpfs"]))
