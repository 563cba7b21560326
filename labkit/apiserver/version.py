"""The Kubernetes version labkit reconstructs, the versions it can emulate, and the feature gates
whose defaults depend on them.

labkit's API server and controllers are a v1.34 control plane. Like kube-apiserver and
kube-controller-manager started with `--emulated-version` (compatibility versions, KEP-4330;
component-base/compatibility), they can emulate an older minor release down to binary-3 (1.31):
every feature gate then takes that release's default from its versioned spec
(pkg/features/kube_features.go, defaultVersionedKubernetesFeatureGates), and /version reports the
emulated version in `emulationMajor`/`emulationMinor` beside the binary's `gitVersion`. The kinds,
schemas and validation served stay v1.34's.
"""

from __future__ import annotations

from dataclasses import dataclass

BINARY_MINOR = 34
GIT_VERSION = "v1.34.1"
EMULATION_FLOOR = BINARY_MINOR - 3

# name -> ((since minor, default, stage, locked to default), ...), as kube_features.go lists them
VERSIONED_FEATURE_GATES = {
    # the namespace controller deletes a namespace's pods before its other content
    # (namespaced_resources_deleter.go deleteAllContent)
    "OrderedNamespaceDeletion": ((30, False, "Beta", False), (33, True, "Beta", False), (34, True, "GA", True)),
}


class VersionError(ValueError):
    pass


@dataclass(frozen=True)
class EffectiveVersion:
    """The binary version (always v1.34) and the emulated minor version."""
    emulated_minor: int = BINARY_MINOR

    @classmethod
    def parse(cls, text: str | None) -> "EffectiveVersion":
        """`1.33`, `v1.33` (major.minor, as --emulated-version takes it); None: the binary's."""
        if text is None or text == "":
            return cls()
        raw = text[1:] if text.startswith("v") else text
        parts = raw.split(".")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise VersionError(f"illegal version string {text!r}: expected major.minor, e.g. 1.{BINARY_MINOR}")
        major, minor = int(parts[0]), int(parts[1])
        if major != 1 or not EMULATION_FLOOR <= minor <= BINARY_MINOR:
            raise VersionError(f"emulation version {major}.{minor} is not between [1.{EMULATION_FLOOR}, "
                               f"1.{BINARY_MINOR}]")
        return cls(minor)

    @property
    def name(self) -> str:
        return f"1.{self.emulated_minor}"

    def enabled(self, gate: str) -> bool:
        """The gate's default at the emulated version (the last spec at or before it)."""
        value = False
        for since, default, _stage, _locked in VERSIONED_FEATURE_GATES[gate]:
            if since <= self.emulated_minor:
                value = default
        return value

    def gates(self) -> dict[str, bool]:
        return {gate: self.enabled(gate) for gate in VERSIONED_FEATURE_GATES}

    def info(self) -> dict:
        """/version (k8s.io/apimachinery/pkg/version.Info)."""
        return {"major": "1", "minor": str(BINARY_MINOR), "emulationMajor": "1",
                "emulationMinor": str(self.emulated_minor), "minCompatibilityMajor": "1",
                "minCompatibilityMinor": str(self.emulated_minor - 1), "gitVersion": f"{GIT_VERSION}-labkit",
                "gitCommit": "labkit", "gitTreeState": "clean", "buildDate": "2025-09-09T00:00:00Z",
                "goVersion": "go1.24.6", "compiler": "gc", "platform": "linux/amd64"}
