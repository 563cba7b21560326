"""Reference solution: the NamespaceLifecycle admission plugin's message (plugin/pkg/admission/namespace/lifecycle)."""

from labkit.exercises import write_answer


def solve(env):
    write_answer(env, "terminating-create", {"error": 'configmaps "late" is forbidden: unable to create new '
                                                      "content in namespace attic because it is being terminated"})
