"""Reference solution: node-2 has 320Mi and evicts below 100Mi available, so its Pods may hold
about 220Mi. The cache fills 3/4 of its limit: with 256Mi that is 192Mi, too much beside its
neighbours. A 128Mi limit lets it fill 96Mi and leaves the node well above the threshold."""


def solve(env):
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-2.yaml", "cache")
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "128Mi"
    lab.replace_pod(env, "node-2", pod)
    lab.wait_settled(env, "node-2", "cache")
