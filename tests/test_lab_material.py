"""What a lab shows a student works, on the live lab, with this machine's kubectl:

- every command in its README, prompts, hints, answer descriptions and `labkit run` access text
  runs as shown (commands that change the lab run after the read-only ones, those that change the
  whole lab last, and the part they changed is reset after each but the last, after which the
  lab is cleaned up);
- every file it ships loads with the command that reads it;
- every picture a graph command draws renders to PNG (SVG for the numa diagrams) and can be
  read: no escape sequences left in its labels, no text running off the picture, and no side
  longer than READABLE pixels.

TEXTS says, for the commands that need it, what to run: placeholders filled in (`NAME` ->
a real Pod), the lab host it runs on, the exercise whose part it changes, what it answers, or
that it keeps running (`-w`, `-f`). A shown command without an entry runs exactly as shown; one
with a placeholder, or one that changes the lab, must have an entry; an entry whose command the
texts no longer show is an error. Commands that are only named in the prose (`kubectl edit`)
are MENTIONs: their --help must exist and know the options the text gives them.

Each lab runs once, in its own instance; the labs run at the same time.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import fresh_environment
from labkit.labs import discover, load_lab
from support import REPO, host_lock, labkit

# The labs are built in their own instances by the `material` fixture, which holds the shared host
# lock itself while they are up (LabRunner.run_all); the tests only read its outcomes.
pytestmark = pytest.mark.host_free

LABS = sorted(lab for lab, directory in discover().items() if directory.parent == REPO / "labs")
PROGRAMS = ("kubectl", "labkit", "iptables", "iptables-save", "cat", "grep", "findmnt", "mount", "umount", "jq")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_-]*[A-Z]\b|<[^>]+>|\.\.\.|…|\[|(?<=\w)\|(?=\w)|\{\{")
MUTATING = re.compile(r"^kubectl\b.*\b(delete|patch|apply|create|replace|edit|label|annotate|scale)\b|"
                      r"^labkit (run|reset|cleanup|solve)\b|^labkit (kube-proxy|mounts) (apply|delete)\b|"
                      r"^labkit numa (run|delete)\b|^labkit resources (apply|delete|evict|patch)\b|\b(mount|umount)\b.* -")
READABLE = 5000             # pixels: no side of a picture longer (a few screens at most)
STREAM_S = 2.0              # seconds a command that keeps running (-w, -f) must run without an error
TIMEOUT = 120


@dataclass
class Run:
    command: str | None = None      # what to run (placeholders filled in); None: as shown
    on: str | None = None           # a lab host: `labkit shell LAB HOST -- sh -c COMMAND`
    before: str | None = None       # run first, on this machine (e.g. the solution it presumes)
    changes: str | None = None      # the exercise whose part it changes ("*": the whole lab)
    code: int = 0                   # the exit code it must end with
    output: str | None = None       # text its output (stdout and stderr) must hold
    stream: bool = False            # keeps running: must still run after STREAM_S seconds


@dataclass
class Mention:
    """Only named in the prose: its --help exists and knows the options the text gives it."""


@dataclass
class Covered:
    """Run elsewhere, against what it needs (another cluster, a node of its own): the test that
    runs it, `tests/<file>.py::<function>`, or a test file and the file name it plays."""
    test: str

    def problem(self) -> str | None:
        path, _, name = self.test.partition("::")
        text = (REPO / path).read_text() if (REPO / path).exists() else ""
        wanted = name if "." in name else f"def {name}("
        return None if wanted in text else f"{self.test} does not exist"


def runs(*items: Run) -> list[Run]:
    return list(items)


# -- what the commands need, per lab ---------------------------------------------------------------

WEB_POD = "$(kubectl get pods -n shop -l app=web -o name | head -1 | cut -d/ -f2)"
STUCK_POD = "$(kubectl get pods -n shop -l app=reports -o jsonpath='{.items[?(@.metadata.finalizers)].metadata.name}')"
UNBLOCK = ("kubectl patch secret archive-key -n shop --type=json -p "
           """'[{"op":"replace","path":"/metadata/ownerReferences/0/blockOwnerDeletion","value":false}]'""")

# `labkit resources evict` ranks Pods shaped like eviction-order's once that exercise has an answer
# (labkit/resources/cli.py); any order of its six Pods will do
EVICTION_ANSWERED = ("mkdir -p $LABKIT_ANSWERS_DIR/resources && echo '{order: [crawler, analytics, logs, reports, "
                     "payments, checkout]}' > $LABKIT_ANSWERS_DIR/resources/eviction-order.yaml")

# `labkit numa run` runs a Guaranteed Pod once exercise qos has an answer (labkit.numa.withhold.qos_run_refusal)
QOS_ANSWERED = ("mkdir -p $LABKIT_ANSWERS_DIR/numa && echo '{qos: {web: Guaranteed, batch: BestEffort, cache: Guaranteed, "
                "api: Burstable, migrate: Burstable, scratch: BestEffort}}' > $LABKIT_ANSWERS_DIR/numa/qos.yaml && "
                "labkit check numa qos")

GUARANTEED_POD = ("printf '%s\\n' 'apiVersion: v1' 'kind: Pod' 'metadata: {name: pinned}' 'spec:' "
                  "'  containers: [{name: c, image: pause, command: [sleep, infinity], resources: "
                  "{limits: {cpu: 1, memory: 64Mi}, requests: {cpu: 1, memory: 64Mi}}}]' > pod.yaml")

ECHO_WEBHOOK = ("printf 'def review(r):\\n    return {\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": "
                "\"AdmissionReview\", \"response\": {\"uid\": r[\"request\"][\"uid\"], \"allowed\": True}}\\n' > hook.py")
REVIEW_WHOAMI = ("kubectl create --raw /apis/authentication.k8s.io/v1/selfsubjectreviews -f - <<< "
                 """'{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}'""")
REQUEST_TOKEN = ("kubectl create --raw /api/v1/namespaces/shop/serviceaccounts/reporter/token -f - <<< "
                 """'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}'""")
AUDIT_JQ = ("""jq -c 'select(.objectRef.resource=="configmaps" and .objectRef.name=="prices") | """
            """[.verb, .objectRef.namespace, .responseStatus.code]'""")

SLEEPY_SCHEDULER = "printf 'import time\\nwhile True:\\n    time.sleep(1)\\n' > sched.py"

TEXTS: dict[str, dict[str, Run | list[Run] | Mention | Covered]] = {
    "gc": {
        "kubectl get pods -n shop -w": Run(stream=True),
        "kubectl get pod NAME -n shop -o yaml": Run(f"kubectl get pod {WEB_POD} -n shop -o yaml"),
        "kubectl delete ... --cascade=background|foreground|orphan": runs(
            Run("kubectl delete deployment cart -n shop --cascade=background", changes="background-delete"),
            Run("kubectl delete deployment api -n shop --cascade=foreground", changes="foreground-delete"),
            Run("kubectl delete rs worker -n shop --cascade=orphan", changes="orphan-adopt")),
        "labkit gc log -f": Run(stream=True),
        "labkit reset gc": Run(),
        "labkit run gc --kubeconfig FILE [--context NAME]":
            Covered("tests/test_gc_lab.py::test_kubeconfig_mode_runs_the_lab_on_another_api_server"),
        "labkit reset gc EXERCISE": Run("labkit reset gc owner-chain"),
        "labkit cleanup gc": Run(changes="*"),
        "kubectl get pod NAME -n shop -o jsonpath='{.metadata.ownerReferences}'":
            Run(f"kubectl get pod {WEB_POD} -n shop -o jsonpath='{{.metadata.ownerReferences}}'"),
        "kubectl delete deployment cart -n shop": Run(changes="background-delete"),
        "kubectl delete deployment api -n shop --cascade=foreground": Run(changes="foreground-delete"),
        "kubectl delete rs worker -n shop --cascade=orphan": Run(changes="orphan-adopt"),
        "kubectl get rs worker -n shop -o yaml > rs.yaml": Run(),
        "kubectl apply -f rs.yaml": Run("kubectl get rs worker -n shop -o yaml > rs.yaml && kubectl apply -f rs.yaml",
                                        changes="orphan-adopt"),
        UNBLOCK: Run(changes="unblocking-dependent"),
        "kubectl delete cm archive -n shop --cascade=foreground": Run(before=UNBLOCK, changes="unblocking-dependent"),
        "kubectl patch pod NAME -n shop --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]'":
            Run(f"kubectl patch pod {STUCK_POD} -n shop --type=json "
                """-p '[{"op":"remove","path":"/metadata/finalizers/0"}]'""", changes="stuck-finalizer"),
    },
    "namespace": {
        "kubectl delete namespace X": Run("kubectl delete namespace sandbox", changes="own-finalizer"),
        "labkit ns explain NAME": Run("labkit ns explain attic"),
        "labkit apiserver --emulated-version 1.32": Run(stream=True),
        "labkit ns log [-f]": runs(Run("labkit ns log"), Run("labkit ns log -f", stream=True)),
        "labkit ns log -f": Run(stream=True),
        "labkit run namespace --kubeconfig FILE [--context NAME]":
            Covered("tests/test_namespace_real_cluster.py::test_the_lab_runs_on_a_cluster_through_its_kubeconfig"),
        "labkit cleanup namespace": Run(changes="*"),
        "labkit reset namespace EXERCISE": Run("labkit reset namespace own-finalizer"),
        "labkit ns explain NAME --kubeconfig ~/.kube/config": Run("labkit ns explain attic --kubeconfig $KUBECONFIG"),
        "labkit gc run -f SCENARIO.yaml --kubeconfig ~/.kube/config":
            Covered("tests/test_namespace_real_cluster.py::test_namespace_scenarios_replay_against_a_cluster"),
        "kubectl delete namespace billing --wait=false": Run(changes="conditions"),
        "kubectl create configmap late -n attic": Run(code=1, output="forbidden"),
        "kubectl -n reports patch backup nightly --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'":
            Run(changes="release-finalizer"),
        "kubectl -n kube-system delete service metrics-server": Run(changes="broken-apiservice"),
        "kubectl get ns legacy -o json | jq '.spec.finalizers=[]' | kubectl replace --raw "
        "/api/v1/namespaces/legacy/finalize -f -":
            Run(changes="force-finalize"),
        "kubectl edit": Mention(),
        "kubectl patch": Mention(),
        "kubectl replace --raw /api/v1/namespaces/sandbox/finalize -f FILE":
            Run("kubectl get ns sandbox -o json > ns.json && "
                "kubectl replace --raw /api/v1/namespaces/sandbox/finalize -f ns.json && labkit reset namespace own-finalizer --yes >/dev/null"),
    },
    "requests": {
        "labkit run requests": Run(),
        "labkit cleanup requests": Run(changes="*"),
        "labkit requests explain AUDIT_ID": Run("labkit requests explain $(jq -r .auditID $LAB_STATE/apiserver/audit.log "
                                                "| tail -1)"),
        "labkit requests webhook serve FILE": Run(f"{ECHO_WEBHOOK} && labkit requests webhook serve hook.py",
                                                  changes="mutating-webhook"),
        "labkit requests webhook stop NAME": Run("labkit requests webhook stop my-webhook",
                                                 before=f"{ECHO_WEBHOOK} && labkit requests webhook serve hook.py",
                                                 changes="mutating-webhook"),
        "labkit requests webhook certs NAME": Run("labkit requests webhook certs my-webhook"),
        "kubectl create token": Mention(),
        "kubectl auth whoami": Mention(),
        "kubectl create --raw": Mention(),
        "kubectl config set-credentials": Mention(),
        "kubectl config set users.NAME.client-certificate FILE": Mention(),
        "kubectl config set-credentials alice --client-certificate=alice.crt --client-key=alice.key "
        "--embed-certs --kubeconfig=FILE": Run(
            "openssl req -x509 -newkey rsa:2048 -nodes -keyout alice.key -out alice.crt -subj /CN=alice -days 1 "
            "2>/dev/null && kubectl config set-credentials alice --client-certificate=alice.crt "
            "--client-key=alice.key --embed-certs --kubeconfig=alice.kubeconfig", output="set"),
        "kubectl run --dry-run=server": Mention(),
        # alice's certificate is made by the reference solution, as hint 2 shows
        **{shown: Covered("tests/test_requests_lab.py::test_each_check_fails_on_a_fresh_lab_and_passes_after_its_solution")
           for shown in ("kubectl certificate approve NAME",
                         "kubectl get csr NAME -o jsonpath='{.status.certificate}' | base64 -d > alice.crt")},
        REVIEW_WHOAMI: Run(changes="alice", output='"username":"labkit-admin"'),
        "kubectl auth whoami --kubeconfig=FILE": Run("kubectl auth whoami --kubeconfig=$KUBECONFIG", changes="alice",
                                                     output="labkit-admin"),
        REQUEST_TOKEN: Run(changes="forbidden", output='"token":'),
        "kubectl create token reporter -n shop": Run(changes="forbidden"),
        # the job's identity is refused until exercise forbidden is solved
        "kubectl auth can-i list pods -n shop --as=system:serviceaccount:shop:reporter": Run(code=1, output="no"),
        "kubectl get pods -n shop --token=TOKEN": Run(
            f"kubectl get pods -n shop --token=$({REQUEST_TOKEN} | jq -r .status.token)", code=1, output="forbidden"),
        "labkit requests explain -- kubectl run x -n web --image=nginx:1.27": Run(changes="mutating-webhook"),
        # kubectl debug adds an ephemeral container to a running Pod (the API server's pods/ephemeralcontainers)
        "kubectl debug POD -n web --image=busybox": Run("kubectl run dbg -n web --image=nginx:1.27 && "
                                                        "kubectl debug dbg -n web --image=busybox",
                                                        changes="mutating-webhook", output="debugger-"),
        "kubectl -n policy scale deployment pod-policy --replicas=0": Run(changes="outage"),
        AUDIT_JQ + " AUDIT_LOG": Run(f"{AUDIT_JQ} $LAB_STATE/apiserver/audit.log", output='"delete"'),
    },
    "kube-proxy": {
        "labkit run": Mention(),        # named in the README: it loads br_netfilter
        "labkit kube-proxy apply": Mention(),
        "labkit shell kube-proxy HOST": Run("labkit shell kube-proxy node1 < /dev/null"),
        "iptables-save -t nat": Run(on="node1"),
        "iptables -t nat -L KUBE-SERVICES -n --line-numbers": Run(on="node1"),
        "labkit kube-proxy get services|endpointslices|pods|nodes [NAME] [-o yaml|json]": runs(
            Run("labkit kube-proxy get services"), Run("labkit kube-proxy get endpointslices"),
            Run("labkit kube-proxy get pods"), Run("labkit kube-proxy get nodes"),
            Run("labkit kube-proxy get services web -o yaml"), Run("labkit kube-proxy get pods web-1 -o json")),
        "labkit kube-proxy curl --from HOST --to SERVICE|IP:PORT [-n N] [--source IP]": runs(
            Run("labkit kube-proxy curl --from web-1 --to web"),
            Run("labkit kube-proxy curl --from client --to 192.168.50.11:30090 -n 5 --source 192.168.50.101")),
        "labkit kube-proxy graph --node NODE [--service NAME] [-o svg --output-file graph.svg]": runs(
            Run("labkit kube-proxy graph --node node1"),
            Run("labkit kube-proxy graph --node node2 --service web -o svg --output-file graph.svg")),
        "labkit kube-proxy graph --node NODE --service shop-local": Run("labkit kube-proxy graph --node node2 "
                                                                         "--service shop-local"),
        "labkit trace --node NODE --src IP --dst IP:PORT": Run("labkit trace --node node1 --src 10.244.1.2 --dst 10.96.0.10:80"),
        "labkit kube-proxy apply -f service.yaml": Run("labkit kube-proxy get services web -o yaml > service.yaml && "
                                                       "labkit kube-proxy apply -f service.yaml", changes="nodeport"),
        "kubectl replace": Mention(),
        "labkit kube-proxy get services NAME -o yaml": Run("labkit kube-proxy get services web -o yaml"),
        "labkit show kube-proxy EXERCISE": runs(Run("labkit show kube-proxy follow-the-chain"),
                                                Run("labkit show kube-proxy 3")),
        "labkit hint kube-proxy EXERCISE": Run("labkit hint kube-proxy follow-the-chain"),
        "labkit check kube-proxy [EXERCISE]": runs(Run("labkit check kube-proxy", code=1),
                                                   Run("labkit check kube-proxy follow-the-chain", code=1)),
        "labkit reset kube-proxy": Run(),
        "labkit kube-proxy get services|endpointslices|pods [-o yaml]": runs(
            Run("labkit kube-proxy get services -o yaml"), Run("labkit kube-proxy get endpointslices"),
            Run("labkit kube-proxy get pods")),
        "labkit kube-proxy curl --from HOST --to SERVICE|IP:PORT -n 20": runs(
            Run("labkit kube-proxy curl --from web-1 --to web -n 20"),
            Run("labkit kube-proxy curl --from client --to 192.168.50.12:30090 -n 20")),
        "labkit kube-proxy graph --node node1 [--service web]": runs(Run("labkit kube-proxy graph --node node1"),
                                                                      Run("labkit kube-proxy graph --node node1 --service web")),
        "labkit kube-proxy apply -f FILE": Run("labkit kube-proxy get services web -o yaml > service.yaml && "
                                               "labkit kube-proxy apply -f service.yaml", changes="nodeport"),
        "labkit kube-proxy apply -f": Mention(),
        "labkit kube-proxy curl --from client --to 192.168.50.12:30080 -n 20":
            Run(before="labkit solve kube-proxy nodeport", changes="nodeport"),
        "iptables-save -t nat | grep recent": Run(on="node1", before="labkit solve kube-proxy session-affinity",
                                                  changes="session-affinity"),
        "cat /proc/net/xt_recent/KUBE-SEP-…": Run(
            "cat /proc/net/xt_recent/$(ls /proc/net/xt_recent | grep KUBE-SEP | head -1)", on="node1",
            before="labkit solve kube-proxy session-affinity && "
                   "labkit kube-proxy curl --from client --to 192.168.50.11:30090 -n 2", changes="session-affinity"),
        "labkit kube-proxy curl --from client --to NODE-IP:NODE-PORT": Run(     # (shown after a prediction)
            "labkit kube-proxy curl --from client --to 192.168.50.11:30100",
            before="labkit solve kube-proxy traffic-policy", changes="traffic-policy"),
        "labkit shell kube-proxy node2": Run("labkit shell kube-proxy node2 < /dev/null"),
        "labkit shell kube-proxy client": Run("labkit shell kube-proxy client < /dev/null"),
        "labkit reset kube-proxy traffic-policy --forget-prediction": Run(changes="traffic-policy"),
        "iptables-save -t nat | grep catalog": Run(on="node2"),
        "iptables -t nat -R CHAIN N ...": Run(     # rule 1 of KUBE-SERVICES replaced by itself
            "eval iptables -t nat -R KUBE-SERVICES 1 $(iptables -t nat -S KUBE-SERVICES | sed -n 2p | cut -d' ' -f3-)",
            on="node2", changes="debug-ruleset"),
        "iptables -t nat -L CHAIN -n --line-numbers": Run("iptables -t nat -L KUBE-SERVICES -n --line-numbers", on="node2"),
    },
    "mount-propagation": {
        "labkit mounts exec node -- findmnt -o TARGET,PROPAGATION,OPT-FIELDS": Run(),     # (column names, no placeholder)
        "labkit mounts exec node -- findmnt -o TARGET,OPT-FIELDS -T /var/lib/kubelet/e2e": Run(),
        "labkit mounts exec slave -- sh": Run("labkit mounts exec slave -- sh < /dev/null"),
        "labkit mounts exec master -- mount -t tmpfs mine /mnt/test/mine": Run(
            before="labkit mounts exec master -- mkdir -p /mnt/test/mine", changes="*"),
        "labkit mounts apply -f FILE": Run("labkit mounts apply -f $LAB_STATE/pods/reader.yaml",
                                           output="unchanged"),
        "labkit mounts delete POD": Run("labkit mounts delete reader", changes="node-mounts-reach-reader"),
        # scenarios that show none of predict-e2e-matrix's answer (the others wait for the prediction)
        "labkit mounts play -f SCENARIO.yaml [-o json]": runs(
            Run("labkit mounts play -f $LAB_DIR/scenarios/slave-host-path.yaml"),
            Run("labkit mounts play -f $LAB_DIR/scenarios/slave-host-path.yaml -o json")),
        "labkit mounts play -f SCENARIO.yaml": Run("labkit mounts play -f $LAB_DIR/scenarios/private-host-path.yaml"),
        "mount --rbind <hostPath> <rootfs><mountPath>": Mention(),
        "labkit reset mount-propagation": Run(),
        "labkit shell mount-propagation slave": Run("labkit shell mount-propagation slave < /dev/null"),
        "labkit mounts play -f <lab dir>/scenarios/e2e.yaml": Run(     # shown once a prediction is written
            "labkit mounts play -f $LAB_DIR/scenarios/e2e.yaml", changes="predict-e2e-matrix", output="slave",
            before="mkdir -p $LABKIT_ANSWERS_DIR/mount-propagation && echo '{host: [], master: [], slave: [], private: [], default: []}' > "
                   "$LABKIT_ANSWERS_DIR/mount-propagation/predict-e2e-matrix.yaml"),
        "labkit run": Mention(),
        "labkit mounts delete reader": Run(changes="node-mounts-reach-reader"),
        "labkit mounts apply -f <lab dir>/pods/reader.yaml": Run("labkit mounts apply -f $LAB_STATE/pods/reader.yaml"),
        "labkit mounts apply -f": Mention(),
        "labkit mounts exec": Mention(),       # named in `labkit run`'s text, next to kubectl exec
        "kubectl exec": Mention(),
        "labkit mounts exec node -- sh": Run("labkit mounts exec node -- sh < /dev/null"),
        "labkit mounts apply -f <lab dir>/pods/logger.yaml": Run("labkit mounts apply -f $LAB_STATE/pods/logger.yaml"),
        "labkit mounts exec node -- umount /var/lib/kubelet/plugins/publisher/<name>": Run(
            "labkit mounts exec node -- umount /var/lib/kubelet/plugins/publisher/"
            "$(labkit mounts exec node -- ls /var/lib/kubelet/plugins/publisher | head -1)", changes="leaked-mount"),
    },
    "device-plugins": {
        "labkit devices try": Mention(),
        "labkit devices checkpoint": Covered("tests/test_devices_grpc.py::"
                                             "test_the_checkpoint_command_decodes_the_file_and_verifies_its_checksum"),
        "labkit reset device-plugins EXERCISE": Run("labkit reset device-plugins register", changes="register"),
        "labkit devices checkpoint -f FILE": Run("labkit devices checkpoint -f scenarios/kubelet_internal_checkpoint",
                                                 output="checksum"),
        # the checkpoint exercise's case is withheld until a prediction is written
        "labkit devices play -f CASE": Run("labkit devices play -f scenarios/restart.yaml", code=2,
                                           output="write your prediction"),
        "labkit devices play -f scenarios/restart.yaml": runs(
            Run(code=2, output="write your prediction"),
            Run(before="labkit solve device-plugins checkpoint", changes="checkpoint", output="PLAYED")),
    },
    "numa": {
        "labkit numa show --machine FILE_OR_FIXTURE": runs(Run("labkit numa show --machine lab-two-node"),
                                                          Run("labkit numa show --machine machine.json")),
        "labkit numa take": Mention(),
        "labkit numa merge -f hints.json": Run("labkit numa merge -f scenarios/merge-trainer.json"),
        "labkit numa run": Mention(),
        "labkit numa admit": Mention(),
        "labkit run numa": Run(),
        "labkit numa run -f pod.yaml": Run(f"{GUARANTEED_POD} && labkit numa run -f pod.yaml", changes="pin",
                                          before=QOS_ANSWERED),
        "labkit numa delete NAME": Run("labkit numa delete node-agent -n kube-system", changes="*"),
        "labkit numa admit --machine": Mention(),
        "labkit numa discover [--output F]": runs(Run("labkit numa discover"),
                                                  Run("labkit numa discover --output discovered.json")),
        "labkit numa show [--svg F]": runs(Run("labkit numa show"), Run("labkit numa show --svg live.svg")),
        "labkit numa show --machine M [-f pods.yaml --config C] [--svg F]": Run(
            "labkit numa show --machine lab-two-node -f scenarios/qos-pods.yaml --config scenarios/kubelet-config.yaml "
            "--svg two.svg"),
        "labkit numa admit -f pods.yaml --machine M --config kubelet.yaml [--state DIR [--running bound.yaml]] [-o json]": runs(
            Run("labkit numa admit -f scenarios/qos-pods.yaml --machine lab-two-node --config scenarios/kubelet-config.yaml"),
            Run("labkit numa admit -f scenarios/qos-pods.yaml --machine lab-two-node "
                "--config scenarios/kubelet-config.yaml --state $SCRATCH/admitted -o json")),
        "labkit numa merge -f hints.json [--policy P] [-o json]": runs(
            Run("labkit numa merge -f scenarios/merge-trainer.json -o json"),
            Run("labkit numa merge -f scenarios/merge-trainer.json --policy restricted")),
        "labkit numa take --machine M --available CPUS --count N [--hint NODES]": runs(
            Run("labkit numa take --machine lab-two-node --available 1-7 --count 2"),
            Run("labkit numa take --machine lab-two-node --available 1-7 --count 2 --hint 0")),
        "labkit numa take --hint": Mention(),
        "labkit numa take --machine dual-socket-ht --available CPUS --count N --hint NODES": Run(
            "labkit numa take --machine dual-socket-ht --available 2-15 --count 4 --hint 0"),
        "labkit numa show --machine M --config C -f pods.yaml": Run(
            "labkit numa show --machine lab-two-node --config scenarios/kubelet-config.yaml -f scenarios/qos-pods.yaml"),
        "labkit show numa EXERCISE": Run("labkit show numa qos"),
        "labkit numa admit -f scenarios/hints-running.yaml --machine lab-two-node --config "
        "scenarios/kubelet-config.yaml --state /tmp/hints": Run(
            "labkit numa admit -f scenarios/hints-running.yaml --machine lab-two-node "
            "--config scenarios/kubelet-config.yaml --state $SCRATCH/hints"),
        "labkit numa run -f FILE": Run(f"{GUARANTEED_POD} && labkit numa run -f pod.yaml", changes="pin",
                                       before=QOS_ANSWERED),
        "labkit numa admit -f node-b/probe-pod.yaml --machine node-b/machine.json --config node-b/kubelet-config.yaml "
        "--state node-b/kubelet --running node-b/pods.yaml": Run(code=2, output="checkpoint is corrupted"),    # the exercise's broken kubelet
        "grep Cpus_allowed_list /proc/PID/status": Run(
            "grep Cpus_allowed_list /proc/$(labkit numa show -o json | jq '.containers[0].pids[0]')/status"),
    },
    "resources": {
        # named as other labs' tools that follow the qos rule (README), not run from this lab
        "labkit numa admit": Mention(),
        "labkit numa run": Mention(),
        "labkit apiserver": Mention(),
        "labkit resources get [--node N] [-o json]": runs(Run("labkit resources get --node node-2"),
                                                         Run("labkit resources get -o json")),
        "labkit resources top [--node N] [--watch]": runs(Run("labkit resources top --node node-1"),
                                                          Run("labkit resources top --watch", stream=True)),
        "labkit resources apply -f FILE": Run("labkit resources apply -f scenarios/pressure.yaml",
                                              changes="eviction-order"),
        "labkit resources apply -f scenarios/pressure.yaml": Run(changes="eviction-order"),
        "labkit resources delete POD [--node N]": Run("labkit resources delete frontend --node node-1",
                                                      changes="throttled"),
        "labkit resources delete frontend": Run(changes="throttled"),
        # before an eviction-order answer, node-2's cron has the shape of that exercise's logs and is not ranked
        "labkit resources evict --node N": runs(Run("labkit resources evict --node node-2", code=2, output="withheld"),
                                                Run("labkit resources evict --node node-2", before=EVICTION_ANSWERED,
                                                    changes="noisy-neighbour")),
        "labkit resources evict --node node-3": Run(changes="eviction-order"),
        "labkit resources plan -f FILE": Run("labkit resources plan -f scenarios/node-1.yaml"),
        "labkit resources patch POD --subresource resize -p PATCH": Run(
            "labkit resources patch frontend --subresource resize "
            """-p '{"spec":{"containers":[{"name":"server","resources":{"requests":{"cpu":"60m"}}}]}}'""",
            changes="throttled", output="pod/frontend patched"),
        "kubectl patch pod POD --subresource resize -p PATCH": Mention(),
        "labkit resources convert": Mention(),
    },
    "scheduler": {
        "kubectl describe node NAME": Run("kubectl describe node node-a"),
        "kubectl describe pod NAME -n sched": Run("kubectl describe pod web -n sched"),
        "kubectl edit": Mention(),
        "kubectl edit deployment shop -n sched": Run("KUBE_EDITOR=true kubectl edit deployment shop -n sched",
                                                     changes="spread", output="Edit cancelled"),
        "kubectl delete -f batch.yaml -n sched": Run("kubectl delete -f $LAB_DIR/batch.yaml -n sched --ignore-not-found",
                                                     changes="binpack"),
        "kubectl create -f batch.yaml -n sched": Run("kubectl create -f $LAB_DIR/batch.yaml -n sched", changes="binpack",
                                                     output="pod/batch-1 created"),
        "kubectl patch": Mention(),
        "kubectl cordon": Mention(),
        "labkit scheduler serve": Mention(),
        "labkit scheduler serve FILE": Run(f"{SLEEPY_SCHEDULER} && labkit scheduler serve sched.py",
                                           changes="own-scheduler", output="my-scheduler: running"),
        "labkit scheduler stop": Run(before=f"{SLEEPY_SCHEDULER} && labkit scheduler serve sched.py",
                                     changes="own-scheduler", output="my-scheduler stopped"),
        "labkit cleanup scheduler": Run(changes="*"),
        "kubectl taint node node-f KEY=VALUE:EFFECT": Run("kubectl taint node node-f retiring=true:PreferNoSchedule",
                                                         changes="taint-effects"),
        "labkit scheduler explain": Mention(),
        "labkit scheduler explain -f": Mention(),
        # a live Pod's last decision, from the record the scheduler kept
        "labkit scheduler explain POD -n sched": Run("labkit scheduler explain web -n sched",
                                                     output="Unschedulable: 0/13 nodes are available"),
        "kubectl get pods -n sched -l app=drain -o custom-columns=NAME:.metadata.name,TOLERATIONS:.spec.tolerations":
            Run(output="wrong-effect"),
        # the prediction cases are withheld until a prediction is written
        "labkit scheduler explain -f CASE.yaml": runs(
            Run("labkit scheduler explain -f $LAB_DIR/scenarios/preempt.yaml", code=1, output="write your prediction"),
            Run("labkit scheduler explain -f $LAB_DIR/scenarios/score.yaml", before="labkit solve scheduler score-predict",
                changes="score-predict", output="Bound to node-1")),
        "labkit scheduler play": Mention(),
        "labkit reset scheduler EXERCISE --forget-prediction": Run("labkit reset scheduler noexecute --forget-prediction",
                                                                   changes="noexecute"),
        "kubectl get pods -n sched -l app=drain -w": Run(stream=True),
        "labkit scheduler play -f CASE.yaml": Run("labkit scheduler play -f $LAB_DIR/scenarios/preempt.yaml", code=1,
                                                  output="write your prediction"),
    },
}

def _every_lab(lab) -> dict:
    """What `labkit run LAB` prints for every lab below its exercises."""
    first = lab.exercises[0].id
    return {f"labkit show {lab.id} EXERCISE": runs(Run(f"labkit show {lab.id} {first}"), Run(f"labkit show {lab.id} 1")),
            f"labkit check {lab.id}": Run(code=1),
            f"labkit hint {lab.id} EXERCISE": Run(f"labkit hint {lab.id} {first}")}


# Files a lab ships (besides lab.yaml, README.md and its Python) and the command that reads each
# ({path}: the file; run from the lab's working directory, like the texts' commands).
FILES: dict[str, str | Run | Covered] = {
    "labs/gc/scenarios/predict.yaml": "labkit gc run -f {path}",
    # the prediction cases are withheld until a prediction is written
    **{f"labs/scheduler/scenarios/{name}.yaml": Run("labkit scheduler explain -f {path}", code=1,
                                                    output="write your prediction") for name in ("score", "preempt")},
    "labs/kube-proxy/scenarios/cluster.yaml": "labkit kube-proxy render -f {path} --hostname node1",
    "labs/scheduler/batch.yaml": Run("kubectl create --dry-run=client -o name -f {path}", output="pod/batch-1"),
    "labs/device-plugins/scenarios/restart.yaml": Run("labkit devices play -f {path}", code=2,
                                                      output="write your prediction"),
    # refused, as exercise csi-plugin-publishes has it, with the API server's reason
    "labs/mount-propagation/pods/csi-node.yaml": Run("labkit mounts apply -f {path}", code=1,
                                                     output="Bidirectional mount propagation is available only to "
                                                            "privileged containers"),
    "labs/mount-propagation/pods/e2e.yaml": "labkit mounts apply -f {path}",
    "labs/mount-propagation/pods/logger.yaml": "labkit mounts apply -f {path}",
    # (applying it again restarts the container whose death exercise leaked-mount is about)
    "labs/mount-propagation/pods/publisher.yaml": Run("labkit mounts apply -f {path}", changes="leaked-mount"),
    "labs/mount-propagation/pods/reader.yaml": "labkit mounts apply -f {path}",
    "labs/mount-propagation/pods/watcher.yaml": "labkit mounts apply -f {path}",
    **{f"labs/mount-propagation/scenarios/{name}.yaml": Covered(f"tests/test_mounts_scenarios.py::{name}.yaml")
       for name in ("busy-mount", "e2e", "exiting-container", "late-containers", "private-host-path",
                    "slave-host-path", "unmounting", "unprivileged-mount")},
    "labs/resources/nodes.yaml": Run("labkit resources nodes"),       # read by `labkit run resources`
    **{f"labs/resources/scenarios/{name}.yaml": "labkit resources plan -f {path}" for name in ("node-1", "node-2")},
    # its Pods name PriorityClasses, which only the lab's nodes know (`plan` refuses them)
    "labs/resources/scenarios/pressure.yaml": Run("labkit resources apply -f {path}", changes="eviction-order"),
    "labs/numa/scenarios/hints-pod.yaml": "labkit numa admit -f {path} --machine lab-two-node --config scenarios/kubelet-config.yaml",
    "labs/numa/scenarios/hints-running.yaml": "labkit numa admit -f {path} --machine lab-two-node --config scenarios/kubelet-config.yaml",
    "labs/numa/scenarios/kubelet-config.yaml": "labkit numa admit -f scenarios/qos-pods.yaml --machine lab-two-node --config {path}",
    "labs/numa/scenarios/kubelet-memory.yaml": "labkit numa admit -f scenarios/memory-pods.yaml --machine lab-two-node --config {path}",
    "labs/numa/scenarios/kubelet-static.yaml": "labkit numa admit -f scenarios/static-pods.yaml --machine dual-socket-ht --config {path}",
    "labs/numa/scenarios/memory-pods.yaml": "labkit numa admit -f {path} --machine lab-two-node --config scenarios/kubelet-memory.yaml",
    "labs/numa/scenarios/merge-feeder.json": "labkit numa merge -f {path}",
    "labs/numa/scenarios/merge-trainer.json": "labkit numa merge -f {path}",
    "labs/numa/scenarios/node-agent.yaml": "labkit numa admit -f {path} --machine machine.json --config kubelet-config.yaml",
    "labs/numa/scenarios/node-b-pods.yaml": "labkit numa admit -f {path} --machine node-b/machine.json --config node-b/kubelet-config.yaml",
    "labs/numa/scenarios/node-b-probe.yaml": "labkit numa admit -f {path} --machine node-b/machine.json --config node-b/kubelet-config.yaml",
    "labs/numa/scenarios/qos-pods.yaml": "labkit numa admit -f {path} --machine lab-two-node --config scenarios/kubelet-config.yaml",
    "labs/numa/scenarios/static-pods.yaml": "labkit numa admit -f {path} --machine dual-socket-ht --config scenarios/kubelet-static.yaml",
}

# The pictures each lab's graph commands draw of the lab's own state ({out}: the file to write).
PICTURES: dict[str, list[str]] = {
    "gc": ["labkit gc graph -n shop -o png --output-file {out}.png", "labkit gc graph -n shop -o svg --output-file {out}.svg"],
    "kube-proxy": [f"labkit kube-proxy graph --node {node} {service}-o {fmt} --output-file {{out}}.{fmt}"
                   for node in ("node1", "node2")
                   for service in ("", "--service web ") for fmt in ("png", "svg")],
    "mount-propagation": ["labkit mounts graph -o png --output-file {out}.png", "labkit mounts graph -o svg --output-file {out}.svg"],
    "numa": ["labkit numa show --svg {out}.svg", "labkit numa show --machine lab-two-node --svg {out}.svg",
             "labkit numa show --machine dual-socket-ht -f scenarios/static-pods.yaml "
             "--config scenarios/kubelet-static.yaml --svg {out}.svg"],
}


# -- what the texts show ------------------------------------------------------------------------

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INDENTED = re.compile(r"(?:(?<=\n\n)|^)((?:    \S[^\n]*(?:\n|$))+)")
SPAN = re.compile(r"`([^`\n]+)`")


def _candidates(text: str) -> list[str]:
    """Code in a Markdown text: lines of fenced and indented blocks (comments dropped; `a / b`
    is two commands) and inline code spans."""
    rest = FENCE.sub("", text)
    lines = [line for block in FENCE.findall(text) for line in block.splitlines()]
    lines += [line[4:] for block in INDENTED.findall(rest) for line in block.splitlines()]
    found = []
    for line in lines:
        line = re.split(r"\s{2,}#", line)[0].strip()
        found += [part.strip() for part in line.split(" / ")]
    return found + SPAN.findall(rest)


def shown_commands(lab, instructions: str) -> dict[str, str]:
    """Each command the lab's texts show -> where it is first shown. `instructions`: what
    `labkit run LAB` prints (the README, the exercises, how to get in)."""
    texts = [("labkit run", instructions)]
    for ex in lab.exercises:
        texts.append((f"{ex.id} prompt", ex.prompt))
        texts += [(f"{ex.id} hint {i}", hint) for i, hint in enumerate(ex.hints, start=1)]
        texts += [(f"{ex.id} answer", ex.answer)] if ex.answer else []
    found: dict[str, str] = {}
    for where, text in texts:
        for code in _candidates(text):
            words = code.split()
            if len(words) >= 2 and words[0] in PROGRAMS:
                found.setdefault(code, where)
    return found


# -- running a lab's material -------------------------------------------------------------------

@dataclass
class Outcome:
    lab: str
    shown: str                      # the command as the text shows it (or the file, or the picture)
    where: str
    ran: str = ""                   # what ran
    code: int | None = None
    output: str = ""
    problem: str | None = None      # why it does not count as working (None: it works)
    seconds: float = 0.0


class LabRunner:
    def __init__(self, lab_id: str, base: Path):
        self.lab = load_lab(discover()[lab_id])
        self.env = {**os.environ, **fresh_environment(base), "HOME": str(base)}
        self.env.pop("LABKIT_LABS_PATH")
        self.env["PATH"] = f"{Path(sys.executable).parent}:{self.env['PATH']}"
        state = Path(self.env["LABKIT_STATE_DIR"]) / lab_id
        self.scratch = base / "scratch"
        self.scratch.mkdir()
        self.env.update(KUBECONFIG=str(state / "apiserver" / "kubeconfig"), LAB_STATE=str(state),
                        LAB_DIR=str(self.lab.directory), SCRATCH=str(self.scratch))
        # numa's and resources' texts are relative to the lab's state directory (their access texts say so)
        self.cwd = state if lab_id in ("numa", "resources", "device-plugins") else self.scratch
        self.outcomes: list[Outcome] = []

    def labkit(self, *args, check=0):
        return labkit(*args, env=self.env, check=check, timeout=300)

    def shell(self, command: str, on: str | None = None, stream: bool = False, timeout: float = TIMEOUT):
        argv = ["bash", "-o", "pipefail", "-c", command]
        if on:
            argv = [sys.executable, "-m", "labkit", "shell", self.lab.id, on, "--", "bash", "-o", "pipefail", "-c", command]
        proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=STREAM_S if stream else timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return None, out        # still running

    def reset(self, changes: str) -> None:
        self.labkit("reset", self.lab.id, *([] if changes == "*" else [changes]), "--yes")

    def run_all(self) -> list[Outcome]:
        with host_lock(False):
            instructions = self.labkit("run", self.lab.id).stdout
            try:
                commands = shown_commands(self.lab, instructions)
                table = {**_every_lab(self.lab), **TEXTS.get(self.lab.id, {})}
                for stale in sorted(set(table) - set(commands)):
                    self.outcomes.append(Outcome(self.lab.id, stale, "TEXTS", problem="TEXTS has an entry for a "
                                                 "command the lab's texts no longer show: remove it"))
                planned = [(shown, where, spec) for shown, where in commands.items()
                           for spec in self._specs(shown, table.get(shown))] + self._file_specs()
                self._pictures()        # of the fresh lab, before anything changes it
                done: dict[tuple, Outcome] = {}      # a command shown in several places runs once
                # the read-only commands first, then those that change an exercise's part, then those
                # that change the whole lab; the last one's part is not reset: the lab is cleaned up next
                planned.sort(key=lambda p: (isinstance(p[2], Run) and bool(p[2].changes),
                                            isinstance(p[2], Run) and p[2].changes == "*"))
                for n, (shown, where, spec) in enumerate(planned):
                    key = (spec.command or shown, spec.on, spec.before, spec.stream) if isinstance(spec, Run) else None
                    if key in done:
                        self.outcomes.append(Outcome(self.lab.id, shown, where, done[key].ran, done[key].code,
                                                     done[key].output, done[key].problem))
                        continue
                    started = time.monotonic()
                    self.outcomes.append(self._run(shown, where, spec, reset=n < len(planned) - 1))
                    self.outcomes[-1].seconds = time.monotonic() - started
                    if key is not None:
                        done[key] = self.outcomes[-1]
            finally:
                self.labkit("cleanup", self.lab.id)
        return self.outcomes

    @staticmethod
    def _specs(shown: str, entry) -> list:
        if entry is None:
            if PLACEHOLDER.search(shown):
                return [f"has a placeholder: TEXTS needs the command to run for {shown!r}"]
            if MUTATING.search(shown):
                return [f"changes the lab: TEXTS needs the exercise whose part {shown!r} changes"]
            return [Run()]
        return entry if isinstance(entry, list) else [entry]

    def _run(self, shown: str, where: str, spec, reset: bool = True) -> Outcome:
        out = Outcome(self.lab.id, shown, where)
        if isinstance(spec, str):
            out.problem = spec
            return out
        if isinstance(spec, Covered):
            out.ran = f"(covered by {spec.test})"
            out.problem = spec.problem()
            return out
        if isinstance(spec, Mention):
            words = shown.split()
            command = [w for w in words[:next((i for i, w in enumerate(words) if not re.fullmatch(r"[a-z][a-z-]*", w)),
                                             len(words))]]
            options = [w for w in words if w.startswith("-")]
            out.ran = " ".join(command) + " --help"
            out.code, out.output = self.shell(out.ran)
            missing = [o for o in options if o not in out.output]
            if out.code != 0 or missing:
                out.problem = f"`{out.ran}` exited {out.code}" + (f"; it does not know {missing}" if missing else "")
            return out
        command = spec.command or shown
        out.ran = command + (f"  (on {spec.on})" if spec.on else "")
        try:
            code, text = self.shell(spec.before) if spec.before else (0, "")
            if code != 0:
                out.problem = f"its preparation `{spec.before}` exited {code}:\n{text[-1500:]}"
                return out
            out.code, out.output = self.shell(command, on=spec.on, stream=spec.stream)
            out.problem = self._judge(spec, out)
        finally:
            if spec.changes and reset:
                try:
                    self.reset(spec.changes)
                except AssertionError as exc:
                    out.problem = (out.problem or "") + f"\nresetting {spec.changes} afterwards failed: {exc}"
        return out

    @staticmethod
    def _judge(spec: Run, out: Outcome) -> str | None:
        if spec.stream:
            if out.code is None:
                return None
            why = f"stopped (exit {out.code}) instead of running on"
        elif out.code is None:
            why = f"did not finish within {TIMEOUT} s"
        elif out.code != spec.code:
            why = f"exited {out.code}, not {spec.code}"
        elif spec.output is not None and spec.output not in out.output:
            why = f"its output lacks {spec.output!r}"
        else:
            return None
        return f"{why}:\n{out.output[-2000:]}"

    def _file_specs(self) -> list[tuple[str, str, Run | Covered]]:
        planned = []
        for path, reader in FILES.items():
            if path.startswith(f"labs/{self.lab.id}/"):
                spec = Run(reader) if isinstance(reader, str) else reader
                if isinstance(spec, Run):
                    spec = Run(**{**spec.__dict__, "command": spec.command.format(path=REPO / path)})
                planned.append((path, "shipped file", spec))
        return planned

    def _pictures(self) -> None:
        for template in PICTURES.get(self.lab.id, []):
            target = self.scratch / f"picture-{len(self.outcomes)}"
            command = template.format(out=target)
            out = Outcome(self.lab.id, template, "picture", ran=command)
            out.code, out.output = self.shell(command)
            written = next(iter(sorted(self.scratch.glob(f"{target.name}.*"))), None)
            if out.code != 0 or written is None:
                out.problem = f"`{command}` exited {out.code}:\n{out.output[-2000:]}"
            else:
                out.problem = picture_problem(written)
            self.outcomes.append(out)


# -- reading pictures ---------------------------------------------------------------------------

ESCAPES = re.compile(r"\\[nlrt\\\"]")


def picture_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return struct.unpack(">II", data[16:24])
    root = ET.fromstring(data)
    return tuple(round(float(re.sub(r"[a-z]+$", "", root.get(k)))) for k in ("width", "height"))


def picture_problem(path: Path) -> str | None:
    """Why a picture cannot be read: not a picture, too large, escape sequences or text outside."""
    data = path.read_bytes()
    if path.suffix == ".png":
        if not data.startswith(b"\x89PNG\r\n\x1a\n"):
            return f"{path.name} is not a PNG"
        width, height = picture_size(path)
        return f"{width}x{height} pixels: larger than {READABLE}" if max(width, height) > READABLE else None
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        return f"{path.name} is not SVG: {exc}"
    width, height = picture_size(path)
    if max(width, height) > READABLE:
        return f"{width}x{height}: larger than {READABLE}"
    # text positions are checked where they are absolute (Graphviz moves its whole drawing with a
    # transform, and sizes every box to its label itself)
    absolute = not any("transform" in g.attrib for g in root.iter("{http://www.w3.org/2000/svg}g"))
    problems = []
    for node in root.iter():
        if not node.tag.endswith("text") or not (node.text or "").strip():
            continue
        text = node.text
        if ESCAPES.search(text):
            problems.append(f"a label shows an escape sequence: {text!r}")
        if not absolute:
            continue
        # DejaVu Sans / Helvetica: about 0.6 em per character (bold a little more)
        size = float(node.get("font-size", "12").rstrip("px"))
        extent = len(text) * size * (0.65 if node.get("font-weight") == "bold" else 0.6)
        x = float(node.get("x", "0"))
        left, right = {"middle": (x - extent / 2, x + extent / 2), "end": (x - extent, x)}.get(
            node.get("text-anchor", "start"), (x, x + extent))
        if left < -1 or right > width + 1:
            problems.append(f"text runs off the {width}-pixel picture: {text!r}")
    return "; ".join(problems) or None


# -- the tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def material(request, tmp_path_factory):
    """The outcomes of every lab the selected tests need; the labs run at the same time."""
    wanted = sorted({item.callspec.params["lab_id"] for item in request.session.items
                     if item.module is request.module and hasattr(item, "callspec")})
    bases = {lab_id: tmp_path_factory.mktemp(f"material-{lab_id}") for lab_id in wanted}
    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        return dict(zip(wanted, pool.map(lambda lab_id: LabRunner(lab_id, bases[lab_id]).run_all(), wanted)))


def _report(outcomes: list[Outcome]) -> str:
    return "\n\n".join(f"{o.shown}  [{o.where}]" + (f"\n  ran: {o.ran}" if o.ran and o.ran != o.shown else "")
                       + f"\n  {o.problem}" for o in outcomes if o.problem)


@pytest.mark.parametrize("lab_id", LABS)
def test_every_command_a_lab_shows_works(material, lab_id):
    shown = [o for o in material[lab_id] if o.where not in ("shipped file", "picture")]
    assert shown, f"no commands found in the texts of {lab_id}"
    assert not [o for o in shown if o.problem], _report(shown)


@pytest.mark.parametrize("lab_id", LABS)
def test_every_file_a_lab_ships_loads_with_its_command(material, lab_id):
    shipped = {str(p.relative_to(REPO)) for p in (REPO / "labs" / lab_id).rglob("*")
               if p.is_file() and p.suffix != ".py" and p.name not in ("lab.yaml", "README.md")
               and "__pycache__" not in p.parts}
    assert shipped <= set(FILES), f"files with no reader in FILES: {sorted(shipped - set(FILES))}"
    files = [o for o in material[lab_id] if o.where == "shipped file"]
    assert not [o for o in files if o.problem], _report(files)


@pytest.mark.parametrize("lab_id", LABS)
def test_every_picture_a_lab_draws_can_be_read(material, lab_id):
    pictures = [o for o in material[lab_id] if o.where == "picture"]
    assert bool(pictures) == bool(PICTURES.get(lab_id)), lab_id
    assert not [o for o in pictures if o.problem], _report(pictures)


def test_the_gc_graph_has_no_escape_sequences_and_a_readable_shape(tmp_path):
    """What the gc graph's labels and layout look like (the literal `\\n` of its DOT labels made
    one 4232x277 row of unreadable boxes)."""
    from labkit.gc.graph import Node, render_dot
    from labkit import graphviz
    nodes = {"u1": Node("u1", "v1", "ConfigMap", 'a"b\\c', "ns", finalizers=["example.com/x"]),
             "u2": Node("u2", "v1", "Secret", "s", "ns", owners=[{"uid": "u1", "name": 'a"b\\c'}])}
    nodes["u1"].dependents.append(("u2", {"uid": "u1", "controller": True}))
    svg = tmp_path / "g.svg"
    svg.write_bytes(graphviz.render(render_dot(nodes), "svg"))
    texts = [t.text for t in ET.fromstring(svg.read_bytes()).iter() if t.tag.endswith("text")]
    assert 'ConfigMap ns/a"b\\c' in texts and "finalizers: example.com/x" in texts and "uid u1" in texts, texts
    assert picture_problem(svg) is None
    # and the check itself sees what was wrong
    broken = tmp_path / "broken.svg"
    broken.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="20">'
                      '<text x="5" y="15" font-size="10">ConfigMap a\\nuid 1234</text></svg>')
    assert "escape sequence" in picture_problem(broken)
    wide = tmp_path / "wide.svg"
    wide.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="20">'
                    '<text x="5" y="15" font-size="15" font-weight="bold">live node (/var/lib/labkit/numa)</text></svg>')
    assert "runs off" in picture_problem(wide)


def test_shown_commands_are_found_in_markdown():
    from labkit.labs import Exercise, Lab
    ex = Exercise("e", "E", 1, "Run `kubectl get pods -n x` and `labkit gc log`, not `kubectl`.", ("`labkit show e 1`",),
                  "c")
    lab = Lab("l", "L", "s", (), (ex,), Path(tempfile.gettempdir()))
    printed = "## Access\n\n    export KUBECONFIG=/k\n    kubectl get ns\n\n```sh\nlabkit mounts get    # Pods\n" \
              "labkit mounts apply -f FILE / labkit mounts delete POD\n```\n"
    found = shown_commands(lab, printed)
    assert set(found) == {"kubectl get ns", "labkit mounts get", "labkit mounts apply -f FILE", "labkit mounts delete POD",
                          "kubectl get pods -n x", "labkit gc log", "labkit show e 1"}, found
    assert found["labkit show e 1"] == "e hint 1"
    assert LabRunner._specs("labkit mounts delete POD", None)[0].startswith("has a placeholder")
    assert LabRunner._specs("kubectl delete ns x", None)[0].startswith("changes the lab")
    assert LabRunner._specs("kubectl get ns x", None) == [Run()]


if __name__ == "__main__":
    # `python tests/test_lab_material.py LAB...`: run the labs' material and print each outcome with its time
    for lab_id in sys.argv[1:]:
        for o in LabRunner(lab_id, Path(tempfile.mkdtemp(prefix=f"material-{lab_id}-"))).run_all():
            print(f"{o.seconds:5.1f}s {'FAIL' if o.problem else 'ok  '} {o.lab} [{o.where}] {o.ran or o.shown}")
            if o.problem:
                print("       " + o.problem.replace("\n", "\n       ")[:1500])
