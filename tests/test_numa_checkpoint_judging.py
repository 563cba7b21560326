"""In-process judgement of the numa lab's checkpoint exercise on node-b's files as a newcomer left
them: Pods still bound to node-b keep the spec they were admitted with, so rewriting their
resources in pods.yaml instead of draining the node does not make deleting the checkpoint right.
No lab is built: node-b's files come from the lab's own writer (lab.write_node_b)."""

from __future__ import annotations

from test_namespace_judging import checks, context


def _node_b(tmp_path, edit=None, drain=False) -> dict:
    ctx = context("numa", "checkpoint")
    root = tmp_path / "node-b"
    ctx.lab.environment_module().write_node_b(root)
    (root / "kubelet" / "cpu_manager_state").unlink()
    pods = root / "pods.yaml"
    if drain:
        pods.write_text("# drained\n")
    elif edit:
        pods.write_text(edit(pods.read_text()))
    return ctx, checks("numa").NODE_FILES, root


def _files(root, names) -> dict:
    return {name: (root / name).read_text() if (root / name).exists() else None for name in names}


def test_bound_pods_rewritten_as_burstable_still_lose_their_cpus(tmp_path):
    ctx, names, root = _node_b(tmp_path, edit=lambda text: text.replace("limits: {cpu:", "requests: {cpu:"))
    result = checks("numa").judge_checkpoint(ctx, _files(root, names))
    assert result.status == "fail", result.message
    assert "lost their exclusive CPUs (finance/ledger/app, finance/matcher/engine)" in result.message
    assert "lists finance/ledger, finance/matcher with other resources" in result.message
    assert "keeps those it was admitted with" in result.message


def test_drained_then_deleted_passes(tmp_path):
    ctx, names, root = _node_b(tmp_path, drain=True)
    result = checks("numa").judge_checkpoint(ctx, _files(root, names))
    assert result.status == "pass", result.message
