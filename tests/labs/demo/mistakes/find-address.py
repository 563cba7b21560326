"""Common wrong answers to find-address."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, data):
    path = answer_path(env.lab.id, "find-address")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))


@mistake("without /prefix")
def with_prefix_length(env):
    """Copies the address as `ip addr` prints it, prefix length included."""
    _write(env, {"address": "10.0.0.2/24"})


@mistake("not an address of host b")
def host_a_address(env):
    """Writes an address that is not host b's."""
    _write(env, {"address": "192.0.2.1"})
