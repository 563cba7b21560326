"""Reference solution: a key and CSR with CN=alice, a CertificateSigningRequest for the
kube-apiserver-client signer, approved; a kubeconfig with her certificate; the ClusterRole view
bound to her by a RoleBinding in dev."""

from pathlib import Path

from labkit.exercises import write_answer


def solve(env):
    lab = env.lab.environment_module()
    work = Path(env.dir) / "student" / "alice"
    key, crt = lab.make_certificate(env, work, "alice")
    config = lab.write_kubeconfig(env, work / "alice.kubeconfig", "alice", crt, key)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view",
             {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"})
    write_answer(env, "alice", {"kubeconfig": str(config)})
