"""Reference solution: ClientIP session affinity on the Service, applied."""

from labkit.kubeproxy import live


def solve(env):
    params = env.lab.exercise("session-affinity").params
    svc = live.load(env).service(params["service"])
    svc["spec"]["sessionAffinity"] = "ClientIP"
    live.apply_documents(env, [svc], "solutions/session-affinity.py")
    env.lab.environment_module().record_solution(env, "session-affinity")
