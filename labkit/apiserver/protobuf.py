"""Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`).

client-go's typed clients — kubectl's `create namespace|configmap|secret|deployment|service|
serviceaccount` among them — send protobuf bodies (and accept JSON answers). This decodes the
envelope (`k8s\\x00` + runtime.Unknown{typeMeta, raw}) and the messages of the kinds served here,
using the field numbers of k8s.io/api's generated.proto files, into the JSON form the registry
works with. gogo-protobuf writes zero values of non-pointer fields; they are dropped as Go's JSON
encoding (omitempty) drops them, while pointer fields (`replicas`, grace periods) keep zeros.

A field this decoder has no schema for makes it refuse the body (415) rather than lose data.
"""

from __future__ import annotations

import base64
import time

from labkit.apiserver.errors import ApiError, bad_request

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# field number -> (json name, type, pointer?) per message; types: string, bytes, int, bool, time,
# intorstr, quantity, msg:<Name>, rep:<type>, map:<value type> (string keys)
S, I, B = "string", "int", "bool"
SCHEMAS: dict[str, dict[int, tuple]] = {
    "Time": {1: ("seconds", I, False), 2: ("nanos", I, False)},
    "ObjectMeta": {1: ("name", S, False), 2: ("generateName", S, False), 3: ("namespace", S, False),
                   4: ("selfLink", S, False), 5: ("uid", S, False), 6: ("resourceVersion", S, False),
                   7: ("generation", I, False), 8: ("creationTimestamp", "time", False),
                   9: ("deletionTimestamp", "time", True), 10: ("deletionGracePeriodSeconds", I, True),
                   11: ("labels", "map:string", False), 12: ("annotations", "map:string", False),
                   13: ("ownerReferences", "rep:msg:OwnerReference", False), 14: ("finalizers", "rep:string", False),
                   17: ("managedFields", "rep:msg:Ignored", False)},
    "Ignored": {},
    "OwnerReference": {1: ("kind", S, False), 3: ("name", S, False), 4: ("uid", S, False),
                       5: ("apiVersion", S, False), 6: ("controller", B, True), 7: ("blockOwnerDeletion", B, True)},
    "LabelSelector": {1: ("matchLabels", "map:string", False),
                      2: ("matchExpressions", "rep:msg:LabelSelectorRequirement", False)},
    "LabelSelectorRequirement": {1: ("key", S, False), 2: ("operator", S, False), 3: ("values", "rep:string", False)},
    "DeleteOptions": {1: ("gracePeriodSeconds", I, True), 2: ("preconditions", "msg:Preconditions", True),
                      3: ("orphanDependents", B, True), 4: ("propagationPolicy", S, True), 5: ("dryRun", "rep:string", False)},
    "Preconditions": {1: ("uid", S, True), 2: ("resourceVersion", S, True)},
    # core/v1
    "Namespace": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:NamespaceSpec", False),
                  3: ("status", "msg:NamespaceStatus", False)},
    "NamespaceSpec": {1: ("finalizers", "rep:string", False)},
    "NamespaceStatus": {1: ("phase", S, False)},
    "ConfigMap": {1: ("metadata", "msg:ObjectMeta", False), 2: ("data", "map:string", False),
                  3: ("binaryData", "map:bytes", False), 4: ("immutable", B, True)},
    "Secret": {1: ("metadata", "msg:ObjectMeta", False), 2: ("data", "map:bytes", False), 3: ("type", S, False),
               4: ("stringData", "map:string", False), 5: ("immutable", B, True)},
    # authentication.k8s.io/v1 (kubectl create token)
    "TokenRequest": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:TokenRequestSpec", False),
                     3: ("status", "msg:TokenRequestStatus", False)},
    "TokenRequestSpec": {1: ("audiences", "rep:string", False), 4: ("expirationSeconds", I, True),
                         3: ("boundObjectRef", "msg:BoundObjectReference", True)},
    "BoundObjectReference": {1: ("kind", S, False), 2: ("apiVersion", S, False), 3: ("name", S, False),
                             4: ("uid", S, False)},
    "TokenRequestStatus": {1: ("token", S, False), 2: ("expirationTimestamp", "time", False)},
    # certificates.k8s.io/v1 (kubectl certificate approve|deny)
    "CertificateSigningRequest": {1: ("metadata", "msg:ObjectMeta", False),
                                  2: ("spec", "msg:CertificateSigningRequestSpec", False),
                                  3: ("status", "msg:CertificateSigningRequestStatus", False)},
    "CertificateSigningRequestSpec": {1: ("request", "bytes", False), 7: ("signerName", S, False),
                                      8: ("expirationSeconds", I, True), 5: ("usages", "rep:string", False),
                                      2: ("username", S, False), 3: ("uid", S, False), 4: ("groups", "rep:string", False),
                                      6: ("extra", "map:msg:ExtraValue", False)},
    "ExtraValue": {1: ("items", "rep:string", False)},
    "CertificateSigningRequestStatus": {1: ("conditions", "rep:msg:CertificateSigningRequestCondition", False),
                                        2: ("certificate", "bytes", False)},
    "CertificateSigningRequestCondition": {1: ("type", S, False), 6: ("status", S, False), 2: ("reason", S, False),
                                           3: ("message", S, False), 4: ("lastUpdateTime", "time", False),
                                           5: ("lastTransitionTime", "time", False)},
    "ServiceAccount": {1: ("metadata", "msg:ObjectMeta", False),
                       2: ("secrets", "rep:msg:ObjectReference", False),
                       3: ("imagePullSecrets", "rep:msg:LocalObjectReference", False),
                       4: ("automountServiceAccountToken", B, True)},
    "ObjectReference": {1: ("kind", S, False), 2: ("namespace", S, False), 3: ("name", S, False),
                        4: ("uid", S, False), 5: ("apiVersion", S, False), 6: ("resourceVersion", S, False),
                        7: ("fieldPath", S, False)},
    "LocalObjectReference": {1: ("name", S, False)},
    "Service": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:ServiceSpec", False),
                3: ("status", "msg:Ignored", False)},
    "ServiceSpec": {1: ("ports", "rep:msg:ServicePort", False), 2: ("selector", "map:string", False),
                    3: ("clusterIP", S, False), 4: ("type", S, False), 5: ("externalIPs", "rep:string", False),
                    7: ("sessionAffinity", S, False), 8: ("loadBalancerIP", S, False),
                    9: ("loadBalancerSourceRanges", "rep:string", False), 10: ("externalName", S, False),
                    11: ("externalTrafficPolicy", S, False), 12: ("healthCheckNodePort", I, False),
                    13: ("publishNotReadyAddresses", B, False), 17: ("ipFamilyPolicy", S, True),
                    18: ("clusterIPs", "rep:string", False), 19: ("ipFamilies", "rep:string", False),
                    20: ("allocateLoadBalancerNodePorts", B, True), 22: ("internalTrafficPolicy", S, True)},
    "ServicePort": {1: ("name", S, False), 2: ("protocol", S, False), 3: ("port", I, False),
                    4: ("targetPort", "intorstr", False), 5: ("nodePort", I, False), 6: ("appProtocol", S, True)},
    "Pod": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:PodSpec", False),
            3: ("status", "msg:Ignored", False)},
    "PodTemplateSpec": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:PodSpec", False)},
    "PodSpec": {1: ("volumes", "rep:msg:Volume", False), 2: ("containers", "rep:msg:Container", False),
                3: ("restartPolicy", S, False), 4: ("terminationGracePeriodSeconds", I, True),
                5: ("activeDeadlineSeconds", I, True), 6: ("dnsPolicy", S, False),
                7: ("nodeSelector", "map:string", False), 8: ("serviceAccountName", S, False),
                9: ("serviceAccount", S, False), 10: ("nodeName", S, False), 11: ("hostNetwork", B, False),
                12: ("hostPID", B, False), 13: ("hostIPC", B, False), 14: ("securityContext", "msg:Empty", True),
                15: ("imagePullSecrets", "rep:msg:LocalObjectReference", False), 16: ("hostname", S, False),
                17: ("subdomain", S, False), 19: ("schedulerName", S, False),
                20: ("initContainers", "rep:msg:Container", False), 21: ("automountServiceAccountToken", B, True),
                24: ("priorityClassName", S, False), 25: ("priority", I, True),
                30: ("enableServiceLinks", B, True)},
    "Volume": {1: ("name", S, False)},
    "Empty": {},
    "Container": {1: ("name", S, False), 2: ("image", S, False), 3: ("command", "rep:string", False),
                  4: ("args", "rep:string", False), 5: ("workingDir", S, False),
                  6: ("ports", "rep:msg:ContainerPort", False), 7: ("env", "rep:msg:EnvVar", False),
                  8: ("resources", "msg:ResourceRequirements", False), 13: ("terminationMessagePath", S, False),
                  14: ("imagePullPolicy", S, False), 15: ("securityContext", "msg:Empty", True),
                  16: ("stdin", B, False), 17: ("stdinOnce", B, False), 18: ("tty", B, False),
                  20: ("terminationMessagePolicy", S, False)},
    "ContainerPort": {1: ("name", S, False), 2: ("hostPort", I, False), 3: ("containerPort", I, False),
                      4: ("protocol", S, False), 5: ("hostIP", S, False)},
    "EnvVar": {1: ("name", S, False), 2: ("value", S, False)},
    "ResourceRequirements": {1: ("limits", "map:quantity", False), 2: ("requests", "map:quantity", False)},
    # apps/v1
    # policy/v1 (kubectl create poddisruptionbudget) and scheduling.k8s.io/v1 (kubectl create priorityclass)
    "PodDisruptionBudget": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:PodDisruptionBudgetSpec", False),
                            3: ("status", "msg:Ignored", False)},
    "PodDisruptionBudgetSpec": {1: ("minAvailable", "intorstr", True), 2: ("selector", "msg:LabelSelector", True),
                                3: ("maxUnavailable", "intorstr", True), 4: ("unhealthyPodEvictionPolicy", S, True)},
    "PriorityClass": {1: ("metadata", "msg:ObjectMeta", False), 2: ("value", I, False), 3: ("globalDefault", B, False),
                      4: ("description", S, False), 5: ("preemptionPolicy", S, True)},
    "Deployment": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:DeploymentSpec", False),
                   3: ("status", "msg:Ignored", False)},
    "DeploymentSpec": {1: ("replicas", I, True), 2: ("selector", "msg:LabelSelector", True),
                       3: ("template", "msg:PodTemplateSpec", False), 4: ("strategy", "msg:DeploymentStrategy", False),
                       5: ("minReadySeconds", I, False), 6: ("revisionHistoryLimit", I, True),
                       7: ("paused", B, False), 9: ("progressDeadlineSeconds", I, True)},
    "DeploymentStrategy": {1: ("type", S, False), 2: ("rollingUpdate", "msg:RollingUpdateDeployment", True)},
    "RollingUpdateDeployment": {1: ("maxUnavailable", "intorstr", True), 2: ("maxSurge", "intorstr", True)},
    "ReplicaSet": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:ReplicaSetSpec", False),
                   3: ("status", "msg:Ignored", False)},
    "ReplicaSetSpec": {1: ("replicas", I, True), 2: ("selector", "msg:LabelSelector", True),
                       3: ("template", "msg:PodTemplateSpec", False), 4: ("minReadySeconds", I, False)},
    "ReplicationController": {1: ("metadata", "msg:ObjectMeta", False),
                              2: ("spec", "msg:ReplicationControllerSpec", False), 3: ("status", "msg:Ignored", False)},
    "ReplicationControllerSpec": {1: ("replicas", I, True), 2: ("selector", "map:string", False),
                                  3: ("template", "msg:PodTemplateSpec", True), 4: ("minReadySeconds", I, False)},
    "Binding": {1: ("metadata", "msg:ObjectMeta", False), 2: ("target", "msg:ObjectReference", False)},
    # batch/v1 (kubectl create job|cronjob)
    "Job": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:JobSpec", False), 3: ("status", "msg:Ignored", False)},
    "JobSpec": {1: ("parallelism", I, True), 2: ("completions", I, True), 3: ("activeDeadlineSeconds", I, True),
                7: ("backoffLimit", I, True), 12: ("backoffLimitPerIndex", I, True), 13: ("maxFailedIndexes", I, True),
                4: ("selector", "msg:LabelSelector", True), 5: ("manualSelector", B, True),
                6: ("template", "msg:PodTemplateSpec", False), 8: ("ttlSecondsAfterFinished", I, True),
                9: ("completionMode", S, True), 10: ("suspend", B, True), 14: ("podReplacementPolicy", S, True),
                15: ("managedBy", S, True)},
    "JobTemplateSpec": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:JobSpec", False)},
    "CronJob": {1: ("metadata", "msg:ObjectMeta", False), 2: ("spec", "msg:CronJobSpec", False),
                3: ("status", "msg:Ignored", False)},
    "CronJobSpec": {1: ("schedule", S, False), 8: ("timeZone", S, True), 2: ("startingDeadlineSeconds", I, True),
                    3: ("concurrencyPolicy", S, False), 4: ("suspend", B, True),
                    5: ("jobTemplate", "msg:JobTemplateSpec", False), 6: ("successfulJobsHistoryLimit", I, True),
                    7: ("failedJobsHistoryLimit", I, True)},
    # rbac.authorization.k8s.io/v1 (kubectl create role|rolebinding|clusterrole|clusterrolebinding)
    "Role": {1: ("metadata", "msg:ObjectMeta", False), 2: ("rules", "rep:msg:PolicyRule", False)},
    "PolicyRule": {1: ("verbs", "rep:string", False), 2: ("apiGroups", "rep:string", False),
                   3: ("resources", "rep:string", False), 4: ("resourceNames", "rep:string", False),
                   5: ("nonResourceURLs", "rep:string", False)},
    "RoleBinding": {1: ("metadata", "msg:ObjectMeta", False), 2: ("subjects", "rep:msg:Subject", False),
                    3: ("roleRef", "msg:RoleRef", False)},
    "RoleRef": {1: ("apiGroup", S, False), 2: ("kind", S, False), 3: ("name", S, False)},
    "Subject": {1: ("kind", S, False), 2: ("apiGroup", S, False), 3: ("name", S, False), 4: ("namespace", S, False)},
    "ClusterRole": {1: ("metadata", "msg:ObjectMeta", False), 2: ("rules", "rep:msg:PolicyRule", False),
                    3: ("aggregationRule", "msg:AggregationRule", True)},
    "AggregationRule": {1: ("clusterRoleSelectors", "rep:msg:LabelSelector", False)},
    "ClusterRoleBinding": {1: ("metadata", "msg:ObjectMeta", False), 2: ("subjects", "rep:msg:Subject", False),
                           3: ("roleRef", "msg:RoleRef", False)},
    # autoscaling/v1 (kubectl autoscale)
    "HorizontalPodAutoscaler": {1: ("metadata", "msg:ObjectMeta", False),
                                2: ("spec", "msg:HorizontalPodAutoscalerSpec", False), 3: ("status", "msg:Ignored", False)},
    "HorizontalPodAutoscalerSpec": {1: ("scaleTargetRef", "msg:CrossVersionObjectReference", False),
                                    2: ("minReplicas", I, True), 3: ("maxReplicas", I, False),
                                    4: ("targetCPUUtilizationPercentage", I, True)},
    "CrossVersionObjectReference": {1: ("kind", S, False), 2: ("name", S, False), 3: ("apiVersion", S, False)},
    # authorization.k8s.io/v1, authentication.k8s.io/v1 (kubectl auth can-i, auth whoami)
    "SelfSubjectAccessReview": {1: ("metadata", "msg:ObjectMeta", False),
                                2: ("spec", "msg:SelfSubjectAccessReviewSpec", False), 3: ("status", "msg:Ignored", False)},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "msg:ResourceAttributes", True),
                                    2: ("nonResourceAttributes", "msg:NonResourceAttributes", True)},
    "ResourceAttributes": {1: ("namespace", S, False), 2: ("verb", S, False), 3: ("group", S, False),
                           4: ("version", S, False), 5: ("resource", S, False), 6: ("subresource", S, False),
                           7: ("name", S, False), 8: ("fieldSelector", "msg:FieldSelectorAttributes", True),
                           9: ("labelSelector", "msg:LabelSelectorAttributes", True)},
    "NonResourceAttributes": {1: ("path", S, False), 2: ("verb", S, False)},
    "FieldSelectorAttributes": {1: ("rawSelector", S, False), 2: ("requirements", "rep:msg:SelectorRequirement", False)},
    "LabelSelectorAttributes": {1: ("rawSelector", S, False), 2: ("requirements", "rep:msg:SelectorRequirement", False)},
    "SelectorRequirement": {1: ("key", S, False), 2: ("operator", S, False), 3: ("values", "rep:string", False)},
    "SelfSubjectRulesReview": {1: ("metadata", "msg:ObjectMeta", False),
                               2: ("spec", "msg:SelfSubjectRulesReviewSpec", False), 3: ("status", "msg:Ignored", False)},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", S, False)},
    "SelfSubjectReview": {1: ("metadata", "msg:ObjectMeta", False), 2: ("status", "msg:Ignored", False)},
}


class Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise bad_request("protobuf: truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise bad_request("protobuf: varint too long")

    def fields(self):
        while self.pos < len(self.data):
            key = self.varint()
            number, wire = key >> 3, key & 7
            if wire == 0:
                yield number, wire, self.varint()
            elif wire == 2:
                length = self.varint()
                if self.pos + length > len(self.data):
                    raise bad_request("protobuf: truncated field")
                yield number, wire, self.data[self.pos:self.pos + length]
                self.pos += length
            elif wire == 1:
                self.pos += 8
                yield number, wire, self.data[self.pos - 8:self.pos]
            elif wire == 5:
                self.pos += 4
                yield number, wire, self.data[self.pos - 4:self.pos]
            else:
                raise bad_request(f"protobuf: unsupported wire type {wire}")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, wire: int, value):
    if kind == S:
        return value.decode("utf-8") if wire == 2 else None
    if kind == "bytes":
        return base64.b64encode(value).decode() if wire == 2 else None
    if kind == I:
        return _signed(value) if wire == 0 else None
    if kind == B:
        return bool(value) if wire == 0 else None
    if kind == "time":
        t = decode_message("Time", value)
        if not t.get("seconds"):
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t["seconds"]))
    if kind == "intorstr":
        fields = {n: v for n, _, v in Reader(value).fields()}
        return fields.get(3, b"").decode() if fields.get(1) == 1 else _signed(fields.get(2, 0))
    if kind == "quantity":
        fields = {n: v for n, _, v in Reader(value).fields()}
        return fields.get(1, b"").decode()
    if kind.startswith("msg:"):
        return decode_message(kind[4:], value)
    raise bad_request(f"protobuf: unknown field type {kind}")


def _is_zero(value) -> bool:
    return value in (None, "", 0, False, [], {})


def decode_message(name: str, data: bytes) -> dict:
    schema = SCHEMAS[name]
    out: dict = {}
    for number, wire, value in Reader(data).fields():
        if name in ("Ignored",):
            continue
        field = schema.get(number)
        if field is None:
            if (wire == 0 and value == 0) or (wire == 2 and not value):
                continue        # a zero value gogo-protobuf writes for a field nobody set
            raise ApiError(415, "UnsupportedMediaType",
                           f"the protobuf body carries field {number} of {name}, which this server cannot decode; "
                           f"send the object as JSON or YAML instead (e.g. kubectl create -f)", {})
        json_name, kind, _ = field
        if kind.startswith("rep:"):
            out.setdefault(json_name, []).append(_scalar(kind[4:], wire, value))
        elif kind.startswith("map:"):
            entry = {n: v for n, _, v in Reader(value).fields()}
            key = entry.get(1, b"").decode("utf-8")
            raw = entry.get(2, b"")
            value_kind = kind[4:]
            decoded = _scalar(value_kind, 2, raw) if value_kind != "string" else raw.decode("utf-8")
            if value_kind == "msg:ExtraValue":      # a []string in JSON
                decoded = decoded.get("items", [])
            out.setdefault(json_name, {})[key] = decoded
        else:
            out[json_name] = _scalar(kind, wire, value)
    # drop what Go's omitempty would not have written; pointer fields keep their zero values
    pointers = {f[0] for f in schema.values() if f[2]}
    return {k: v for k, v in out.items() if k in pointers and v is not None or not _is_zero(v)}


def decode(body: bytes) -> dict:
    """A protobuf request body -> the object as JSON data (apiVersion and kind included)."""
    if not body.startswith(MAGIC):
        raise bad_request("protobuf: the body does not start with the Kubernetes protobuf envelope")
    envelope = {}
    for number, _, value in Reader(body[len(MAGIC):]).fields():
        envelope[number] = value
    type_meta = {n: v.decode() for n, _, v in Reader(envelope.get(1, b"")).fields()}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    if kind not in SCHEMAS:
        raise ApiError(415, "UnsupportedMediaType",
                       f"this server cannot decode {kind or 'objects'} sent as protobuf; send it as JSON or YAML", {})
    obj = {"apiVersion": api_version, "kind": kind}
    obj.update(decode_message(kind, envelope.get(2, b"")))
    return obj


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    """One field of wire type 2 (string, bytes or an embedded message)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def varint_field(number: int, value: int) -> bytes:
    """One field of wire type 0 (an integer or a bool)."""
    return varint(number << 3) + varint(value)
