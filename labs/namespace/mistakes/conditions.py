"""Common wrong answers to conditions."""

import time

from labkit.exercises import mistake, write_answer


def _delete_and_wait(env):
    """Delete billing as the prompt says and wait for the controller's counts, as the student would."""
    target = env.lab.environment_module().target(env)
    target.kubectl("delete", "namespace", "billing", "--wait=false")
    c = target.client()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        conditions = {x["type"]: x for x in (c.get("v1", "namespaces", "billing").get("status") or {}).get("conditions") or []}
        if conditions.get("NamespaceFinalizersRemaining", {}).get("status") == "True":
            return
        time.sleep(0.5)


@mistake("'secrets' lacks the group", "trailing dot")
def core_group_without_dot(env):
    """Writes the core-group resource as `secrets`, without the trailing dot of the empty group."""
    _delete_and_wait(env)
    write_answer(env, "conditions", {"remaining": {"secrets": 1}, "finalizers": {"billing.example.com/audit": 1}})


@mistake("your answer is not right", "NamespaceContentRemaining", "kubectl get ns billing")
def everything_it_held(env):
    """Lists everything the namespace held before the DELETE, not what the condition says remains."""
    _delete_and_wait(env)
    write_answer(env, "conditions", {"remaining": {"deployments.apps": 1, "configmaps.": 1, "secrets.": 1},
                  "finalizers": {"billing.example.com/audit": 1}})


@mistake("finalizers: 'secrets.' is not a finalizer name", "under `remaining`")
def resources_for_finalizers(env):
    """Keys the finalizers mapping by resource instead of by finalizer name."""
    _delete_and_wait(env)
    write_answer(env, "conditions", {"remaining": {"secrets.": 1}, "finalizers": {"secrets.": 1}})


@mistake("you changed the finalizers of billing's content yourself", "patch secrets/ledger-key")
def released_then_answered(env):
    """Writes what the conditions say, then releases the finalizer of the Secret they name, to see
    what happens: the conditions still count it until the controller's next pass."""
    _delete_and_wait(env)
    write_answer(env, "conditions", {"remaining": {"secrets.": 1}, "finalizers": {"billing.example.com/audit": 1}})
    target = env.lab.environment_module().target(env)
    target.kubectl("-n", "billing", "patch", "secret", "ledger-key", "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers/0"}]')


@mistake("you added finalizers to billing's content yourself", "create configmaps/extra with example.com/hold")
def added_content_then_answered(env):
    """Creates a ConfigMap with a finalizer of its own in billing before deleting it, then answers
    with what the conditions say: they count it and its finalizer beside the lab's Secret, a
    situation the lab did not build."""
    target = env.lab.environment_module().target(env)
    target.client().create("v1", "configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "extra", "finalizers": ["example.com/hold"]}}, "billing")
    _delete_and_wait(env)
    write_answer(env, "conditions", {"remaining": {"configmaps.": 1, "secrets.": 1},
                                     "finalizers": {"billing.example.com/audit": 1, "example.com/hold": 1}})
