"""A KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) made into profiles, as kube-scheduler
v1.34.1 builds them at its start:

- every profile starts from the default plugins (pkg/scheduler/apis/config/v1/default_plugins.go
  getDefaultPlugins, all under multiPoint) and merges its own `plugins` into them (mergePlugins):
  `multiPoint.enabled` adds a plugin (or sets the weight of one already there), a `disabled` entry
  removes a plugin from that extension point (`*`: every default one), an extension point's
  `enabled` adds a plugin there only, and `score.enabled[].weight` sets its weight;
- `pluginConfig[].args` are the plugins' arguments (NodeResourcesFit's scoringStrategy, ...);
- a Score plugin's weight 0 counts as 1 (runtime/framework.go getScoreWeights: "a weight of zero is
  not permitted").

Errors are kube-scheduler's own, for what labkit reconstructs of its start:
- a plugin name no registry entry has: runtime/framework.go updatePluginList (an extension point's
  list) or expandMultiPointPlugins (multiPoint, checked at the first extension point in
  getExtensionPoints' order): `<Kind>Plugin "<name>" does not exist`; a plugin an extension point
  lists that does not implement it: `plugin "<name>" does not extend <Kind>Plugin plugin`;
- two pluginConfig entries for one plugin: NewFramework `repeated config for plugin <name>`;
- NodeResourcesFit's scoringStrategy.type none of LeastAllocated, MostAllocated,
  RequestedToCapacityRatio: noderesources/fit.go NewFit runs validation_pluginargs.go
  ValidateNodeResourcesFitArgs (validation.go's own table names it NodeResourcesFitArgs, so only
  NewFit checks it): `initializing plugin "NodeResourcesFit": scoringStrategy.type: Unsupported
  value: "<type>": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"`;
each wrapped as profile.go NewMap (`creating profile for scheduler name <name>: ...`) and
scheduler.go New (`initializing profiles: ...`) wrap it. The configuration's validation
(apis/config/validation/validation.go ValidateKubeSchedulerConfiguration) runs before and is not
reconstructed, but for its refusal of two profiles of one schedulerName (field.Duplicate), which
labkit words itself: upstream prints the other field's path as a Go struct with a pointer in it.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from labkit.errors import LabkitError
from labkit.scheduler import plugins as registry
from labkit.scheduler.framework import DEFAULT_PLUGINS, DEFAULT_SCHEDULER, Profile

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

# getExtensionPoints' order, with the method each point calls here and the Go interface it names
POINTS = (("preFilter", "pre_filter", "PreFilterPlugin"), ("filter", "filter", "FilterPlugin"),
          ("postFilter", "post_filter", "PostFilterPlugin"), ("reserve", None, "ReservePlugin"),
          ("preScore", "pre_score", "PreScorePlugin"), ("score", "score", "ScorePlugin"),
          ("preBind", None, "PreBindPlugin"), ("bind", None, "BindPlugin"), ("postBind", None, "PostBindPlugin"),
          ("permit", None, "PermitPlugin"), ("preEnqueue", None, "PreEnqueuePlugin"),
          ("queueSort", None, "QueueSortPlugin"))
# the plugins outside labkit's cycle, with the extension points they implement
OUTSIDE = {"SchedulingGates": {"preEnqueue"}, "PrioritySort": {"queueSort"}, "DefaultBinder": {"bind"},
           "VolumeBinding": {"preFilter", "filter", "reserve", "preBind", "preScore", "score"},
           "DynamicResources": {"preFilter", "filter", "postFilter", "reserve", "preBind", "preScore", "score"}}


STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")     # sorted, as sets.List gives them


class ConfigError(LabkitError):
    """kube-scheduler would not start with this configuration."""


def _implements(name: str, point: str, method: str | None) -> bool:
    if name in OUTSIDE and point in OUTSIDE[name]:
        return True
    if method is None:
        return False
    plugin = registry.build(name, {})
    return plugin is not None and callable(getattr(plugin, method, None))


def _known(name: str) -> bool:
    try:
        registry.build(name, {})
    except ValueError:
        return False
    return True


def _names(entries) -> list[str]:
    return [str((e or {}).get("name") or "") for e in entries or []]


def build_profile(spec: dict) -> Profile:
    """One profile of the configuration (a `profiles[]` entry), merged with the default plugins."""
    name = spec.get("schedulerName") or DEFAULT_SCHEDULER
    where = f"initializing profiles: creating profile for scheduler name {name}: "
    given = spec.get("plugins") or {}
    weights = dict(DEFAULT_PLUGINS)
    multi = [n for n, _w in DEFAULT_PLUGINS]
    multi_disabled = set(_names((given.get("multiPoint") or {}).get("disabled")))
    if "*" in multi_disabled:
        multi = []
    multi = [n for n in multi if n not in multi_disabled]
    for entry in (given.get("multiPoint") or {}).get("enabled") or []:
        plugin = str(entry.get("name") or "")
        if plugin not in multi:
            multi.append(plugin)
        if entry.get("weight") is not None:
            weights[plugin] = int(entry["weight"])
    # each extension point's own list (updatePluginList), in getExtensionPoints' order
    disabled: dict[str, set] = {}
    only: dict[str, list[str]] = {}
    for point, method, kind in POINTS:
        section = given.get(point) or {}
        for plugin in _names(section.get("enabled")):
            if not _known(plugin):
                raise ConfigError(where + f'{kind} "{plugin}" does not exist')
            if not _implements(plugin, point, method):
                raise ConfigError(where + f'plugin "{plugin}" does not extend {kind} plugin')
            only.setdefault(point, []).append(plugin)
        off = set(_names(section.get("disabled")))
        if method:
            disabled[method] = off
    for plugin in multi:
        if not _known(plugin):
            raise ConfigError(where + f'{POINTS[0][2]} "{plugin}" does not exist')
    for entry in (given.get("score") or {}).get("enabled") or []:
        if entry.get("weight") is not None:
            weights[str(entry["name"])] = int(entry["weight"])
    seen: dict[str, Any] = {}
    for entry in spec.get("pluginConfig") or []:
        plugin = str(entry.get("name") or "")
        if plugin in seen:
            raise ConfigError(where + f"repeated config for plugin {plugin}")
        seen[plugin] = copy.deepcopy(entry.get("args") or {})
    strategy = ((seen.get("NodeResourcesFit") or {}).get("scoringStrategy") or {}).get("type") or "LeastAllocated"
    if strategy not in STRATEGIES:
        raise ConfigError(where + f'initializing plugin "NodeResourcesFit": scoringStrategy.type: Unsupported value: '
                                  f'"{strategy}": supported values: ' + ", ".join(f'"{t}"' for t in STRATEGIES))
    # the plugins in order: multiPoint's, then those an extension point alone enables
    order = list(multi) + [p for point, _m, _k in POINTS for p in only.get(point, []) if p not in multi]
    built = []
    for plugin in dict.fromkeys(order):
        instance = registry.build(plugin, seen.get(plugin) or {})
        if instance is not None:
            built.append(instance)
    # a plugin enabled through multiPoint runs at every point it implements but those that
    # disable it (or `*`); one enabled at an extension point alone runs only there
    for point, method, _kind in POINTS:
        if method is None:
            continue
        off = disabled.get(method, set())
        names = set()
        for instance in built:
            in_multi = instance.name in multi
            enabled_here = instance.name in only.get(point, [])
            if enabled_here:
                continue
            if not in_multi or "*" in off or instance.name in off:
                names.add(instance.name)
        disabled[method] = names
    score_weights = {p: (w if w != 0 else 1) for p, w in weights.items()}
    return Profile(name, built, score_weights, int(spec.get("percentageOfNodesToScore") or 0), disabled)


def load(source: str | dict) -> tuple[list[Profile], int]:
    """The profiles of a KubeSchedulerConfiguration (YAML text or a mapping), and its global
    percentageOfNodesToScore. Without `profiles`, the one default profile (v1 defaults.go)."""
    try:
        data = yaml.safe_load(source) if isinstance(source, str) else source
    except yaml.YAMLError as exc:
        raise ConfigError(f"couldn't decode the configuration: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("a KubeSchedulerConfiguration is a YAML mapping")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise ConfigError(f'no kind "{data.get("kind")}" is registered for version "{data.get("apiVersion")}"'
                          f" (labkit reads {KIND} of {API_VERSION})")
    profiles, names = [], {}
    for i, spec in enumerate(data.get("profiles") or [{"schedulerName": DEFAULT_SCHEDULER}]):
        name = (spec or {}).get("schedulerName") or DEFAULT_SCHEDULER
        if name in names:
            raise ConfigError(f"profiles[{i}].schedulerName: the same as profiles[{names[name]}].schedulerName "
                              f"({name!r}): kube-scheduler refuses two profiles of one name (validation.go "
                              "ValidateKubeSchedulerConfiguration)")
        names[name] = i
        profile = build_profile(spec or {})
        if not profile.percentage_of_nodes_to_score:
            profile.percentage_of_nodes_to_score = int(data.get("percentageOfNodesToScore") or 0)
        profiles.append(profile)
    return profiles, int(data.get("percentageOfNodesToScore") or 0)
