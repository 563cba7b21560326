"""Common wrong fixes of the ServiceAccount's 403."""

import json

from labkit.exercises import mistake

SA = {"kind": "ServiceAccount", "name": "reporter", "namespace": "shop"}


@mistake("role", "changed")
def edits_the_role(env):
    """Widens the Role pod-reader to every verb on pods, thinking the role is too narrow."""
    lab = env.lab.environment_module()
    role = json.loads(lab.kubectl(env, "-n", "shop", "get", "role", "pod-reader", "-o", "json"))
    role["rules"][0]["verbs"] = ["*"]
    lab.kubectl(env, "replace", "-f", "-", input=json.dumps(role))


@mistake("cluster-admin")
def binds_cluster_admin(env):
    """Makes it work with a ClusterRoleBinding to cluster-admin."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "create", "clusterrolebinding", "reporter-admin", "--clusterrole=cluster-admin",
                "--serviceaccount=shop:reporter")


@mistake("still forbidden")
def binds_in_default(env):
    """Creates another RoleBinding of pod-reader for the ServiceAccount, in the namespace default."""
    lab = env.lab.environment_module()
    lab.bind(env, "reporter-reads-pods", "default", "Role", "pod-reader", SA)


@mistake("still forbidden")
def binds_a_user_named_reporter(env):
    """Rewrites the binding's subject as a User named reporter."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "-n", "shop", "patch", "rolebinding", "reporter-reads-pods", "--type=json", "-p",
                '[{"op":"replace","path":"/subjects/0","value":{"kind":"User","name":"reporter",'
                '"apiGroup":"rbac.authorization.k8s.io"}}]')


@mistake("view", "nothing more")
def binds_view_leaving_broken_binding(env):
    """Creates `kubectl create rolebinding reporter-view -n shop --clusterrole=view
    --serviceaccount=shop:reporter` and leaves the broken binding as it is: the job can list pods,
    and read every ConfigMap of shop too."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "create", "rolebinding", "reporter-view", "-n", "shop", "--clusterrole=view",
                "--serviceaccount=shop:reporter")


@mistake("also grants", "system:serviceaccounts:shop")
def binds_every_account_of_the_namespace(env):
    """Binds pod-reader to the group of every ServiceAccount in shop: the job can list pods, and so can
    every other account there."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "create", "rolebinding", "shop-accounts-read-pods", "-n", "shop", "--role=pod-reader",
                "--group=system:serviceaccounts:shop")



@mistake("also grants", "shop/default")
def fixes_and_lets_the_neighbour_read_prod(env):
    """Fixes the binding's subject, and while at it lets the other ServiceAccount of shop, default,
    read prod with a RoleBinding of view there: the job gets exactly its Role, and an account that
    every Pod of shop runs as unless it names another now reads prod."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "-n", "shop", "patch", "rolebinding", "reporter-reads-pods", "--type=json",
                "-p", '[{"op":"replace","path":"/subjects/0/namespace","value":"shop"}]')
    lab.bind(env, "shop-default-view", "prod", "ClusterRole", "view",
             {"kind": "ServiceAccount", "name": "default", "namespace": "shop"})


@mistake("the subject that was wrong", "nobody else")
def adds_the_job_beside_the_wrong_subject(env):
    """Adds the job's ServiceAccount as a second subject of the binding and leaves the wrong one: the
    job lists its Pods, and the ServiceAccount reporter of default — which nobody meant, and anyone
    who may create ServiceAccounts there can make — would read them too."""
    lab = env.lab.environment_module()
    lab.kubectl(env, "-n", "shop", "patch", "rolebinding", "reporter-reads-pods", "--type=json", "-p",
                json.dumps([{"op": "add", "path": "/subjects/-", "value": SA}]))
