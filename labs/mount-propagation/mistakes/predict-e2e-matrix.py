"""Common wrong predictions of the e2e matrix."""

import yaml

from labkit.exercises import answer_path, mistake


def _write(env, matrix):
    path = answer_path(env.lab.id, "predict-e2e-matrix")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(matrix))


@mistake("prediction is not right")
def slave_sends_back(env):
    """Thinks HostToContainer also sends the container's own mounts back to the host (and so to master)."""
    _write(env, {"host": ["master", "slave", "host"], "master": ["master", "slave", "host"],
                 "slave": ["master", "slave", "host"], "private": ["private"], "default": ["default"]})


@mistake("prediction is not right")
def none_receives_from_host(env):
    """Thinks None (and unset) still receive what the host mounts later, like HostToContainer."""
    _write(env, {"host": ["master", "host"], "master": ["master", "host"], "slave": ["master", "slave", "host"],
                 "private": ["private", "host"], "default": ["default", "host"]})


@mistake("prediction is not right")
def slave_only_from_host(env):
    """Thinks a HostToContainer container receives only the host's own mounts, not what a Bidirectional
    container publishes to the host."""
    _write(env, {"host": ["master", "host"], "master": ["master", "host"], "slave": ["slave", "host"],
                 "private": ["private"], "default": ["default"]})


@mistake("prediction is not right")
def everyone_sees_everything(env):
    """Thinks one shared hostPath shows every mount to every party, whatever the propagation mode."""
    everything = ["master", "slave", "private", "default", "host"]
    _write(env, {party: everything for party in ("host", "master", "slave", "private", "default")})
