"""Reference solution: the widget plugin of `register` (solutions/register.py MODEL), written to
plugins/allocate.py."""


def solve(env):
    model = env.lab._load("solutions/register.py").MODEL
    env.lab.environment_module().write_plugin(env, "allocate", model)
