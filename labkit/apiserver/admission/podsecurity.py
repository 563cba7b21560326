"""The PodSecurity admission plugin (Pod Security Admission, v1.34).

kube-apiserver runs it in-tree (plugin/pkg/admission/security/podsecurity/admission.go,
Plugin.Validate), a validating-phase plugin for CREATE and UPDATE, on the library
k8s.io/pod-security-admission (admission/admission.go). Without an admission configuration file
its defaults are privileged:latest for enforce, audit and warn, and nothing is exempt; a
namespace chooses stricter levels with its labels (api/constants.go):

  pod-security.kubernetes.io/enforce|audit|warn            privileged | baseline | restricted
  pod-security.kubernetes.io/enforce|audit|warn-version    latest | v1.<minor>

What it does (admission.go):
- Namespaces (ValidateNamespace): a label with a bad value is refused with 422 on create, and on
  update when the labels' errors changed (api/helpers.go PolicyToEvaluate: `must be one of
  privileged, baseline, restricted`, `must be "latest" or "v1.x"`). When an update makes the
  enforce level stricter, the namespace's Pods are checked against it and the answer carries
  warnings (EvaluatePodsInNamespace): `existing pods in namespace "ns" violate the new
  PodSecurity enforce level "restricted:latest"` and one line per distinct set of reasons,
  `NAME (and N other pods): reason, reason`.
- Pods (ValidatePod; the subresources exec, attach, binding, eviction, log, portforward, proxy and
  status are skipped, an update only when a container was added or an image changed
  (isSignificantPodUpdate)): against the enforce level a violation is refused, 403 `pods "x" is
  forbidden: violates PodSecurity "restricted:latest": <reason> (<detail>), ...` (response.go
  forbiddenResponse); against audit the audit annotation
  `pod-security.kubernetes.io/audit-violations`; against warn a `Warning:` header `would violate
  PodSecurity "baseline:latest": ...` (only when the request is admitted). The annotation
  `pod-security.kubernetes.io/enforce-policy` names the enforce level evaluated.
- Pod controllers and templates (ValidatePodController: replicationcontrollers, podtemplates,
  replicasets, deployments, statefulsets, daemonsets, jobs, cronjobs): only warn and audit; a
  Deployment is never refused, its ReplicaSet's Pod creations are (FailedCreate events).

The checks (policy/check_*.go) run in the order Go registers them (file names): baseline checks,
then the baseline checks that a restricted check replaces (capabilities, hostPath volumes,
seccomp) only at baseline, then the restricted checks (policy/registry.go EvaluatePod).
"""

from __future__ import annotations

import time

from labkit.apiserver.admission import Attributes
from labkit.apiserver.errors import field_invalid, forbidden, go_quote, invalid

LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LEVELS = ("privileged", "baseline", "restricted")
LATEST = None                 # the version "latest"
MAX_VERSION = 34              # the newest MinimumVersion of the v1.34 checks (policy/registry.go maxVersion)

# admission.go defaultPodSpecResources
POD_CONTROLLERS = {("", "replicationcontrollers"), ("", "podtemplates"), ("apps", "replicasets"),
                   ("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets"),
                   ("batch", "jobs"), ("batch", "cronjobs")}
# pod-security-admission admission/admission.go CompleteConfiguration: namespaceMaxPodsToCheck,
# how many of a namespace's Pods EvaluatePodsInNamespace checks against a new enforce level
NAMESPACE_MAX_PODS_TO_CHECK = 3000
# admission.go defaultNamespacePodCheckTimeout: how long EvaluatePodsInNamespace may check Pods,
# or half the time the request has left (its deadline: filters/deadline.py), if that is less
NAMESPACE_POD_CHECK_TIMEOUT = 1.0
# admission.go ignoredPodSubresources
IGNORED_POD_SUBRESOURCES = {"exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"}


# -- levels, versions and the namespace's policy (api/helpers.go) ------------------------------

def _version_text(version) -> str:
    return "latest" if version is LATEST else f"v1.{version}"


def level_version(level: str, version) -> str:
    """LevelVersion.String(): `restricted:latest`, `baseline:v1.30`."""
    return f"{level}:{_version_text(version)}"


def parse_version(text: str):
    """ParseVersion: "latest" or v1.<minor> (no leading zeros); anything else is latest and an error."""
    if text == "latest":
        return LATEST, None
    minor = text[3:] if text.startswith("v1.") else ""
    if minor.isdigit() and minor.isascii() and (minor == "0" or not minor.startswith("0")):
        return int(minor), None
    return LATEST, 'must be "latest" or "v1.x"'


def policy_to_evaluate(labels: dict | None) -> tuple[dict, list]:
    """PolicyToEvaluate: each mode's (level, version) from the labels over the defaults
    (privileged:latest); a bad level is restricted for enforce and privileged (fail open) for
    audit and warn; the errors as field errors of metadata.labels[...]."""
    policy = {mode: ("privileged", LATEST) for mode in MODES}
    errors = []
    labels = labels or {}
    for mode in MODES:
        level, version = policy[mode]
        key = LABEL_PREFIX + mode
        if key in labels:
            value = labels[key]
            if value in LEVELS:
                level = value
            else:
                level = "restricted" if mode == "enforce" else "privileged"
                errors.append(field_invalid(f"metadata.labels[{key}]", value,
                                            "must be one of " + ", ".join(LEVELS)))
        key = LABEL_PREFIX + mode + "-version"
        if key in labels:
            version, err = parse_version(labels[key])
            if err:
                errors.append(field_invalid(f"metadata.labels[{key}]", labels[key], err))
        policy[mode] = (level, version)
    return policy, errors


def _compare_levels(a: str, b: str) -> int:
    return (LEVELS.index(a) > LEVELS.index(b)) - (LEVELS.index(a) < LEVELS.index(b))


# -- the checks (policy/check_*.go) -----------------------------------------------------------

def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _join_quote(items) -> str:
    """joinQuote: `"a", "b"`."""
    return ", ".join(go_quote(i) for i in items)


def _containers(spec: dict):
    """visitContainers: init containers, containers, then ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                yield c


def _sc(obj: dict) -> dict:
    return obj.get("securityContext") or {}


def _setters(pod_bad: bool, containers: list[str]) -> list[str]:
    setters = ["pod"] if pod_bad else []
    if containers:
        setters.append(f"{_plural('container', 'containers', len(containers))} {_join_quote(containers)}")
    return setters


def check_app_armor_profile(meta, spec, version):
    """check_appArmorProfile.go appArmorProfileV1Dot0: profile types other than RuntimeDefault and
    Localhost, and the beta annotations other than runtime/default, localhost/* or empty."""
    allowed = ("RuntimeDefault", "Localhost")
    bad_values, pod_bad = set(), False
    profile = _sc(spec).get("appArmorProfile")
    if profile is not None and profile.get("type") not in allowed:
        pod_bad = True
        bad_values.add(profile.get("type") or "")
    containers = []
    for c in _containers(spec):
        profile = _sc(c).get("appArmorProfile")
        if profile is not None and profile.get("type") not in allowed:
            containers.append(c.get("name", ""))
            bad_values.add(profile.get("type") or "")
    setters = _setters(pod_bad, containers)
    values = sorted(bad_values)
    annotations = sorted(f"{k}={go_quote(v)}" for k, v in (meta.get("annotations") or {}).items()
                         if k.startswith("container.apparmor.security.beta.kubernetes.io/")
                         and not (v == "" or v == "runtime/default" or v.startswith("localhost/")))
    if annotations:
        values += annotations
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return (_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(values)}")


def check_host_namespaces(meta, spec, version):
    """check_hostNamespaces.go hostNamespaces_1_0."""
    used = sorted(k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k))
    return ("host namespaces", ", ".join(used)) if used else None


def check_host_ports(meta, spec, version):
    """check_hostPorts.go hostPorts_1_0."""
    bad, ports = [], set()
    for c in _containers(spec):
        used = [p.get("hostPort") for p in c.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")]
        if used:
            bad.append(c.get("name", ""))
            ports.update(str(p) for p in used)
    if not bad:
        return None
    return ("hostPort", f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                        f"{_plural('uses', 'use', len(bad))} {_plural('hostPort', 'hostPorts', len(ports))} "
                        f"{', '.join(sorted(ports))}")


def check_host_probes_and_lifecycle(meta, spec, version):
    """check_hostProbesAndhostLifecycle.go hostProbesAndHostLifecycleV1Dot34 (policy v1.34 on)."""
    bad, hosts = set(), set()
    for c in _containers(spec):
        handlers = [c.get(p) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(c.get("lifecycle") or {}).get(h) for h in ("postStart", "preStop")]
        for handler in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = ((handler or {}).get(kind) or {}).get("host")
                if host:
                    bad.add(c.get("name", ""))
                    hosts.add(host)
    if not bad:
        return None
    return ("probe or lifecycle host",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(sorted(bad))} "
            f"{_plural('uses', 'use', len(bad))} "
            f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
            f"{_join_quote(sorted(hosts))}")


def check_privileged(meta, spec, version):
    """check_privileged.go privileged_1_0."""
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return ("privileged", f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                          "must not set securityContext.privileged=true")


def check_proc_mount(meta, spec, version):
    """check_procMount.go: a procMount other than Default."""
    bad, types = [], set()
    for c in _containers(spec):
        mount = _sc(c).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(c.get("name", ""))
            types.add(mount)
    if not bad:
        return None
    return ("procMount", f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                         f"must not set securityContext.procMount to {_join_quote(sorted(types))}")


def check_se_linux_options(meta, spec, version):
    """check_seLinuxOptions.go seLinuxOptions_1_0: a type other than container_t, container_init_t
    or container_kvm_t, or any user or role."""
    bad_types, state = set(), {"user": False, "role": False}

    def valid(opts: dict) -> bool:
        ok = True
        if (opts.get("type") or "") not in ("", "container_t", "container_init_t", "container_kvm_t"):
            ok = False
            bad_types.add(opts.get("type"))
        for key in ("user", "role"):
            if opts.get(key):
                ok = False
                state[key] = True
        return ok

    opts = _sc(spec).get("seLinuxOptions")
    pod_bad = opts is not None and not valid(opts)
    containers = [c.get("name", "") for c in _containers(spec)
                  if _sc(c).get("seLinuxOptions") is not None and not valid(_sc(c)["seLinuxOptions"])]
    setters = _setters(pod_bad, containers)
    if not setters:
        return None
    data = []
    if bad_types:      # upstream names user and role only next to a bad type
        data.append(f"{_plural('type', 'types', len(bad_types))} {_join_quote(sorted(bad_types))}")
        if state["user"]:
            data.append("user may not be set")
        if state["role"]:
            data.append("role may not be set")
    return ("seLinuxOptions",
            f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}")


# check_sysctls.go: the safe set of sysctls_1_0, and what sysctls_1_27, _1_29 and _1_32 add
SAFE_SYSCTLS = ((0, ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                     "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start")),
                (27, ("net.ipv4.ip_local_reserved_ports",)),
                (29, ("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                      "net.ipv4.tcp_keepalive_probes")),
                (32, ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")))


def check_sysctls(meta, spec, version):
    allowed = {name for since, names in SAFE_SYSCTLS if since <= version for name in names}
    bad = [s.get("name", "") for s in _sc(spec).get("sysctls") or [] if s.get("name") not in allowed]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


def check_windows_host_process(meta, spec, version):
    """check_windowsHostProcess.go windowsHostProcess_1_0."""
    containers = [c.get("name", "") for c in _containers(spec)
                  if (_sc(c).get("windowsOptions") or {}).get("hostProcess") is True]
    setters = _setters((_sc(spec).get("windowsOptions") or {}).get("hostProcess") is True, containers)
    if not setters:
        return None
    return ("hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true")


# check_capabilities_baseline.go capabilities_allowed_1_0
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def check_capabilities_baseline(meta, spec, version):
    bad, caps = [], set()
    for c in _containers(spec):
        added = [a for a in ((_sc(c).get("capabilities") or {}).get("add") or []) if a not in BASELINE_CAPABILITIES]
        if added:
            bad.append(c.get("name", ""))
            caps.update(added)
    if not bad:
        return None
    return ("non-default capabilities",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} must not include "
            f"{_join_quote(sorted(caps))} in securityContext.capabilities.add")


def check_host_path_volumes(meta, spec, version):
    """check_hostPathVolumes.go hostPathVolumes_1_0."""
    bad = [v.get("name", "") for v in spec.get("volumes") or []
           if isinstance(v, dict) and v.get("hostPath") is not None]
    if not bad:
        return None
    return ("hostPath volumes", f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)}")


def _seccomp(meta, spec, restricted: bool):
    """check_seccompProfile_baseline.go seccompProfileBaseline_1_19 and
    check_seccompProfile_restricted.go seccompProfileRestricted_1_19."""
    allowed = ("RuntimeDefault", "Localhost")
    bad_values, pod_bad, pod_set = set(), False, False
    profile = _sc(spec).get("seccompProfile")
    if profile is not None:
        if profile.get("type") not in allowed:
            pod_bad = True
            bad_values.add(profile.get("type") or "")
        else:
            pod_set = True
    explicit, implicit = [], []
    for c in _containers(spec):
        profile = _sc(c).get("seccompProfile")
        if profile is not None:
            if profile.get("type") not in allowed:
                explicit.append(c.get("name", ""))
                bad_values.add(profile.get("type") or "")
        elif not pod_set:
            implicit.append(c.get("name", ""))
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("seccompProfile", f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                                  f"{_join_quote(sorted(bad_values))}")
    if restricted and implicit:
        return ("seccompProfile", f"pod or {_plural('container', 'containers', len(implicit))} {_join_quote(implicit)} "
                                  'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


def check_seccomp_baseline(meta, spec, version):
    return _seccomp(meta, spec, restricted=False)


def check_allow_privilege_escalation(meta, spec, version):
    """check_allowPrivilegeEscalation.go allowPrivilegeEscalation_1_8."""
    bad = [c.get("name", "") for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return ("allowPrivilegeEscalation != false",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
            "must set securityContext.allowPrivilegeEscalation=false")


def check_capabilities_restricted(meta, spec, version):
    """check_capabilities_restricted.go capabilitiesRestricted_1_22."""
    missing, adding, caps = [], [], set()
    for c in _containers(spec):
        capabilities = _sc(c).get("capabilities")
        if capabilities is None:
            missing.append(c.get("name", ""))
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing.append(c.get("name", ""))
        added = [a for a in capabilities.get("add") or [] if a != "NET_BIND_SERVICE"]
        if added:
            adding.append(c.get("name", ""))
            caps.update(added)
    details = []
    if missing:
        details.append(f"{_plural('container', 'containers', len(missing))} {_join_quote(missing)} "
                       'must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_plural('container', 'containers', len(adding))} {_join_quote(adding)} must not include "
                       f"{_join_quote(sorted(caps))} in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


# check_restrictedVolumes.go: the allowed sources, and the names of the restricted ones
ALLOWED_VOLUME_SOURCES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                          "projected", "secret")
RESTRICTED_VOLUME_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
                             "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
                             "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
                             "scaleIO", "storageos")


def check_restricted_volumes(meta, spec, version):
    bad, types = [], set()
    for v in spec.get("volumes") or []:
        if not isinstance(v, dict) or any(v.get(k) is not None for k in ALLOWED_VOLUME_SOURCES):
            continue
        bad.append(v.get("name", ""))
        types.add(next((k for k in RESTRICTED_VOLUME_SOURCES if v.get(k) is not None), "unknown"))
    if not bad:
        return None
    return ("restricted volume types",
            f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)} {_plural('uses', 'use', len(bad))} "
            f"{_plural('restricted volume type', 'restricted volume types', len(types))} {_join_quote(sorted(types))}")


def check_run_as_non_root(meta, spec, version):
    """check_runAsNonRoot.go runAsNonRoot_1_0. A Pod with `hostUsers: false` is checked like any
    other: in v1.34.1 the relaxation of this check and of runAsUser for Pods in a user namespace
    (policy/helpers.go relaxPolicyForUserNamespacePod) applies only when kube-apiserver runs with
    the feature gate UserNamespacesPodSecurityStandards, alpha since 1.29 and off by default
    (pkg/features/kube_features.go), which labkit does not turn on. No other check of v1.34.1
    looks at hostUsers."""
    pod_value = _sc(spec).get("runAsNonRoot")
    explicit = [c.get("name", "") for c in _containers(spec) if _sc(c).get("runAsNonRoot") is False]
    setters = _setters(pod_value is False, explicit)
    if setters:
        return ("runAsNonRoot != true", f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")
    implicit = [c.get("name", "") for c in _containers(spec)
                if _sc(c).get("runAsNonRoot") is None and pod_value is not True]
    if implicit:
        return ("runAsNonRoot != true", f"pod or {_plural('container', 'containers', len(implicit))} "
                                        f"{_join_quote(implicit)} must set securityContext.runAsNonRoot=true")
    return None


def check_run_as_user(meta, spec, version):
    """check_runAsUser.go runAsUser_1_23 (hostUsers: false relaxes it only behind the alpha gate
    UserNamespacesPodSecurityStandards, off in v1.34.1: see check_run_as_non_root)."""
    containers = [c.get("name", "") for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    setters = _setters(_sc(spec).get("runAsUser") == 0, containers)
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def check_seccomp_restricted(meta, spec, version):
    return _seccomp(meta, spec, restricted=True)


# (check, the first policy version it belongs to), in Go's registration order within each list
BASELINE_CHECKS = ((check_app_armor_profile, 0), (check_host_namespaces, 0), (check_host_ports, 0),
                   (check_host_probes_and_lifecycle, 34), (check_privileged, 0), (check_proc_mount, 0),
                   (check_se_linux_options, 0), (check_sysctls, 0), (check_windows_host_process, 0))
OVERLAPPING_BASELINE_CHECKS = ((check_capabilities_baseline, 0), (check_host_path_volumes, 0),
                               (check_seccomp_baseline, 19))
RESTRICTED_CHECKS = ((check_allow_privilege_escalation, 8), (check_capabilities_restricted, 22),
                     (check_restricted_volumes, 0), (check_run_as_non_root, 0), (check_run_as_user, 23),
                     (check_seccomp_restricted, 19))


def evaluate(level: str, version, meta: dict, spec: dict) -> list[tuple[str, str]]:
    """checkRegistry.EvaluatePod with AggregateCheckResults: the (reason, detail) of each failed check."""
    if level == "privileged":
        return []
    minor = MAX_VERSION if version is LATEST or version > MAX_VERSION else version
    checks = BASELINE_CHECKS + (OVERLAPPING_BASELINE_CHECKS if level == "baseline" else RESTRICTED_CHECKS)
    results = []
    for check, since in checks:
        if since <= minor:
            result = check(meta, spec, minor)
            if result is not None:
                results.append(result)
    return results


def forbidden_detail(results) -> str:
    """AggregateCheckResult.ForbiddenDetail: `reason (detail), reason`."""
    return ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in results)


# -- the plugin ---------------------------------------------------------------------------------

def _significant_pod_update(new: dict, old: dict) -> bool:
    """isSignificantPodUpdate: containers added or removed, an image or a container's seccomp
    annotation changed, an ephemeral container added or changed."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    notes = (new.get("metadata") or {}).get("annotations") or {}
    old_notes = (old.get("metadata") or {}).get("annotations") or {}

    def changed(c: dict, oc: dict) -> bool:
        key = "container.seccomp.security.alpha.kubernetes.io/" + c.get("name", "")
        return c.get("image") != oc.get("image") or notes.get(key) != old_notes.get(key)

    for key in ("containers", "initContainers"):
        if len(spec.get(key) or []) != len(old_spec.get(key) or []):
            return True
        if any(changed(c, oc) for c, oc in zip(spec.get(key) or [], old_spec.get(key) or [])):
            return True
    old_ephemeral = {c.get("name"): c for c in old_spec.get("ephemeralContainers") or []}
    return any(c.get("name") not in old_ephemeral or changed(c, old_ephemeral[c.get("name")])
               for c in spec.get("ephemeralContainers") or [])


def _template(rt, obj: dict):
    """DefaultPodSpecExtractor.ExtractPodSpec: the Pod template of a controller."""
    if rt.resource == "podtemplates":
        template = obj.get("template")
    elif rt.resource == "cronjobs":
        template = (((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}).get("template")
    else:
        template = (obj.get("spec") or {}).get("template")
    if template is None:
        return None, None
    return template.get("metadata") or {}, template.get("spec") or {}


def prioritize_pods(pods: list[dict]) -> list[dict]:
    """admission.go prioritizePods: one Pod per controller first (in list order), the other Pods
    of controllers already represented after them (no runtime class is exempt by default)."""
    first, duplicates, seen = [], [], set()
    for pod in pods:
        owner = next((ref for ref in (pod.get("metadata") or {}).get("ownerReferences") or []
                      if isinstance(ref, dict) and ref.get("controller")), None)
        if owner is None:
            first.append(pod)
        elif owner.get("uid") in seen:
            duplicates.append(pod)
        else:
            seen.add(owner.get("uid"))
            first.append(pod)
    return first + duplicates


class PodSecurity:
    def __init__(self, store, clock=time.monotonic):
        self.store = store
        self.clock = clock          # seconds, for the check's deadline (a test passes a fake clock)

    def _namespace_labels(self, namespace: str) -> dict:
        ns = self.store.get("/namespaces", "", namespace) or {}
        return (ns.get("metadata") or {}).get("labels") or {}

    def validate(self, attrs: Attributes) -> None:
        rt = attrs.rt
        key = (rt.group, rt.resource)
        if attrs.operation not in ("CREATE", "UPDATE"):
            return
        if key == ("", "namespaces"):
            self._validate_namespace(attrs)
        elif key == ("", "pods"):
            if attrs.subresource in IGNORED_POD_SUBRESOURCES:
                return
            policy, errors = policy_to_evaluate(self._namespace_labels(attrs.namespace))
            if not errors and all(level == "privileged" for level, _ in policy.values()):
                return
            if attrs.operation == "UPDATE" and not _significant_pod_update(attrs.obj, attrs.old or {}):
                return
            self._evaluate(attrs, policy, errors, (attrs.obj.get("metadata") or {}), attrs.obj.get("spec") or {},
                           enforce=True)
        elif key in POD_CONTROLLERS and not attrs.subresource:
            policy, errors = policy_to_evaluate(self._namespace_labels(attrs.namespace))
            if not errors and policy["warn"][0] == "privileged" and policy["audit"][0] == "privileged":
                return
            meta, spec = _template(rt, attrs.obj)
            if spec is None:
                return
            self._evaluate(attrs, policy, errors, meta, spec, enforce=False)

    def _evaluate(self, attrs: Attributes, policy: dict, errors: list, meta: dict, spec: dict, enforce: bool) -> None:
        """Admission.EvaluatePod, with the plugin's audit annotations and warnings."""
        if errors:
            attrs.annotate(LABEL_PREFIX + "error",
                           "Failed to parse policy: " + ("[" + ", ".join(map(str, errors)) + "]" if len(errors) > 1
                                                         else str(errors[0])))
        cache = {}
        denial = None
        if enforce:
            attrs.annotate(LABEL_PREFIX + "enforce-policy", level_version(*policy["enforce"]))
            cache[policy["enforce"]] = evaluate(*policy["enforce"], meta, spec)
            if cache[policy["enforce"]]:
                denial = forbidden(attrs.rt.resource, attrs.rt.group, attrs.name,
                                   f"violates PodSecurity {go_quote(level_version(*policy['enforce']))}: "
                                   f"{forbidden_detail(cache[policy['enforce']])}")
        if policy["audit"] not in cache:
            cache[policy["audit"]] = evaluate(*policy["audit"], meta, spec)
        if cache[policy["audit"]]:
            attrs.annotate(LABEL_PREFIX + "audit-violations",
                           f"would violate PodSecurity {go_quote(level_version(*policy['audit']))}: "
                           f"{forbidden_detail(cache[policy['audit']])}")
        if denial is not None:
            raise denial
        warn = cache.get(policy["warn"])
        if warn is None:
            warn = evaluate(*policy["warn"], meta, spec)
        if warn:
            attrs.warnings.append(f"would violate PodSecurity {go_quote(level_version(*policy['warn']))}: "
                                  f"{forbidden_detail(warn)}")

    def _validate_namespace(self, attrs: Attributes) -> None:
        """Admission.ValidateNamespace."""
        if attrs.subresource:
            return
        labels = (attrs.obj.get("metadata") or {}).get("labels") or {}
        new_policy, new_errors = policy_to_evaluate(labels)
        name = attrs.name or (attrs.obj.get("metadata") or {}).get("name", "")
        refusal = invalid("Namespace", "", name, new_errors) if new_errors else None
        if attrs.operation == "CREATE":
            if refusal:
                raise refusal
            return
        old_policy, old_errors = policy_to_evaluate(((attrs.old or {}).get("metadata") or {}).get("labels") or {})
        if new_errors and (not old_errors or list(map(str, new_errors)) != list(map(str, old_errors))):
            raise refusal
        new, old = new_policy["enforce"], old_policy["enforce"]
        if new == old or new[0] == "privileged":
            return
        if new[1] == old[1] and _compare_levels(new[0], old[0]) < 1:
            return
        remaining = None if attrs.deadline is None else attrs.deadline - time.monotonic()
        attrs.warnings.extend(self.evaluate_pods_in_namespace(name, new, remaining))

    def evaluate_pods_in_namespace(self, namespace: str, enforce, remaining: float | None = None) -> list[str]:
        """Admission.EvaluatePodsInNamespace: the Pods that the new enforce level would refuse,
        grouped by their reasons (ForbiddenReason), each group named by its lexically first Pod.
        The Pods are prioritized (prioritize_pods), at most NAMESPACE_MAX_PODS_TO_CHECK of them
        are checked, and checking stops at the deadline (NAMESPACE_POD_CHECK_TIMEOUT after it
        began, or half of the `remaining` seconds of the request if that is sooner), tested
        after each Pod, so at least one is checked; when fewer than all were
        checked the answer says so first (`new PodSecurity enforce level only checked against
        the first N of M existing pods`)."""
        timeout = NAMESPACE_POD_CHECK_TIMEOUT
        if remaining is not None:
            timeout = min(timeout, remaining / 2)     # "don't take more than half the remaining time"
        deadline = self.clock() + timeout
        pods = prioritize_pods(self.store.list("/pods", namespace)[0])
        total = len(pods)
        pods = pods[:NAMESPACE_MAX_PODS_TO_CHECK]
        checked = len(pods)
        groups: dict[str, list[str]] = {}
        for i, pod in enumerate(pods):
            results = evaluate(*enforce, pod.get("metadata") or {}, pod.get("spec") or {})
            if results:
                groups.setdefault(", ".join(reason for reason, _ in results), []).append(pod["metadata"]["name"])
            if self.clock() >= deadline:        # ctx.Err(): the deadline passed
                checked = i + 1
                break
        warnings = []
        if checked < total:
            warnings.append(f"new PodSecurity enforce level only checked against the first {checked} of {total} "
                            "existing pods")
        if not groups:
            return warnings
        lines = []
        for reasons, names in groups.items():
            first, others = min(names), len(names) - 1
            prefix = first if others == 0 else (f"{first} (and 1 other pod)" if others == 1
                                                else f"{first} (and {others} other pods)")
            lines.append(f"{prefix}: {reasons}")
        return warnings + [f"existing pods in namespace {go_quote(namespace)} violate the new PodSecurity enforce "
                           f"level {go_quote(level_version(*enforce))}"] + sorted(lines)
