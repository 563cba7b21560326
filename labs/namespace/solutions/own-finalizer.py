"""Reference solution: add and remove a finalizer through PUT /api/v1/namespaces/sandbox/finalize
(the e2e test "should apply a finalizer to a Namespace" does the same)."""


def solve(env):
    c = env.lab.environment_module().client(env)
    ns = c.get("v1", "namespaces", "sandbox")
    ns["spec"]["finalizers"] = ["kubernetes", "example.com/hold"]
    ns = c.update("v1", "namespaces", ns, subresource="finalize")
    ns["spec"]["finalizers"] = ["kubernetes"]
    c.update("v1", "namespaces", ns, subresource="finalize")
