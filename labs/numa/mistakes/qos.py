"""Common wrong classifications for qos."""

import yaml

from labkit.exercises import answer_path, mistake

RIGHT = {"web": "Guaranteed", "batch": "BestEffort", "cache": "Guaranteed", "api": "Burstable",
         "migrate": "Burstable", "scratch": "BestEffort"}


def _write(env, **changes):
    path = answer_path(env.lab.id, "qos")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"qos": {**RIGHT, **changes}}))


@mistake("cache: not Burstable", "the API server turns a limit without a request into the request")
def limits_without_requests(env):
    """Forgets that the API server copies a limit into the missing request: limits only looks Burstable."""
    _write(env, cache="Burstable")


@mistake("scratch: not Burstable", "other resources do not count")
def ephemeral_storage_counts(env):
    """Counts ephemeral-storage requests and limits towards the QoS class."""
    _write(env, scratch="Burstable")


@mistake("migrate: not Guaranteed", "init containers count too")
def init_containers_ignored(env):
    """Looks only at the app containers, not at the init container without limits."""
    _write(env, migrate="Guaranteed")
