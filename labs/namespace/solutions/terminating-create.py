"""Reference solution: the NamespaceLifecycle admission plugin's message (plugin/pkg/admission/namespace/lifecycle)."""

import yaml

from labkit.exercises import answer_path


def solve(env):
    path = answer_path("namespace", "terminating-create")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"error": 'configmaps "late" is forbidden: unable to create new content in '
                                             "namespace attic because it is being terminated"}))
