"""Near-misses of the reader's fixed Pod: every one-step edit of the reference file (another
mountPropagation, a field dropped or changed, ...), privilege added, the file fixed but the Pod
not applied again; judged on the observation labkit's reconstruction predicts for each."""

import copy

from labkit.mutants import Mutant

POD = "reader"


def mutants(ctx):
    spec = ctx.lab._load("mutants/_pods.py")
    checks = ctx.lab._load("checks.py")
    host_path = ctx.params["host_path"]
    solved = checks.observe_reader_sees_node_mounts(ctx)
    reference = solved["pod"]

    def mutant(name, change, source, names, equivalent=None, reapply=True):
        observation = spec.predict(ctx, solved, source, host_path, "reader")
        if not reapply:     # the file changed, the Pod on the node did not
            observation = copy.deepcopy(solved)
            observation["file"]["pods"] = [source]
        return Mutant(name, change, names=names, observation=observation, equivalent=equivalent,
                      apply=spec.apply_file(POD, POD, source, reapply=reapply))

    for edit in spec.edits(reference):
        yield mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), edit.describe(),
                     edit.value, spec.names_for(edit))
    for key, source in spec.extra_fields(reference):
        yield mutant(f"add:{key}", f"{key} added to the Pod", source, (key,))
    yield mutant("privileged", "the container made privileged as well", spec.with_change(
        reference, lambda c: c.setdefault("securityContext", {}).update(privileged=True)), ("privileged",))
    yield mutant("sys-admin", "CAP_SYS_ADMIN added", spec.with_change(
        reference, lambda c: c.setdefault("securityContext", {}).update(capabilities={"add": ["SYS_ADMIN"]})),
        ("capabilities",))

    def bidirectional(c):
        c["volumeMounts"][0]["mountPropagation"] = "Bidirectional"
        c.setdefault("securityContext", {})["privileged"] = True
    yield mutant("bidirectional-privileged", "Bidirectional, made privileged so the API server takes it",
                 spec.with_change(reference, bidirectional), ("reached the node",))
    yield mutant("read-only", "the volume mounted read-only as well",
                 spec.with_change(reference, lambda c: c["volumeMounts"][0].update(readOnly=True)), (),
                 equivalent="readOnly remounts the bind MS_RDONLY, which changes no propagation flag (runc "
                            "mountToRootfs, then mountPropagate): the node's mounts still arrive, the Pod's still stay")
    # fewer capabilities is no privilege gained, but another change of the Pod than the exercise asks:
    # the feedback says so (it once said the Pod "must not get more than it had")
    yield mutant("drop-all", "every capability dropped as well", spec.with_change(
        reference, lambda c: c.setdefault("securityContext", {}).update(capabilities={"drop": ["ALL"]})),
        ("capabilities.drop", "not as shipped"))
    shipped = ctx.lab.environment_module().shipped_pods()[POD].source
    fixed = copy.deepcopy(shipped)
    fixed["spec"]["containers"][0]["volumeMounts"][0]["mountPropagation"] = "HostToContainer"
    yield Mutant("file-only", "the file fixed, the running Pod left as it was", names=("differs from the running Pod",),
                 observation=_unapplied(ctx, solved, shipped, fixed, spec, host_path),
                 apply=_file_only(spec, fixed))


def _unapplied(ctx, solved, shipped, fixed, spec, host_path):
    observation = spec.predict(ctx, solved, shipped, host_path, "reader")
    observation["file"]["pods"] = [fixed]
    return observation


def _file_only(spec, fixed):
    def apply(env):
        spec.apply_file(POD, POD, env.lab.environment_module().shipped_pods()[POD].source)(env)   # back as shipped
        spec.apply_file(POD, POD, fixed, reapply=False)(env)
    return apply
