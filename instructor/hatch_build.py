"""Build hooks of labkit-instructor: the labs' reference directories go into the wheel as
labkit_instructor/labs/<lab>/<kind>/, and the package requires labkit of its own version."""

from __future__ import annotations

from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

LABS = Path(__file__).resolve().parent.parent / "labs"
KINDS = ("solutions", "mistakes", "mutants")


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            raise RuntimeError("labkit-instructor is built as a wheel from a checkout (its files are ../labs)")
        found = 0
        for lab in sorted(p for p in LABS.iterdir() if (p / "lab.yaml").is_file()):
            for kind in KINDS:
                for path in sorted((lab / kind).rglob("*")):
                    if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                        inside = path.relative_to(LABS).as_posix()
                        build_data["force_include"][str(path)] = f"labkit_instructor/labs/{inside}"
                        found += 1
        if not found:
            raise RuntimeError(f"no reference material under {LABS}")


class CustomMetadataHook(MetadataHookInterface):
    def update(self, metadata):
        metadata["dependencies"] = [f"labkit=={metadata['version']}"]
