"""Common wrong ways at own-finalizer."""

from labkit.exercises import mistake


def _finalize(env, finalizers):
    env.lab.environment_module().finalize(env, "sandbox", finalizers)


@mistake("through the finalize subresource", "a normal update keeps spec.finalizers")
def patches_spec(env):
    """Adds the finalizer with kubectl patch (a normal update keeps spec.finalizers as they are)."""
    env.lab.environment_module().target(env).kubectl(
        "patch", "ns", "sandbox", "--type=merge", "-p", '{"spec":{"finalizers":["kubernetes","example.com/hold"]}}')


@mistake("now remove it again")
def leaves_it_on(env):
    """Adds its finalizer through /finalize and leaves it there."""
    _finalize(env, ["kubernetes", "example.com/hold"])


@mistake("leave sandbox as it was")
def removes_kubernetes_too(env):
    """Adds its finalizer, then clears spec.finalizers entirely, the kubernetes finalizer with it."""
    _finalize(env, ["kubernetes", "example.com/hold"])
    _finalize(env, [])


@mistake("left out `kubernetes`")
def drops_kubernetes_meanwhile(env):
    """Sends only its own finalizer (spec.finalizers [example.com/hold]), then puts `kubernetes`
    back: the namespace ends as it was, but was without its `kubernetes` finalizer meanwhile."""
    _finalize(env, ["example.com/hold"])
    _finalize(env, ["kubernetes"])


@mistake("you also changed namespace default", "every other namespace stays as it was")
def finalizes_another_namespace_too(env):
    """Puts its finalizer on sandbox and on default through /finalize, then removes it from
    sandbox only: default keeps example.com/hold."""
    lab = env.lab.environment_module()
    lab.finalize(env, "default", ["kubernetes", "example.com/hold"])
    _finalize(env, ["kubernetes", "example.com/hold"])
    _finalize(env, ["kubernetes"])


@mistake("leave sandbox as it was", "metadata.finalizers")
def leaves_a_metadata_finalizer(env):
    """Puts its finalizer into metadata.finalizers with kubectl patch (where a normal patch puts finalizers), then
    adds and removes one through /finalize as asked: sandbox keeps the metadata finalizer, and once deleted would
    never go."""
    env.lab.environment_module().target(env).kubectl(
        "patch", "ns", "sandbox", "--type=merge", "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
    _finalize(env, ["kubernetes", "example.com/hold"])
    _finalize(env, ["kubernetes"])


@mistake("is not a finalizer of your own", "Kubernetes defines it itself")
def uses_a_standard_finalizer(env):
    """Adds `orphan` through /finalize and removes it again: a name the API server accepts without a
    domain because Kubernetes defines it (the garbage collector's), not a finalizer of one's own."""
    _finalize(env, ["kubernetes", "orphan"])
    _finalize(env, ["kubernetes"])


@mistake("you also changed namespace billing", "every other namespace stays as it was")
def clears_the_finalizers_of_another_active_namespace(env):
    """Adds and removes its finalizer on sandbox as asked, and also tries /finalize on billing,
    Active and not being deleted: clears its spec.finalizers, then puts `kubernetes` back. While
    billing had none, deleting it would have removed it at once and left its content in storage
    (it passed: a finalize request that only takes finalizers away was taken for another
    exercise's work)."""
    lab = env.lab.environment_module()
    _finalize(env, ["kubernetes", "example.com/hold"])
    _finalize(env, ["kubernetes"])
    lab.finalize(env, "billing", [])
    lab.finalize(env, "billing", ["kubernetes"])
