"""Common wrong solutions to container-mount."""

import subprocess

from labkit.exercises import mistake


def _in_container(env, *argv):
    pid = env.lab.environment_module().hosts(env)["c"].pid
    subprocess.run(["nsenter", f"--target={pid}", "--mount", "--", *argv], check=True)


@mistake("ramfs", "not a tmpfs")
def ramfs(env):
    """Mounts a ramfs where a tmpfs was asked for."""
    _in_container(env, "mount", "-t", "ramfs", "ramfs", str(env.dir / "c-data"))


@mistake("host c has no tmpfs")
def own_namespace(env):
    """Mounts the tmpfs from a shell of its own (`unshare -m`), whose mounts vanish with it."""
    _in_container(env, "unshare", "--mount", "--", "mount", "-t", "tmpfs", "tmpfs", str(env.dir / "c-data"))
