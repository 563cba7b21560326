"""What `kubectl apply -f FILE` prints for the objects the API server refused as Invalid (422),
for labkit's own apply commands (`labkit mounts apply`, `labkit resources apply`).

kubectl wraps each error with its source (staging/src/k8s.io/kubectl/pkg/util/cmdutil,
AddSourceToErr, which keeps the Status and prefixes its message): a new object's create as
`error when creating "FILE": …` (apply.go applyOneObject), an existing object's patch as
`error when patching "FILE": …` (patcher.go Patch), itself wrapped as `error when applying
patch:\\n<the patch>\\nto:\\n<the object>\\nfor: "FILE": …` (apply.go). apply returns the one error
alone, or an aggregate of several, and cmdutil.CheckErr prints them (helpers.go checkErr):

- one: an Invalid StatusError is printed from its details, not its message:
  `The Pod "web" is invalid: spec: Forbidden: pod updates may not change fields other than …`
  (the file and the wrapping do not show);
- several: each as `Error from server (Invalid): ` and its wrapped message.

labkit does not compute kubectl's three-way patch, so a refused patch among several is shown from
its `error when patching "FILE": …` part.
"""

from __future__ import annotations

CREATING, PATCHING = "creating", "patching"


def apply_errors(refused: list[tuple[str, str, str]]) -> list[str]:
    """The lines for `refused`: (verb, file, message) each, verb CREATING or PATCHING, message the
    Status message (`Pod "web" is invalid: …`), in the order kubectl met them."""
    if len(refused) == 1:
        return [f"The {refused[0][2]}"]
    return [f'Error from server (Invalid): error when {verb} "{source}": {message}' for verb, source, message in refused]
