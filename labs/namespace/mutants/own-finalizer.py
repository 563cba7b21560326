"""Near-misses of adding and removing a finalizer through /finalize, as what the check observes
of the solved lab: either request dropped, the two swapped, one more that adds it again, a
request that leaves out `kubernetes` or keeps the own finalizer, the own finalizer named
`kubernetes` (so none of its own); the namespace deleted, made anew, or left with other
spec.finalizers, or with a finalizer in metadata.finalizers or a label changed; a write to another namespace (its finalize subresource, a patch). Another name for the own finalizer, and a patch of the namespace on the side,
are equivalent."""

from labkit.namespaces.mutants import observation_mutants


def _finalize_again(env):
    env.lab.environment_module().finalize(env, "sandbox", ["kubernetes", "example.com/hold"])


def _finalize_default(env):
    """The own finalizer put on default too, and taken off again: default was changed meanwhile."""
    lab = env.lab.environment_module()
    lab.finalize(env, "default", ["kubernetes", "example.com/hold"])
    lab.finalize(env, "default", ["kubernetes"])


def _delete(env):
    env.lab.environment_module().client(env).delete("v1", "namespaces", "sandbox")


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    seen = checks.observe_own_finalizer(ctx)
    added = seen["requests"][0]
    own = next(f for f in added if f != "kubernetes")

    def names(edit):
        path = edit.path
        if path.startswith("requests"):
            # what the exercise asks of the requests, in order: one adds a finalizer of one's own;
            # a later one removes it, and the last leaves only `kubernetes`; none leaves it out
            requests = edit.value["requests"]
            first = next((i for i, sent in enumerate(requests) if any(f != "kubernetes" for f in sent)), None)
            if first is None:
                return ("no finalizer of your own",)
            mine = {f for f in requests[first] if f != "kubernetes"}
            if not any(mine.isdisjoint(sent) for sent in requests[first + 1:]) or \
                    any(f != "kubernetes" for f in requests[-1]):
                return ("now remove it again",)
            if any("kubernetes" not in sent for sent in requests):
                return ("left out `kubernetes`",)
            return None
        if path.startswith("other_namespaces"):
            return ("you also changed namespace",)
        if path in ("namespace.original", "namespace.deleting"):
            return ("as it was",)
        if path.startswith("namespace.finalizers") or path.startswith("namespace.metadata"):
            return ("leave sandbox as it was",)
        return None

    def equivalent(edit):
        if edit.path == "requests[0][1]" and edit.op == "set" and edit.after == "example.com/other":
            return "any finalizer of one's own will do: the exercise asks for one, not for a name"
        if edit.path == "requests[0]" and edit.op == "swap":
            return "the order of spec.finalizers does not matter: each is a name the namespace waits for"
        if edit.path == "spec_edit":
            return ("a normal update or patch keeps spec.finalizers (pkg/registry/core/namespace/strategy.go, "
                    "PrepareForUpdate): the finalize requests did the exercise")
        if edit.path == "namespace.changed":
            return "with the audit log the check judges the requests themselves; resourceVersion is only read without one"
        return None

    yield from observation_mutants(
        seen, names=names, equivalent=equivalent,
        alternatives={"requests[0][1]": ["kubernetes", "example.com/other"], "requests[1][0]": [own],
                      "requests[0][0]": [own + "2"], "spec_edit": ["patched"],
                      "namespace.finalizers[0]": [own, "example.com/other"],
                      "namespace.metadata.labels.kubernetes.io/metadata.name": ["other"]},
        add={("requests",): [added, [own]], ("namespace", "finalizers"): [own],
             ("namespace", "metadata", "finalizers"): [own],
             ("other_namespaces",): ["update …/finalize on default", "patch on kube-public"]},
        apply={f"add:requests={added}": _finalize_again, "set:namespace.deleting=True": _delete,
               "add:other_namespaces=update …/finalize on default": _finalize_default})
