"""Reference solution: the RoleBinding's subject names the ServiceAccount in the wrong namespace;
correct it."""


def solve(env):
    env.lab.environment_module().kubectl(
        env, "-n", "shop", "patch", "rolebinding", "reporter-reads-pods", "--type=json",
        "-p", '[{"op":"replace","path":"/subjects/0/namespace","value":"shop"}]')
