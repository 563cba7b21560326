"""Common wrong ways to make alice and grant her read-only access to dev."""

import json
from pathlib import Path

import yaml

from labkit.exercises import mistake, write_answer

ALICE = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}


def _alice(env, cn=None):
    lab = env.lab.environment_module()
    work = Path(env.dir) / "student" / "alice"
    key, crt = lab.make_certificate(env, work, "alice", cn=cn)
    config = lab.write_kubeconfig(env, work / "alice.kubeconfig", "alice", crt, key)
    write_answer(env, "alice", {"kubeconfig": str(config)})
    return lab


@mistake("can write")
def binds_edit(env):
    """Binds the ClusterRole edit in dev: she can read, and write too."""
    _alice(env).bind(env, "alice-edit", "dev", "ClusterRole", "edit", ALICE)


@mistake("other namespaces")
def cluster_role_binding(env):
    """Binds view with a ClusterRoleBinding: read-only, but in every namespace."""
    _alice(env).bind(env, "alice-view", None, "ClusterRole", "view", ALICE)


@mistake("secrets")
def own_role_reads_everything(env):
    """Writes a Role that may get, list and watch every resource in dev: secrets included."""
    lab = _alice(env)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "read-all", "namespace": "dev"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]}
    lab.kubectl(env, "apply", "-f", "-", input=json.dumps(role))
    lab.bind(env, "alice-read-all", "dev", "Role", "read-all", ALICE)


@mistake("token")
def kubeconfig_with_admin_token(env):
    """Makes the certificate and binding right, but writes a kubeconfig that uses the admin's token."""
    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    token = lab.target(env).client().token
    path = Path(env.dir) / "student" / "alice" / "alice-token.kubeconfig"
    lab.write_kubeconfig(env, path, "alice", token=token)
    write_answer(env, "alice", {"kubeconfig": str(path)})


@mistake("common name")
def wrong_common_name(env):
    """Puts her full name into the CSR's subject: CN=Alice Smith."""
    lab = _alice(env, cn="Alice Smith")
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)


@mistake("private key", "does not belong")
def key_of_another_csr(env):
    """Makes a second key and CSR by mistake and writes the kubeconfig with the new key and the
    certificate issued for the first."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    key = Path(env.dir) / "student" / "alice" / "alice.key"
    # what `openssl genrsa -out alice.key 2048` writes over the first key
    key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


@mistake("system:masters")
def certificate_in_system_masters(env):
    """Puts O=system:masters into her CSR's subject (as a tutorial's admin certificate does): the
    API server refuses the CertificateSigningRequest; goes on, binds view in dev and writes the
    kubeconfig with the certificate file that never came."""
    from labkit.errors import LabkitError
    lab = env.lab.environment_module()
    work = Path(env.dir) / "student" / "alice"
    try:
        key, crt = lab.make_certificate(env, work, "alice", groups=("system:masters",))
    except LabkitError as exc:
        assert "system:masters group is not allowed" in str(exc), exc
        key, crt = work / "alice.key", work / "alice.crt"
    config = lab.write_kubeconfig(env, work / "alice.kubeconfig", "alice", crt, key)
    write_answer(env, "alice", {"kubeconfig": str(config)})
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)


def _role(lab, env, name, rules):
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": "dev"},
            "rules": rules}
    lab.kubectl(env, "apply", "-f", "-", input=json.dumps(role))


@mistake("can write", "pods/")
def view_and_exec(env):
    """Binds view, and a Role of its own that lets her exec, attach and port-forward into Pods of dev:
    none of these is a read."""
    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    _role(lab, env, "alice-exec", [{"apiGroups": [""], "verbs": ["create", "get"],
                                    "resources": ["pods/exec", "pods/attach", "pods/portforward", "pods/proxy",
                                                  "services/proxy"]}])
    lab.bind(env, "alice-exec", "dev", "Role", "alice-exec", ALICE)


@mistake("pods/attach in dev", "WebSocket", "is a GET")
def view_and_get_on_exec(env):
    """Binds view, and a Role of its own with only the verb get on pods/exec, pods/attach and
    pods/portforward, thinking get is a read: over a WebSocket (a GET) kube-apiserver v1.34 lets
    get alone run commands in the Pods of dev. Its feedback once said the core group serves none of
    these subresources, which is untrue of kube-apiserver."""
    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    _role(lab, env, "alice-exec", [{"apiGroups": [""], "verbs": ["get"],
                                    "resources": ["pods/exec", "pods/attach", "pods/portforward"]}])
    lab.bind(env, "alice-exec", "dev", "Role", "alice-exec", ALICE)


@mistake("cannot", "names a Group alice")
def binds_a_group_named_alice(env):
    """Binds view in dev to the subject kind Group, name alice (`--group=alice` for `--user=alice`):
    her certificate puts her in no such group, so she gets nothing."""
    _alice(env).bind(env, "alice-view", "dev", "ClusterRole", "view",
                     {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"})


@mistake("can write", "impersonate")
def view_and_impersonation_of_herself(env):
    """Binds view, and a ClusterRole that lets her impersonate the user alice (only herself, she thinks)."""
    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "alice-self"},
            "rules": [{"apiGroups": [""], "verbs": ["impersonate"], "resources": ["users"], "resourceNames": ["alice"]}]}
    lab.kubectl(env, "apply", "-f", "-", input=json.dumps(role))
    lab.bind(env, "alice-self", None, "ClusterRole", "alice-self", ALICE)



@mistake("cannot", "names the user Alice", "case-sensitive")
def binds_her_name_capitalized(env):
    """Makes her right, but the RoleBinding of view names the user Alice, as one writes a name:
    RBAC compares user names as they are, and her certificate says alice."""
    _alice(env).bind(env, "alice-view", "dev", "ClusterRole", "view", {**ALICE, "name": "Alice"})


@mistake("bearer token besides the client certificate")
def kubeconfig_with_her_certificate_and_the_admin_token(env):
    """Writes her kubeconfig from the admin's, putting her certificate and key into the user that
    keeps the admin's token: the API server takes the certificate first and sees alice, but the file
    hands out the admin's token. Its feedback once said the kubeconfig authenticates with the token."""
    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    work = Path(env.dir) / "student" / "alice"
    token = lab.target(env).client().token
    config = yaml.safe_load((work / "alice.kubeconfig").read_text())
    for user in config["users"]:
        user["user"]["token"] = token
    path = work / "alice-and-admin-token.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    write_answer(env, "alice", {"kubeconfig": str(path)})


@mistake("secrets", "view is not as the cluster has it", "aggregate-to-view")
def aggregates_secrets_into_view(env):
    """Binds view in dev, and makes view read Secrets too with a ClusterRole of her own labelled
    rbac.authorization.k8s.io/aggregate-to-view=true, which the clusterrole-aggregation controller
    folds into view for everyone bound to it. Its feedback once said the cluster's read-only role
    leaves Secrets out, which the view the student changed no longer did."""
    import time

    lab = _alice(env)
    lab.bind(env, "alice-view", "dev", "ClusterRole", "view", ALICE)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "view-secrets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]}
    lab.kubectl(env, "apply", "-f", "-", input=json.dumps(role))
    c = lab.target(env).client()
    deadline = time.monotonic() + 30        # the clusterrole-aggregation controller's sync
    while time.monotonic() < deadline:
        rules = c.get("rbac.authorization.k8s.io/v1", "clusterroles", "view").get("rules") or []
        if any("secrets" in (r.get("resources") or []) for r in rules):
            return
        time.sleep(0.2)
    raise AssertionError("the aggregation controller did not fold view-secrets into view within 30 s")
