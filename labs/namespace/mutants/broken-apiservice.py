"""Near-misses of repairing the stale APIService, as what the check observes of the solved lab:
the namespace never deleted, or deleted without waiting on the failing discovery; the APIService
still there and not Available for each of kube-aggregator's reasons; still there and Available
but serving another group, version or Service; the namespace still there, force-finalized, or
something stored under its name; another APIService (a Local one of the API server's own groups)
deleted or changed too; the APIService pointed elsewhere or made Local for a while (rewrites
the audit log has, undone later). Bringing the backend back (the APIService Available again,
unchanged) is the other right fix: equivalent, as kube-aggregator's availability check says."""

from labkit.namespaces.mutants import gone_edits, gone_equivalent, gone_names, observation_mutants

REASONS = ("ServiceNotFound", "ServicePortError", "EndpointsNotFound", "MissingEndpoints", "FailedDiscoveryCheck")


def _apiservice(env):
    lab = env.lab.environment_module()
    c = lab.client(env)
    c.create("apiregistration.k8s.io/v1", "apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": lab.APISERVICE},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                 "insecureSkipTLSVerify": True,
                 "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}}})
    return c


def _stale_apiservice(env):
    """The APIService made again after the Service was deleted (ServiceNotFound)."""
    _apiservice(env)


def _service_without_selector(env):
    """A Service metrics-server without a selector (so no EndpointSlices), and the APIService."""
    c = _apiservice(env)
    c.create("v1", "services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics-server"},
                                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 10250}]}},
             "kube-system")


def mutants(ctx):
    checks = ctx.env.lab._load("checks.py")
    seen = checks.observe_broken_apiservice(ctx)
    service = f"kube-system/{ctx.params['service']}"
    base = {"group": "metrics.k8s.io", "version": "v1beta1", "service": service, "settled": True}
    unavailable = [{"status": "False", "reason": r, "message": "", **base} for r in REASONS]
    changed = [{"status": "True", "reason": "Passed", "message": "all checks passed", **base, key: value}
               for key, value in (("group", "metrics.example.com"), ("version", "v1"),
                                  ("service", "kube-system/other"))]
    available = {"status": "True", "reason": "Passed", "message": "all checks passed", **base}

    def names(edit):
        if edit.path.startswith("rewrites"):
            return ("even if you put it back later", edit.after)
        if edit.path.startswith("other_apiservices"):
            return ("besides", "stay as they were")
        if edit.path == "deleted":
            return ("has not been deleted yet",)
        if edit.path == "discovery_failure":
            return ("without ever waiting for a failing discovery",)
        if edit.path == "apiservice":
            after = edit.after
            if after.get("status") != "True":
                return ("not Available", after["reason"])
            return ("was changed",)
        return gone_names(edit, "gone/") or gone_names(edit, "gone.")

    def equivalent(edit):
        if edit.path == "apiservice" and edit.after == available:
            return ("the backend brought back: kube-aggregator's availability check passed (remote_available_"
                    "controller.go), so discovery of metrics.k8s.io works again and the namespace controller finishes")
        return gone_equivalent(edit, "gone.")

    replace, add = gone_edits(("gone",), "configmaps/dashboards")
    yield from observation_mutants(
        seen, names=names, equivalent=equivalent,
        alternatives={"gone.spec_edit": ["patched"], "deleted": [False], "discovery_failure": [None]},
        skip=lambda p: p.startswith("apiservice"),
        replace={("apiservice",): [*unavailable, *changed, available], **replace},
        add={**add, ("other_apiservices",): ["delete v1.apps", "deletecollection (every APIService)", "patch v1."],
             ("rewrites",): ["patch: service none", "update: version v1beta2", "patch: service kube-system/other"]},
        apply={"replace:apiservice=" + str(unavailable[0]): _stale_apiservice,
               "replace:apiservice=" + str(unavailable[2]): _service_without_selector})
