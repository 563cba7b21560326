"""Bad input: every file labkit reads, fuzzed with hypothesis, fails only with a clear error.

Each loader is called in-process on many files: valid seed documents (the labs' own files) with
random mutations (a value replaced by one of another type, a field deleted, an unknown field
added, several at once), truncated seed text, and arbitrary text and bytes. A loader may accept
a file or raise ConfigError whose message is one line naming the file; any other exception is a
bug. The CLI half (test_cli_bad_input below) checks the exit code and stderr shape of the real
commands on a smaller number of bad files.
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from labkit.errors import ConfigError, LabkitError
from support import REPO

LABS = REPO / "labs"

SERVICES = """\
apiVersion: v1
kind: Service
metadata: {name: fuzz, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.90
  clusterIPs: [10.96.0.90]
  ipFamilies: [IPv4]
  selector: {app: web}
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}
  externalTrafficPolicy: Local
  healthCheckNodePort: 30500
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30290, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- addresses: [10.244.1.5]
  conditions: {ready: true, serving: true, terminating: false}
  nodeName: node1
ports: [{name: http, port: 8080, protocol: TCP}]
"""

KUBE_PROXY_CONFIG = """\
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: 10.244.0.0/16,fd00:10::/64
detectLocalMode: ClusterCIDR
hostnameOverride: node1
nodePortAddresses: [primary]
iptables: {masqueradeBit: 14, masqueradeAll: false, localhostNodePorts: true}
conntrack: {tcpBeLiberal: false}
"""


def _kube_proxy_apply(path: Path):
    from labkit.kubeproxy.cluster_state import load_scenario, read_documents
    state = load_scenario(LABS / "kube-proxy" / "scenarios" / "cluster.yaml")
    return state.apply(read_documents(path), str(path))


def _kube_proxy_config(path: Path):
    from labkit.kubeproxy.config import ProxierConfig
    return ProxierConfig.from_kube_proxy_configuration(path)


def _kube_proxy_objects(path: Path):
    from labkit.kubeproxy.objects import load_objects
    return load_objects(path)


def _kube_proxy_scenario(path: Path):
    from labkit.kubeproxy.cluster_state import load_scenario
    return load_scenario(path)


def _lab_yaml(path: Path):
    from labkit.labs import load_lab
    return load_lab(path.parent)


def _gc_scenario(path: Path):
    from labkit.gc.scenario import load
    return load(path)


def _mounts_scenario(path: Path):
    from labkit.mounts.scenario import load
    return load(path)


def _mounts_pods(path: Path):
    from labkit.mounts.pods import load_pods
    return load_pods(path)


def _numa_pods(path: Path):
    from labkit.numa.pods import load_pods
    return load_pods(path)


def _numa_machine(path: Path):
    from labkit.numa.machine import load_machine
    return load_machine(path)


def _kubelet_config(path: Path):
    from labkit.numa.config import load_config
    return load_config(path)


def _numa_hints(path: Path):
    from labkit.numa.cli import _merge_input
    return _merge_input(path)


def _text(path: Path) -> str:
    return path.read_text()


# name: (loader, file name the loader expects, seed text, "yaml" | "json")
LOADERS = {
    "lab.yaml": (_lab_yaml, "lab.yaml", _text(LABS / "numa" / "lab.yaml"), "yaml"),
    "gc scenario": (_gc_scenario, "gc-owner-never-existed.yaml",
                    _text(REPO / "tests" / "scenarios" / "gc-owner-never-existed.yaml"), "yaml"),
    "mounts scenario": (_mounts_scenario, "e2e.yaml", _text(LABS / "mount-propagation" / "scenarios" / "e2e.yaml"), "yaml"),
    "kube-proxy scenario": (_kube_proxy_scenario, "cluster.yaml", _text(LABS / "kube-proxy" / "scenarios" / "cluster.yaml"), "yaml"),
    "Service/EndpointSlice (render)": (_kube_proxy_objects, "objects.yaml", SERVICES, "yaml"),
    "Service/EndpointSlice (kube-proxy apply)": (_kube_proxy_apply, "objects.yaml", SERVICES, "yaml"),
    "KubeProxyConfiguration": (_kube_proxy_config, "kube-proxy.yaml", KUBE_PROXY_CONFIG, "yaml"),
    "Pod (mounts)": (_mounts_pods, "pods.yaml", _text(LABS / "mount-propagation" / "pods" / "e2e.yaml"), "yaml"),
    "Pod (numa)": (_numa_pods, "pods.yaml", _text(LABS / "numa" / "scenarios" / "qos-pods.yaml"), "yaml"),
    "machine JSON": (_numa_machine, "machine.json", _text(REPO / "labkit" / "numa" / "machines" / "lab-two-node.json"), "json"),
    "KubeletConfiguration": (_kubelet_config, "kubelet.yaml", _text(LABS / "numa" / "scenarios" / "kubelet-memory.yaml"), "yaml"),
    "topology hints JSON": (_numa_hints, "hints.json", _text(LABS / "numa" / "scenarios" / "merge-feeder.json"), "json"),
}

# -- strategies ------------------------------------------------------------------------------

ODD_STRINGS = ["", " ", "-1", "0", "1.5", "default", "*", "../../etc", "a" * 300, "x; touch /tmp/pwned",
               "10.0.0.0/33", "::1", "fd00::/200", "10.96.0.10", "TCP", "true", "null", "0x10", "Ünïcödé",
               "a\nb", "{{x}}", "kube-system", "1Gi", "-5Mi", "abc def"]
LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70), st.integers(-3, 70000),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(ODD_STRINGS),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.one_of(st.text(max_size=8), st.integers(-2, 2)), inner, max_size=3)),
    max_leaves=6,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _paths(value, prefix + (i,))


def _get(obj, path):
    for key in path:
        obj = obj[key]
    return obj


@st.composite
def mutated(draw, documents: list):
    """The seed's documents with 1-4 random mutations anywhere in them."""
    docs = copy.deepcopy(documents)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(list(_paths(docs))[1:] or [()]))
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if not path:
            break
        parent, key = _get(docs, path[:-1]), path[-1]
        target = parent[key]
        if op == "delete":
            del parent[key]
        elif op == "add" and isinstance(target, dict):
            target[draw(st.one_of(st.text(max_size=8), st.sampled_from(["metadata", "spec", "kind", "items"])))] = draw(VALUES)
        elif op == "add" and isinstance(target, list):
            target.append(draw(VALUES))
        else:
            parent[key] = draw(VALUES)
    return docs


def _seed_documents(text: str, fmt: str) -> list:
    return [json.loads(text)] if fmt == "json" else [d for d in yaml.safe_load_all(text)]


def _render(docs: list, fmt: str) -> str:
    if fmt == "json":
        return "\n".join(json.dumps(d) for d in docs)
    return yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=True)


def file_contents(name: str):
    _loader, _filename, seed, fmt = LOADERS[name]
    documents = _seed_documents(seed, fmt)
    return st.one_of(
        mutated(documents).map(lambda docs: _render(docs, fmt).encode()),
        mutated(documents).map(lambda docs: _render(docs, fmt).encode()),
        mutated(documents).map(lambda docs: _render(docs, fmt).encode()),
        st.integers(0, len(seed)).map(lambda n: seed[:n].encode()),
        VALUES.map(lambda v: _render([v], fmt).encode()),
        st.text(max_size=200).map(str.encode),
        st.binary(max_size=200),
    )


WORKDIR = Path(tempfile.mkdtemp(prefix="labkit-fuzz-"))


def assert_clear_failure(name: str, content: bytes) -> None:
    loader, filename, _seed, _fmt = LOADERS[name]
    directory = WORKDIR / "numa" if name == "lab.yaml" else WORKDIR / name.split()[0].replace("/", "-")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_bytes(content)
    try:
        loader(path)
    except LabkitError as exc:   # ConfigError, or a kubelet-style validation error: exit code 2
        message = str(exc)
        assert "\n" not in message, f"{name}: a multi-line error: {message!r}"
        assert str(path) in message, f"{name}: the error does not name the file: {message!r}"
        assert not isinstance(exc, ConfigError) or exc.problem.strip(), f"{name}: an error without a problem: {message!r}"


FUZZ = settings(max_examples=int(__import__("os").environ.get("FUZZ_N", "60")), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", list(LOADERS))
def test_every_loader_fails_only_with_a_clear_one_line_error(name):
    @FUZZ
    @given(content=file_contents(name))
    def run(content):
        assert_clear_failure(name, content)

    run()


@pytest.mark.parametrize("name", list(LOADERS))
def test_the_seed_files_themselves_load(name):
    loader, filename, seed, _fmt = LOADERS[name]
    directory = WORKDIR / ("numa" if name == "lab.yaml" else "seed-" + name.split()[0].replace("/", "-"))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / filename).write_text(seed)
    loader(directory / filename)
