"""Near-misses of what the containers got from the reference plugin's Allocate: each Pod not
admitted, its container not started, its environment variable changed or gone or joined by
another, its mount gone, writable, showing other files or another directory, the devices kubelet allocated changed
(so the variable no longer names them; their order alone changes nothing), and each answer to the
check's own Allocate calls gone or its environment variable changed — one at a time."""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    env = ctx.params["env"]
    words = [(r"pods(\.pod-[ab])?(\.admitted)?", ("did not admit",)),
             (r"pods\.pod-[ab]\.devices.*", (env,)),
             (r"pods\.pod-[ab]\.container(\.started)?", ("did not start",)),
             (r"pods\.pod-[ab]\.container\.envs.*", (env,)),
             (r"pods\.pod-[ab]\.container\.mounts(\./var/lib/widget)?", ("nothing mounted",)),
             (r"pods\.pod-[ab]\.container\.mounts\./var/lib/widget\.read_only", ("read-only",)),
             (r"pods\.pod-[ab]\.container\.mounts\./var/lib/widget\.(files|source).*", ("widget-driver",)),
             (r"allocates(\[\])?", ("not every",)),
             (r"allocates\[\]\.envs.*", (env,))]

    def equivalent(edit):
        if edit.op == "drop" and edit.path.endswith(".error"):
            return "an admitted Pod has no admission error: dropped or null, the same"
        if edit.op == "swap" and edit.path == "allocates":
            return "each answer is judged with the request it answered: the order of the check's calls does not matter"
        if edit.op == "swap" and edit.path.endswith(".devices"):
            return ("kubelet holds a container's devices as a set and sends devices_ids in no order (manager.go "
                    "allocateContainerResources: UnsortedList()): the variable names them in any order")
        return None
    yield from checks.observation_mutants(ctx.exercise.id, checks.observe_allocate(ctx), words, equivalent=equivalent,
                                          skip=(r"pods\.pod-[ab]\.container\.options.*", r"pods\.pod-[ab]\.error",
                                                r"allocates\[\]\.devices(\[\])?"))
