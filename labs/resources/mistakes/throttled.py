"""Common wrong solutions to throttled."""

import yaml

from labkit.exercises import answer_path, mistake


def _explain(env, request_ms=105, quota_us=10000):
    path = answer_path(env.lab.id, "throttled")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"quota_us": quota_us, "period_us": 100000, "request_ms": request_ms}))


def _run(env, resources):
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "frontend")
    pod["spec"]["containers"][0]["resources"] = resources
    lab.replace_pod(env, "node-1", pod)


@mistake("still throttled")
def raised_the_request_only(env):
    """Raises the CPU request as far as the 100m limit allows and keeps the limit."""
    _explain(env)
    _run(env, {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}})


@mistake("cpu request does not cover")
def removed_all_cpu_settings(env):
    """Removes the CPU limit and the CPU request: nothing throttles it, but nothing protects it either."""
    _explain(env)
    _run(env, {"requests": {"memory": "32Mi"}, "limits": {"memory": "64Mi"}})


@mistake("explanation is not right", "does not say how many", "waits for the next period")
def ignored_the_period(env):
    """Says a request takes its 15 ms of CPU, as if the quota were spread over the whole period. The
    feedback once said that request_ms was the wrong one, which let a student find it by trying values."""
    _explain(env, request_ms=15)
    _run(env, {"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}})


@mistake("explanation is not right", "does not say how many")
def quota_as_the_limit_in_millicores(env):
    """Writes the 100m limit itself as the quota (100 µs), the period and the longest request right."""
    _explain(env, quota_us=100)
    _run(env, {"requests": {"cpu": "200m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}})


@mistake("server's command")
def lighter_requests(env):
    """Makes each request need 5 ms of CPU instead of 15 and keeps the 100m limit: it fits the
    quota, but the workload is no longer the scenario's."""
    _explain(env)
    lab = env.lab.environment_module()
    pod = lab.scenario_pod(env, "node-1.yaml", "frontend")
    pod["spec"]["containers"][0]["command"] = ["workload", "serve", "--work", "5", "--every", "100"]
    lab.replace_pod(env, "node-1", pod)


@mistake("server's resources")
def dropped_the_memory_limit_too(env):
    """Removes every limit, memory too, and raises the CPU request."""
    _explain(env)
    _run(env, {"requests": {"cpu": "200m", "memory": "32Mi"}})


@mistake("more than a CPU")
def reserved_a_lot(env):
    """Requests two whole CPUs for a server that uses 150m, with no CPU limit."""
    _explain(env)
    _run(env, {"requests": {"cpu": "2", "memory": "32Mi"}, "limits": {"memory": "64Mi"}})


@mistake("still throttled", "hardly more than it uses")
def limit_equal_to_the_use(env):
    """Sets request and limit to exactly what the server uses, 150m: any CPU beyond one request's
    work in a period spends the quota."""
    _explain(env)
    _run(env, {"requests": {"cpu": "150m", "memory": "32Mi"}, "limits": {"cpu": "150m", "memory": "64Mi"}})
