"""Common wrong predictions in terminating-create."""

from labkit.exercises import mistake, write_answer


def _answer(env, error):
    write_answer(env, "terminating-create", {"error": error})


@mistake("kind of error", "NotFound")
def thinks_it_is_gone(env):
    """Predicts a Terminating namespace answers as if it did not exist."""
    _answer(env, 'Error from server (NotFound): namespaces "attic" not found')


@mistake("the object part is right", "reason after it")
def paraphrases(env):
    """Predicts the gist (forbidden, terminating) in words of its own."""
    _answer(env, 'Error from server (Forbidden): configmaps "late" is forbidden: namespace attic is terminating')


@mistake("situation the exercise describes has changed")
def makes_the_namespace_go_first(env):
    """Force-finalizes attic, then runs the create and writes down what it got (the namespace is
    not found): a prediction about a situation it changed."""
    env.lab.environment_module().finalize(env, "attic", [])
    _answer(env, 'Error from server (NotFound): namespaces "attic" not found')


@mistake("trying first earns no points")
def tries_it_first(env):
    """Sends creates into attic itself (`kubectl create configmap probe -n attic`, then `late`),
    and writes down the message the server answered: the server's answer, not a prediction."""
    import time
    from labkit.apiserver.errors import ApiError
    c = env.lab.environment_module().client(env)
    for name in ("probe", "late"):
        try:
            c.create("v1", "configmaps", {"metadata": {"name": name}}, "attic")
        except ApiError:
            pass
    time.sleep(0.05)        # the answer file is written after the tries, as a person would
    _answer(env, 'error: failed to create configmap: configmaps "late" is forbidden: unable to create new content '
                 'in namespace attic because it is being terminated')


@mistake("gives error twice", "YAML keeps only the last one")
def two_guesses_in_one_file(env):
    """Writes two `error:` keys, a guess and the message, hoping one of them counts."""
    from labkit.exercises import answer_path
    path = answer_path("namespace", "terminating-create")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("error: 'namespaces \"attic\" not found'\n"
                    "error: 'configmaps \"late\" is forbidden: unable to create new content in namespace attic "
                    "because it is being terminated'\n")


@mistake("trying first earns no points", "a namespace being terminated too")
def tries_it_in_another_terminating_namespace(env):
    """Sends the create into another namespace that is Terminating (reports, legacy or archive, as
    the lab starts), and writes down the message with attic's name put in: the server's answer,
    not a prediction."""
    import time
    from labkit.apiserver.errors import ApiError
    c = env.lab.environment_module().client(env)
    other = next(n["metadata"]["name"] for n in c.list("v1", "namespaces")[0]
                 if n["metadata"].get("deletionTimestamp") and n["metadata"]["name"] != "attic")
    try:
        c.create("v1", "configmaps", {"metadata": {"name": "late"}}, other)
    except ApiError:
        pass
    time.sleep(0.05)        # the answer file is written after the try, as a person would
    _answer(env, 'error: failed to create configmap: configmaps "late" is forbidden: unable to create new content '
                 'in namespace attic because it is being terminated')


@mistake("trying first earns no points", "patch configmaps")
def tries_it_with_server_side_apply(env):
    """Runs `kubectl apply --server-side` of a new ConfigMap in attic (a PATCH, not a POST: the API
    server admits it as a create, and NamespaceLifecycle refuses it with the same message), then
    writes down what it got: the server's answer, not a prediction."""
    import time
    from labkit.apiserver.errors import ApiError
    c = env.lab.environment_module().client(env)
    try:
        c.patch("v1", "configmaps", "late", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}},
                patch_type="apply", namespace="attic", query={"fieldManager": "kubectl"})
    except ApiError:
        pass
    time.sleep(0.05)        # the answer file is written after the try, as a person would
    _answer(env, 'Error from server (Forbidden): configmaps "late" is forbidden: unable to create new content in '
                 'namespace attic because it is being terminated')
