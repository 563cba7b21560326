"""Common wrong readings of the audit log."""

import json

from labkit.exercises import mistake, write_answer


def _events(env):
    lab = env.lab.environment_module()
    return [json.loads(line) for line in (lab.server_dir(env) / "audit.log").read_text().splitlines()]


def _who(env, verb, namespace):
    found = None
    for e in _events(env):
        ref = e.get("objectRef") or {}
        name = ref.get("name") or ((e.get("requestObject") or {}).get("metadata") or {}).get("name")
        if (ref.get("resource"), ref.get("namespace"), name, e.get("verb")) == \
                ("configmaps", namespace, "prices", verb):
            found = e["user"]["username"]
    return found


@mistake("is a group", "user.username")
def names_the_team(env):
    """Names the group of the person who deleted shop/prices (user.groups), not the person."""
    deleter = _who(env, "delete", "shop")
    groups = next(e["user"].get("groups") or [] for e in _events(env) if e["user"]["username"] == deleter)
    write_answer(env, "audit", {"user": next(g for g in groups if not g.startswith("system:"))})


@mistake("did not delete")
def names_who_changed_it(env):
    """Names the last person who changed shop/prices (the patch before the delete)."""
    write_answer(env, "audit", {"user": _who(env, "patch", "shop")})


@mistake("another namespace")
def names_the_other_delete(env):
    """Greps for "prices" and "delete" and takes the first line: the ConfigMap prices of dev."""
    write_answer(env, "audit", {"user": _who(env, "delete", "dev")})


@mistake("did not delete")
def names_who_created_it(env):
    """Names who created the ConfigMaps in shop."""
    creators = [e["user"]["username"] for e in _events(env) if e.get("verb") == "create"
                and (e.get("objectRef") or {}).get("resource") == "configmaps"
                and (e.get("objectRef") or {}).get("namespace") == "shop"
                and not e["user"]["username"].startswith("system:")]
    write_answer(env, "audit", {"user": creators[-1]})


@mistake("after the lab's story")
def names_a_later_deletion(env):
    """Makes the ConfigMap again to look at it, deletes it, and names the newest deletion in the log: their own."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "-n", "shop", "create", "configmap", "prices", "--from-literal=apple=0.50")
    lab.kubectl(env, "-n", "shop", "delete", "configmap", "prices")
    write_answer(env, "audit", {"user": _who(env, "delete", "shop")})


@mistake("was changed after", "no evidence")
def edits_the_log(env):
    """Rewrites the user of the shop deletion in the audit log to another person, then names that person."""
    lab = env.lab.environment_module()
    path = lab.server_dir(env) / "audit.log"
    deleter, other = _who(env, "delete", "shop"), _who(env, "delete", "dev")
    lines = []
    for line in path.read_text().splitlines():
        e = json.loads(line)
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name"), e.get("verb")) == \
                ("configmaps", "shop", "prices", "delete") and e["user"]["username"] == deleter:
            e["user"]["username"] = other
        lines.append(json.dumps(e))
    path.write_text("\n".join(lines) + "\n")
    write_answer(env, "audit", {"user": other})


@mistake("did not delete", "case-sensitive")
def capitalizes_the_name(env):
    """Names the right person, but capitalized as one writes a name (Bob for bob): the API server
    and its audit log keep user names as they are."""
    write_answer(env, "audit", {"user": _who(env, "delete", "shop").capitalize()})


@mistake("a scene the lab set before")
def answers_from_before_a_reset(env):
    """Reads who deleted shop/prices, then resets the exercise (which sets the scene again, with who
    does what drawn anew) and keeps the answer: the log still holds the earlier scene's deletion."""
    lab = env.lab.environment_module()
    earlier = _who(env, "delete", "shop")
    # the reset draws the people at random: set the scene again until someone else deletes it
    # (each draw keeps the same deleter with probability 1/4; fifty in a row do not happen)
    for _ in range(50):
        lab.reset_exercise(env, "audit")
        if lab.audit_story(env).get("deleter") != earlier:
            break
    write_answer(env, "audit", {"user": earlier})
