"""Common wrong answers to force-finalize (after force-finalizing legacy as the prompt says)."""

import importlib.util
import time

import yaml

from labkit.apiserver.errors import ApiError
from labkit.exercises import answer_path, mistake, write_answer


def _force_and_recreate(env):
    lab = env.lab.environment_module()
    lab.finalize(env, "legacy", [])
    time.sleep(1.1)         # the new namespace comes in a later second than the force-finalize
    lab.target(env).kubectl("create", "namespace", "legacy")


def _answer(env, left_behind, visible_again=True):
    write_answer(env, "force-finalize", {"left_behind": left_behind, "visible_again": visible_again})


@mistake("not in the core group")
def custom_resource_without_group(env):
    """Writes the Backup as backups/weekly, without its API group."""
    _force_and_recreate(env)
    _answer(env, ["backups/weekly", "configmaps/app-config"])


@mistake("missing from your list", "kubectl api-resources --namespaced")
def built_in_kinds_only(env):
    """Looks only at built-in kinds (kubectl get all,cm) and misses the custom resource."""
    _force_and_recreate(env)
    _answer(env, ["configmaps/app-config"])


@mistake("your answer is not right", "what a client sees in the new namespace", "kubectl get all,cm,backups")
def thinks_the_new_namespace_is_clean(env):
    """Lists the objects right, but thinks a new namespace of the same name starts empty."""
    _reference(env).solve(env)
    answer = yaml.safe_load(answer_path("namespace", "force-finalize").read_text())
    _answer(env, answer["left_behind"], visible_again=False)


def _reference(env):
    """The reference solution, whose listing of what was left is right."""
    path = env.lab.directory / "solutions" / "force-finalize.py"
    spec = importlib.util.spec_from_file_location("namespace_force_finalize_solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@mistake("situation the exercise describes has changed")
def cleans_up_before_answering(env):
    """Force-finalizes and recreates legacy, then releases and deletes what was left before
    answering, and answers that nothing is left."""
    _force_and_recreate(env)
    c = env.lab.environment_module().client(env)
    for api_version, resource, name in (("v1", "configmaps", "app-config"), ("example.com/v1", "backups", "weekly")):
        try:
            c.patch(api_version, resource, name, {"metadata": {"finalizers": None}}, "merge", "legacy")
            c.delete(api_version, resource, name, "legacy")
        except ApiError as exc:
            if exc.code != 404:     # gone already: the release completed a deletion the namespace
                raise               # controller had asked for while legacy was terminating
    _answer(env, [], visible_again=False)


@mistake("written in another form", "`-o name`")
def kubectl_name_form(env):
    """Lists the objects as `kubectl get ... -o name` prints them (configmap/app-config,
    backup.example.com/weekly): the kind, singular, where the answer asks for the resource."""
    _reference(env).solve(env)
    answer = yaml.safe_load(answer_path("namespace", "force-finalize").read_text())
    singular = []
    for entry in answer["left_behind"]:
        resource, _, name = entry.partition("/")
        plural, dot, group = resource.partition(".")
        singular.append(f"{plural.removesuffix('s')}{dot}{group}/{name}")
    _answer(env, singular, visible_again=answer["visible_again"])


@mistake("malformed", "trailing dot")
def condition_form_of_the_core_group(env):
    """Writes the ConfigMap as configmaps./app-config, the core group's trailing dot copied from how
    the namespace's conditions write a resource type."""
    _force_and_recreate(env)
    _answer(env, ["backups.example.com/weekly", "configmaps./app-config"])
