"""Near-misses of the CSI plugin's fixed Pod: every one-step edit of the reference file, and the
ways around privileged (CAP_SYS_ADMIN instead, HostToContainer instead, read-only); judged on the
observation labkit's reconstruction predicts for each."""

from labkit.mutants import Mutant

POD = "csi-node"


def mutants(ctx):
    spec = ctx.lab._load("mutants/_pods.py")
    checks = ctx.lab._load("checks.py")
    host_path = ctx.params["host_path"]
    solved = checks.observe_csi_publishes(ctx)
    reference = solved["pod"]

    def mutant(name, change, source, names, equivalent=None):
        return Mutant(name, change, names=names, observation=spec.predict(ctx, solved, source, host_path, "csi"),
                      equivalent=equivalent, apply=spec.apply_file(POD, POD, source))

    for edit in spec.edits(reference):
        yield mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""), edit.describe(),
                     edit.value, spec.names_for(edit))
    for key, source in spec.extra_fields(reference):
        yield mutant(f"add:{key}", f"{key} added to the Pod", source, (key,))

    def sys_admin(c):
        c["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    yield mutant("sys-admin-instead", "CAP_SYS_ADMIN instead of privileged", spec.with_change(reference, sys_admin),
                 ("privileged",))

    def host_to_container(c):
        c["volumeMounts"][0]["mountPropagation"] = "HostToContainer"
    yield mutant("host-to-container", "HostToContainer (still privileged)", spec.with_change(reference, host_to_container),
                 ("mountPropagation",))
    yield mutant("read-only", "the volume mounted read-only",
                 spec.with_change(reference, lambda c: c["volumeMounts"][0].update(readOnly=True)), ("readOnly",))

    # a privileged container gets every capability whatever securityContext.capabilities lists
    # (the CRI's LinuxContainerSecurityContext.privileged; containerd WithPrivileged): adding or
    # dropping some there changes nothing the plugin can do
    ignored = "a privileged container gets every capability: the runtime ignores securityContext.capabilities"
    for name, capabilities in (("privileged-and-sys-admin", {"add": ["SYS_ADMIN"]}),
                               ("privileged-and-drop-all", {"drop": ["ALL"]})):
        def both(c, capabilities=capabilities):
            c["securityContext"]["capabilities"] = capabilities
        yield mutant(name, f"privileged, and capabilities {capabilities} too", spec.with_change(reference, both), (),
                     equivalent=ignored)
