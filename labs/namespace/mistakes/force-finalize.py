"""Common wrong answers to force-finalize (after force-finalizing legacy as the prompt says)."""

import time

from labkit.exercises import mistake, write_answer


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


@mistake("1 left-behind object(s) missing")
def built_in_kinds_only(env):
    """Looks only at built-in kinds (kubectl get all,cm) and misses the custom resource."""
    _force_and_recreate(env)
    _answer(env, ["configmaps/app-config"])


@mistake("visible_again")
def thinks_the_new_namespace_is_clean(env):
    """Lists the objects right, but thinks a new namespace of the same name starts empty."""
    _force_and_recreate(env)
    _answer(env, ["backups.example.com/weekly", "configmaps/app-config"], visible_again=False)
