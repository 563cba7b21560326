"""Reference solution: make the Service type NodePort with the asked nodePort, and apply it."""

from labkit.kubeproxy import live


def solve(env):
    params = env.lab.exercise("nodeport").params
    svc = live.load(env).service(params["service"])
    svc["spec"]["type"] = "NodePort"
    svc["spec"]["ports"][0]["nodePort"] = params["node_port"]
    live.apply_documents(env, [svc], "solutions/nodeport.py")
    env.lab.environment_module().record_solution(env, "nodeport")
