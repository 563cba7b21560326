"""Common wrong answers to find-address."""

from labkit.exercises import mistake, write_answer


@mistake("without /prefix")
def with_prefix_length(env):
    """Copies the address as `ip addr` prints it, prefix length included."""
    write_answer(env, "find-address", {"address": "10.0.0.2/24"})


@mistake("not an address of host b")
def host_a_address(env):
    """Writes an address that is not host b's."""
    write_answer(env, "find-address", {"address": "192.0.2.1"})
