"""Common wrong image policies."""

from importlib import util

from labkit.exercises import mistake


def _reference(env):
    spec = util.spec_from_file_location("reference", env.lab.directory / "solutions" / "image-tag-policy.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@mistake("port")
def contains_colon(env):
    """Checks that every image contains a colon: a registry's port counts as a tag."""
    ref = _reference(env)
    ref.apply(env, ref.policy(["object.spec.containers.all(c, c.image.contains(':'))",
                               "!has(object.spec.initContainers) || object.spec.initContainers.all(c, c.image.contains(':'))"]),
              ref.binding())


@mistake("binding")
def no_binding(env):
    """Writes the right policy and no binding."""
    ref = _reference(env)
    ref.apply(env, ref.policy(ref.EXPRESSIONS))


@mistake("Warn")
def only_warns(env):
    """Binds the right policy with validationActions [Warn]."""
    ref = _reference(env)
    ref.apply(env, ref.policy(ref.EXPRESSIONS), ref.binding(("Warn",)))


@mistake("init containers")
def containers_only(env):
    """Checks spec.containers and forgets spec.initContainers."""
    ref = _reference(env)
    ref.apply(env, ref.policy(ref.EXPRESSIONS[:1]), ref.binding())


@mistake("refused", "default")
def bound_everywhere(env):
    """Binds the right policy without matchResources: Pods in every namespace are judged."""
    ref = _reference(env)
    binding = ref.binding()
    del binding["spec"]["matchResources"]
    ref.apply(env, ref.policy(ref.EXPRESSIONS), binding)


@mistake("refused", "created later", "pod-labeler=enabled")
def bound_by_a_label_web_has(env):
    """Binds the right policy to the namespaces labelled pod-labeler=enabled, which web is: a
    namespace made later and given that label is judged too."""
    ref = _reference(env)
    binding = ref.binding()
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {"pod-labeler": "enabled"}}}
    ref.apply(env, ref.policy(ref.EXPRESSIONS), binding)


@mistake("puts the policy to work", "require-image-tag-audit", "audit log")
def audits_everywhere(env):
    """Binds the right policy to web with Deny, and adds a second binding with validationActions
    [Audit] for every namespace, thinking an audit refuses nothing and so does no harm."""
    ref = _reference(env)
    audit = ref.binding(("Audit",))
    audit["metadata"]["name"] = "require-image-tag-audit"
    del audit["spec"]["matchResources"]
    ref.apply(env, ref.policy(ref.EXPRESSIONS), ref.binding(), audit)


@mistake("UPDATE", "kubectl set image")
def creations_only(env):
    """Matches CREATE only: a Pod's image changed in place to an untagged one is admitted."""
    ref = _reference(env)
    policy = ref.policy(ref.EXPRESSIONS)
    policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["CREATE"]
    ref.apply(env, policy, ref.binding())


@mistake("ephemeral container", "kubectl debug", "matchConstraints")
def forgets_kubectl_debug(env):
    """Judges containers, init containers and ephemeral containers on Pod creations and updates, but
    matches `pods` only: `kubectl debug` adds its container through the ephemeralcontainers
    subresource, which the policy is never asked about."""
    ref = _reference(env)
    ref.apply(env, ref.policy(ref.EXPRESSIONS, resources=("pods",)), ref.binding())


@mistake("ephemeral container", "spec.ephemeralContainers")
def debug_matched_not_judged(env):
    """Matches the ephemeralcontainers subresource, but its expressions look at containers and init
    containers only: the Pod's own images are tagged, so an untagged debug container gets in."""
    ref = _reference(env)
    ref.apply(env, ref.policy(ref.EXPRESSIONS[:2]), ref.binding())


@mistake("your policy refuses", "pods/binding")
def every_pod_subresource(env):
    """Matches `pods/*` to catch `kubectl debug`: the scheduler's Binding of every new Pod in web is
    judged too, its `object` has no spec.containers, and under failurePolicy Fail it is refused."""
    ref = _reference(env)
    ref.apply(env, ref.policy(ref.EXPRESSIONS, resources=("pods", "pods/*")), ref.binding())


@mistake("init container", "kubectl set image")
def init_updates_unjudged(env):
    """Judges init containers only when a Pod is created: an init container's image set in place to
    an untagged one later is admitted."""
    ref = _reference(env)
    expressions = list(ref.EXPRESSIONS)
    expressions[1] = f"request.operation != 'CREATE' || {expressions[1]}"
    ref.apply(env, ref.policy(expressions), ref.binding())


@mistake("labels of a Pod whose untagged images", "not new")
def judges_every_update(env):
    """Judges every container's image on every update: a Pod made in web before the policy, with an
    untagged image, can no longer have its labels changed (`kubectl label`, a controller)."""
    ref = _reference(env)
    ref.apply(env, ref.policy([f"object.spec.containers.all(c, {ref.PINNED})",
                               f"!has(object.spec.initContainers) || object.spec.initContainers.all(c, {ref.PINNED})",
                               "!has(object.spec.ephemeralContainers) || "
                               f"object.spec.ephemeralContainers.all(c, {ref.PINNED})"]), ref.binding())


@mistake("made before your policy", "already runs", "oldObject")
def any_image_the_pod_had(env):
    """On an update, lets through every image the Pod already ran, in whichever container: a Pod
    made before the policy with an untagged image in one container can have another container's
    image changed in place to that image (`kubectl set image`), or be given a debug container with
    it, and the container that gets it then runs an untagged image."""
    ref = _reference(env)
    had = " || ".join(f"(has(oldObject.spec.{f}) && oldObject.spec.{f}.exists(o, o.image == c.image))"
                      for f in ("containers", "initContainers", "ephemeralContainers"))
    kept = f"(request.operation == 'UPDATE' && ({had}))"
    ref.apply(env, ref.policy([f"object.spec.containers.all(c, {ref.PINNED} || {kept})",
                               f"!has(object.spec.initContainers) || object.spec.initContainers.all(c, {ref.PINNED} || "
                               f"{kept})",
                               f"!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, "
                               f"{ref.PINNED} || {kept})"]), ref.binding())


@mistake("failed to evaluate", "failurePolicy Ignore")
def ignores_evaluation_errors(env):
    """Judges containers and init containers in one list (spec.containers + spec.initContainers),
    reading spec.initContainers without has(), under failurePolicy Ignore: on a Pod without init
    containers the expression fails to evaluate (no such key), and Ignore admits it, untagged images
    and all. The image test itself is right, so the feedback must not blame a registry's port."""
    ref = _reference(env)
    policy = ref.policy([f"(object.spec.containers + object.spec.initContainers).all(c, {ref.PINNED} || "
                         f"{ref.kept('containers')} || {ref.kept('initContainers')})",
                         f"!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, "
                         f"{ref.PINNED} || {ref.kept('ephemeralContainers')})"])
    policy["spec"]["failurePolicy"] = "Ignore"
    ref.apply(env, policy, ref.binding())


@mistake("whoever creates the Pod", "matchConditions")
def judges_the_admins_requests_only(env):
    """The right policy, with a matchCondition that lets it judge only the requests of labkit-admin
    (the user the student tried it as): Pods that a Deployment's ReplicaSet controller, a
    ServiceAccount or another person creates in web get in with untagged images."""
    ref = _reference(env)
    policy = ref.policy(ref.EXPRESSIONS)
    policy["spec"]["matchConditions"] = [{"name": "the-admin",
                                          "expression": "request.userInfo.username == 'labkit-admin'"}]
    ref.apply(env, policy, ref.binding())
