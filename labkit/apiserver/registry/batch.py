"""batch/v1: Jobs and CronJobs (pkg/registry/batch/job and cronjob strategy.go).
"""

from __future__ import annotations

from labkit.apiserver import tables
from labkit.apiserver.errors import FieldError, field_invalid, field_required, field_unsupported
from labkit.apiserver.resources import DELETE_DEPENDENTS, ORPHAN_DEPENDENTS, StatusSubresource, Strategy
from labkit.apiserver.registry.core import _immutable
from labkit.apiserver.podvalidation import validate_pod_containers
from labkit.apiserver.registry.pod import _validate_workload


# -- batch/v1 ----------------------------------------------------------------------------------

JOB_DELETE_WARNING = ("child pods are preserved by default when jobs are deleted; set propagationPolicy=Background "
                      "to remove them or set propagationPolicy=Orphan to suppress this warning")


def _restart_policy(template: dict | None, path: str, allowed: list[str]) -> list[FieldError]:
    policy = ((template or {}).get("spec") or {}).get("restartPolicy", "")
    return [] if policy in allowed else [field_unsupported(path, policy, allowed)]


class JobStrategy(Strategy):
    """pkg/registry/batch/job: a DELETE without policy orphans the pods (OrphanDependents, with a
    warning); the selector and the pods' labels are generated from the Job's UID and name
    (batch.kubernetes.io/controller-uid, batch.kubernetes.io/job-name and their legacy names)
    unless manualSelector; pods must not restart Always; the template is immutable."""

    default_gc_policy = ORPHAN_DEPENDENTS
    subresources = (StatusSubresource(),)
    generation = True
    printer = tables.PRINTERS["Job"]

    def delete_warning(self, options: dict) -> str | None:
        if options.get("propagationPolicy") is None and options.get("orphanDependents") is None:
            return JOB_DELETE_WARNING
        return None

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {}
        spec = obj.setdefault("spec", {})
        if not spec.get("manualSelector"):
            meta = obj["metadata"]
            labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            for key in ("job-name", "batch.kubernetes.io/job-name"):
                labels.setdefault(key, meta.get("name", ""))
            for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                labels.setdefault(key, meta.get("uid", ""))
            selector = spec.setdefault("selector", {})
            selector.setdefault("matchLabels", {}).setdefault("batch.kubernetes.io/controller-uid", meta.get("uid", ""))

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = _validate_workload({"spec": {"selector": spec.get("selector"), "template": spec.get("template")}},
                                    True)
        for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            value = spec.get(key)
            if value is not None and value < 0:
                errors.append(field_invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
        errors += _restart_policy(spec.get("template"), "spec.template.spec.restartPolicy", ["OnFailure", "Never"])
        return errors

    def validate_update(self, new, old):
        errors = self.validate(new)
        if not (new.get("spec") or {}).get("suspend"):
            errors += _immutable(new, old, "spec.template")
        return errors + _immutable(new, old, "spec.selector") + _immutable(new, old, "spec.completions")


class CronJobStrategy(Strategy):
    """pkg/registry/batch/cronjob: DeleteDependents for batch/v1; the schedule must parse as a
    standard cron line (or a descriptor) and the time zone must exist."""

    default_gc_policy = DELETE_DEPENDENTS
    subresources = (StatusSubresource(),)
    generation = True
    printer = tables.PRINTERS["CronJob"]

    def prepare_for_create(self, obj):
        super().prepare_for_create(obj)
        obj["status"] = {}

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errors = []
        name = obj["metadata"].get("name", "")
        if len(name) > 52:
            errors.append(field_invalid("metadata.name", name, "must be no more than 52 characters"))
        schedule = spec.get("schedule", "")
        if not schedule:
            errors.append(field_required("spec.schedule"))
        else:
            problem = cron_problem(schedule)
            if problem:
                errors.append(field_invalid("spec.schedule", schedule, problem))
        zone = spec.get("timeZone")
        if zone is not None:
            try:
                import zoneinfo
                zoneinfo.ZoneInfo(zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                errors.append(field_invalid("spec.timeZone", zone, f"unknown time zone {zone}"))
        policy = spec.get("concurrencyPolicy")
        if policy not in ("Allow", "Forbid", "Replace"):
            errors.append(field_unsupported("spec.concurrencyPolicy", policy or "", ["Allow", "Forbid", "Replace"]))
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
        errors += validate_pod_containers((template or {}).get("spec") or {}, "spec.jobTemplate.spec.template.spec")
        errors += _restart_policy(template, "spec.jobTemplate.spec.template.spec.restartPolicy",
                                  ["OnFailure", "Never"])
        return errors


CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 6))
CRON_NAMES = {3: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
              4: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]}


def cron_problem(schedule: str) -> str | None:
    """What robfig/cron's standard parser (cron.ParseStandard) says about a schedule, or None."""
    import re
    if "TZ=" in schedule:
        return "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    if schedule.startswith("@"):
        if schedule in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"):
            return None
        if schedule.startswith("@every "):
            return None if re.fullmatch(r"@every (\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+", schedule) else \
                f"failed to parse duration {schedule}"
        return f"unrecognized descriptor: {schedule}"
    fields = schedule.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    for i, (text, (what, low, high)) in enumerate(zip(fields, CRON_FIELDS)):
        for part in text.split(","):
            m = re.fullmatch(r"(\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/(\d+))?", part)
            if not m:
                return f"failed to parse int from {part}: strconv.Atoi: parsing {part!r}: invalid syntax"
            span = m.group(1)
            if span in ("*", "?"):
                continue
            for value in span.split("-"):
                names = CRON_NAMES.get(i, [])
                number = names.index(value.lower()) + (1 if i == 3 else 0) if value.lower() in names else None
                if number is None:
                    if not value.isdigit():
                        return f'failed to parse int from {value}: strconv.Atoi: parsing "{value}": invalid syntax'
                    number = int(value)
                if number < low:
                    return f"beginning of range ({number}) below minimum ({low}): {part}"
                if number > high:
                    return f"end of range ({number}) above maximum ({high}): {part}"
    return None
