"""Reference solution, the documented way: drain the node, delete cpu_manager_state, restart."""


def solve(env):
    node_b = env.dir / "node-b"
    (node_b / "pods.yaml").write_text("# drained: every Pod was evicted to other nodes\n")
    (node_b / "kubelet" / "cpu_manager_state").unlink(missing_ok=True)
