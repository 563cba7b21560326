"""Profiles as a KubeSchedulerConfiguration names them: the default one, or a profile of chosen
plugins with their pluginConfig (how upstream's unit tests run one plugin)."""

from __future__ import annotations

from typing import Any

from labkit.scheduler import plugins
from labkit.scheduler.framework import DEFAULT_PLUGINS, DEFAULT_SCHEDULER, Profile


def make_profile(config: Any = "default", scheduler_name: str = DEFAULT_SCHEDULER) -> Profile:
    """`default` (the v1.34.1 default profile), or `{plugins: [Name, ...], pluginConfig: {Name:
    args}}`: only those plugins, at every extension point they implement, with their default
    weights (1 for a plugin that has none)."""
    if config in (None, "default") or (isinstance(config, str) and config.startswith("default")):
        names = list(DEFAULT_PLUGINS)
        args: dict = {}
    else:
        defaults = dict(DEFAULT_PLUGINS)
        names = [(n, defaults.get(n) or 1) for n in config.get("plugins") or []]
        args = config.get("pluginConfig") or {}
    built = [plugins.build(name, args.get(name) or {}) for name, _w in names]
    return Profile(scheduler_name, [p for p in built if p is not None], {n: w for n, w in names})
