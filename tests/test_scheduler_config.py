"""KubeSchedulerConfiguration made into profiles as kube-scheduler v1.34.1 builds them: a second
profile merged with the default plugins (a scoring strategy, a plugin disabled at Score, a
weight), and the errors kube-scheduler refuses to start with."""

import pytest

from labkit.scheduler import config

HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def test_a_second_profile_is_the_default_one_merged_with_its_own_plugins_and_args():
    profiles, _ = config.load(HEAD + """profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packer
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
""")
    default, packer = profiles
    assert (default.name, packer.name) == ("default-scheduler", "bin-packer")
    assert [p.name for p in default.at("score")] == ["TaintToleration", "NodeAffinity", "NodeResourcesFit",
                                                     "PodTopologySpread", "InterPodAffinity",
                                                     "NodeResourcesBalancedAllocation", "ImageLocality"]
    assert [p.name for p in packer.at("score")] == ["TaintToleration", "NodeAffinity", "NodeResourcesFit",
                                                    "PodTopologySpread", "InterPodAffinity", "ImageLocality"]
    assert [p.name for p in packer.at("filter")] == [p.name for p in default.at("filter")]
    assert (default.weights["NodeResourcesFit"], packer.weights["NodeResourcesFit"]) == (1, 5)
    fit = {p.name: p for p in packer.plugins}["NodeResourcesFit"]
    assert fit.strategy == "MostAllocated"
    assert {p.name: p for p in default.plugins}["NodeResourcesFit"].strategy == "LeastAllocated"


def test_a_weight_of_zero_counts_as_one():
    [profile], _ = config.load(HEAD + "profiles:\n- schedulerName: x\n  plugins:\n    score:\n      enabled:\n"
                                      "      - {name: ImageLocality, weight: 0}\n")
    assert profile.weights["ImageLocality"] == 1


WHERE = "initializing profiles: creating profile for scheduler name x: "


@pytest.mark.parametrize("plugins,error", [
    ("score: {enabled: [{name: MostPacked}]}", 'ScorePlugin "MostPacked" does not exist'),
    ("filter: {enabled: [{name: NodeResourceFit}]}", 'FilterPlugin "NodeResourceFit" does not exist'),
    ("multiPoint: {enabled: [{name: Packer}]}", 'PreFilterPlugin "Packer" does not exist'),
    ("filter: {enabled: [{name: ImageLocality}]}", 'plugin "ImageLocality" does not extend FilterPlugin plugin'),
])
def test_a_plugin_no_registry_has_or_at_a_point_it_does_not_implement_is_refused(plugins, error):
    with pytest.raises(config.ConfigError) as refused:
        config.load(HEAD + f"profiles:\n- schedulerName: x\n  plugins: {{{plugins}}}\n")
    assert str(refused.value) == WHERE + error


def test_two_configs_of_one_plugin_and_two_profiles_of_one_name_are_refused():
    with pytest.raises(config.ConfigError) as refused:
        config.load(HEAD + "profiles:\n- schedulerName: x\n  pluginConfig: [{name: NodeResourcesFit}, "
                           "{name: NodeResourcesFit}]\n")
    assert str(refused.value) == WHERE + "repeated config for plugin NodeResourcesFit"
    with pytest.raises(config.ConfigError) as refused:
        config.load(HEAD + "profiles:\n- schedulerName: x\n- schedulerName: x\n")
    assert str(refused.value).startswith("profiles[1].schedulerName: the same as profiles[0].schedulerName")


def test_a_scoring_strategy_no_one_knows_is_refused_when_the_plugin_starts():
    with pytest.raises(config.ConfigError) as refused:
        config.load(HEAD + "profiles:\n- schedulerName: x\n  pluginConfig:\n  - name: NodeResourcesFit\n"
                           "    args: {scoringStrategy: {type: MostAlocated}}\n")
    assert str(refused.value) == WHERE + ('initializing plugin "NodeResourcesFit": scoringStrategy.type: Unsupported '
                                          'value: "MostAlocated": supported values: "LeastAllocated", "MostAllocated", '
                                          '"RequestedToCapacityRatio"')
