"""labkit's apply commands print the API server's refusals as `kubectl apply -f` prints them
(labkit/kubectlerrors.py): checked against real kubectl and the embedded API server, for a
changed spec of an existing Pod (ValidatePodUpdate) alone and next to another."""

from __future__ import annotations

import functools
import shutil

import pytest

import support
from labkit import kubectlerrors
from labkit.apiserver.podvalidation import POD_UPDATE_FORBIDDEN
from support import embedded_server


def _pod(name, seconds):
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n"
            f"  containers:\n  - {{name: c, image: busybox, command: [sleep, '{seconds}']}}\n")


def _forbidden(name):
    return f'Pod "{name}" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}'


def test_one_refusal_is_printed_from_its_details_several_with_their_source():
    assert kubectlerrors.apply_errors([(kubectlerrors.PATCHING, "web.yaml", _forbidden("web"))]) == \
        [f"The {_forbidden('web')}"]
    assert kubectlerrors.apply_errors([(kubectlerrors.PATCHING, "web.yaml", _forbidden("web")),
                                       (kubectlerrors.CREATING, "new.yaml", 'Pod "new" is invalid: x')]) == [
        f'Error from server (Invalid): error when patching "web.yaml": {_forbidden("web")}',
        'Error from server (Invalid): error when creating "new.yaml": Pod "new" is invalid: x']


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_words_are_kubectls(tmp_path):
    with embedded_server(tmp_path / "state", tmp_path / "home") as server:
        kubectl = functools.partial(support.kubectl, server)
        assert support.wait_until(lambda: kubectl("get", "serviceaccount", "default").returncode == 0, timeout=60)
        web, api = tmp_path / "web.yaml", tmp_path / "api.yaml"
        web.write_text(_pod("web", 1))
        api.write_text(_pod("api", 1))
        kubectl("apply", "-f", str(web), "-f", str(api), check=True)
        web.write_text(_pod("web", 2))
        alone = kubectl("apply", "-f", str(web))
        assert alone.returncode == 1
        assert alone.stderr.splitlines() == kubectlerrors.apply_errors(
            [(kubectlerrors.PATCHING, str(web), _forbidden("web"))])
        api.write_text(_pod("api", 2))
        both = kubectl("apply", "-f", str(web), "-f", str(api))
        assert both.returncode == 1
        ours = kubectlerrors.apply_errors([(kubectlerrors.PATCHING, str(web), _forbidden("web")),
                                           (kubectlerrors.PATCHING, str(api), _forbidden("api"))])
        # kubectl's lines: `Error from server (Invalid): error when applying patch:`, the patch and
        # the object, then `for: "FILE": ` and the part labkit prints
        theirs = [line for line in both.stderr.splitlines() if line.startswith(("Error from server", "for: "))]
        assert len(theirs) == 4 and all(t == "Error from server (Invalid): error when applying patch:"
                                        for t in theirs[::2])
        assert [t.removeprefix(f'for: "{f}": ') for t, f in zip(theirs[1::2], (web, api))] == \
            [line.removeprefix("Error from server (Invalid): ") for line in ours]
