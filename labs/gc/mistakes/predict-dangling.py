"""Common wrong predictions in predict-dangling."""

from labkit.exercises import mistake, write_answer


def _predict(env, **changes):
    answer = {"orphan": "deleted", "shared": "kept", "shared_owners": ["anchor"], "stranger": "deleted",
              "stranger_event": "OwnerRefInvalidNamespace"}
    answer.update(changes)
    write_answer(env, "predict-dangling", answer)


@mistake("prediction is not right")
def one_dangling_owner_deletes(env):
    """Thinks one dangling owner reference is enough to delete an object."""
    _predict(env, shared="deleted", shared_owners=[])


@mistake("prediction is not right")
def owner_in_another_namespace_counts(env):
    """Thinks an owner reference reaches the anchor of the other namespace, so stranger is kept."""
    _predict(env, stranger="kept", stranger_event="none")


@mistake("prediction is not right")
def dangling_reference_stays(env):
    """Predicts shared is kept with both owner references."""
    _predict(env, shared_owners=["anchor", "ghost"])


@mistake("prediction is not right")
def flips_one_cell(env):
    """Predicts that the orphan, whose only owner never existed, is kept."""
    _predict(env, orphan="kept")


@mistake("made objects in the experiment's namespaces", "earns no points")
def tries_it_in_the_lab(env):
    """Makes the experiment's objects in the lab's own predict-a and predict-b (anchor in both;
    orphan, owned by a ghost ReplicationController; shared; stranger, owned by predict-b's anchor),
    watches what the garbage collector does, and writes that down."""
    import time
    from labkit.apiserver.target import for_env
    client = for_env(env).client()
    anchors = {ns: client.create("v1", "configmaps", {"metadata": {"name": "anchor"}}, ns)["metadata"]["uid"]
               for ns in ("predict-a", "predict-b")}

    def ref(kind, name, uid):
        return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}
    ghost = ref("ReplicationController", "ghost", "00000000-0000-0000-0000-00000000dead")
    for name, owners in (("orphan", [ghost]), ("shared", [ghost, ref("ConfigMap", "anchor", anchors["predict-a"])]),
                         ("stranger", [ref("ConfigMap", "anchor", anchors["predict-b"])])):
        client.create("v1", "configmaps", {"metadata": {"name": name, "ownerReferences": owners}}, "predict-a")
    time.sleep(2)           # what `kubectl get cm,events -n predict-a` then shows
    _predict(env)


@mistake("tried the experiment", "earns no points")
def tries_it_elsewhere_in_the_lab(env):
    """Leaves predict-a and predict-b empty but plays the experiment in the lab's cluster all the
    same: orphan, shared and stranger in namespace shop (shared also owned by shop's ConfigMap
    settings), stranger owned by the ConfigMap anchor of a namespace of their own; watches what
    the garbage collector does, and writes that down."""
    import time
    from labkit.apiserver.target import for_env
    client = for_env(env).client()
    client.create("v1", "namespaces", {"metadata": {"name": "try-b"}})
    anchor = client.create("v1", "configmaps", {"metadata": {"name": "anchor"}}, "try-b")["metadata"]["uid"]
    settings = client.get("v1", "configmaps", "settings", "shop")["metadata"]["uid"]

    def ref(kind, name, uid):
        return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}
    ghost = ref("ReplicationController", "ghost", "00000000-0000-0000-0000-00000000dead")
    for name, owners in (("orphan", [ghost]), ("shared", [ghost, ref("ConfigMap", "settings", settings)]),
                         ("stranger", [ref("ConfigMap", "anchor", anchor)])):
        client.create("v1", "configmaps", {"metadata": {"name": name, "ownerReferences": owners}}, "shop")
    time.sleep(2)           # what `kubectl get cm,events -n shop` then shows
    _predict(env)


@mistake("tried the experiment", "earns no points")
def tries_it_with_an_owner_named_like_another_kind(env):
    """Plays the dangling part of the experiment in namespace shop, with a ghost owner named after
    an object that does exist there under another kind (ReplicationController worker, where the
    lab made a ReplicaSet worker): orphan owned by the ghost alone, shared by the ghost and shop's
    ConfigMap settings (as ConfigMaps orphan-rc and shared-rc); watches what the garbage collector
    does, and writes that down."""
    import time
    from labkit.apiserver.target import for_env
    client = for_env(env).client()
    settings = client.get("v1", "configmaps", "settings", "shop")["metadata"]["uid"]
    ghost = {"apiVersion": "v1", "kind": "ReplicationController", "name": "worker",
             "uid": "00000000-0000-0000-0000-0000000000aa"}
    for name, owners in (("orphan-rc", [ghost]), ("shared-rc", [ghost, {"apiVersion": "v1", "kind": "ConfigMap",
                                                                         "name": "settings", "uid": settings}])):
        client.create("v1", "configmaps", {"metadata": {"name": name, "ownerReferences": owners}}, "shop")
    time.sleep(2)           # what `kubectl get cm -n shop` then shows
    _predict(env)


@mistake("tried the experiment", "earns no points")
def tries_it_then_resets_the_exercise(env):
    """Plays the part of the experiment about an owner in another namespace in the lab's cluster
    (ConfigMap stranger-again in shop, owned by the ConfigMap anchor of a namespace of their own),
    watches the garbage collector's Warning event, then resets the exercise (`labkit reset gc
    predict-dangling`, which builds its part afresh, as labkit.runner.reset does: the lab's
    keep_student_work hook first, then reset_exercise) and writes the prediction after that."""
    import time
    from labkit.apiserver.target import for_env
    client = for_env(env).client()
    client.create("v1", "namespaces", {"metadata": {"name": "try-reset"}})
    anchor = client.create("v1", "configmaps", {"metadata": {"name": "anchor"}}, "try-reset")["metadata"]["uid"]
    client.create("v1", "configmaps", {"metadata": {"name": "stranger-again", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "anchor", "uid": anchor}]}}, "shop")
    time.sleep(2)           # what `kubectl get events -n shop` then shows
    lab = env.lab.environment_module()
    keeper = getattr(lab, "keep_student_work", None)
    if callable(keeper):
        keeper(env, "predict-dangling")
    lab.reset_exercise(env, "predict-dangling")
    env.state.set_ready(["predict-dangling"])
    _predict(env)
