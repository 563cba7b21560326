"""`labkit requests explain AUDIT_ID` answers for every request in the audit log: the server keeps
the newest traces in memory and appends each one to traces.log beside audit.log
(labkit.apiserver.trace.Traces)."""

from __future__ import annotations

import json

from labkit.apiserver import audit
from labkit.apiserver.server import EmbeddedServer
from labkit.apiserver.trace import Trace, Traces
from support import host_lock, labkit


def _trace(n: int) -> Trace:
    trace = Trace(audit_id=f"id-{n}")
    trace.add("storage", "etcd3", "stored", f"request {n}")
    return trace


def test_memory_keeps_the_newest_and_the_file_keeps_all(tmp_path):
    traces = Traces(limit=2, path=tmp_path / "traces.log")
    for n in range(5):
        traces.keep(_trace(n))
    assert [t["auditID"] for t in traces.newest(10)] == ["id-3", "id-4"]
    assert traces.get("id-0")["steps"][0]["detail"] == "request 0"      # from the file
    assert traces.get("id-4")["steps"][0]["detail"] == "request 4"      # from memory
    assert traces.get("id-9") is None
    traces.close()
    # a server started again in the same state directory still answers the old ones
    again = Traces(limit=2, path=tmp_path / "traces.log")
    assert again.get("id-1")["auditID"] == "id-1"
    again.close()


def test_explain_finds_every_audit_id_of_the_log(tmp_path):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver", controllers=[]).start()
    try:
        srv.api.traces.limit = 3            # far fewer than the requests below: most leave memory
        client = srv.client()
        for n in range(12):
            client.create("v1", "configmaps", {"metadata": {"name": f"cm-{n}"}}, "default")
        ids = [e["auditID"] for e in audit.read(srv.state_dir / "audit.log")]
        assert len(ids) >= 12
        out = labkit("requests", "explain", ids[0], ids[len(ids) // 2], "--state", str(srv.state_dir),
                     "-o", "json", check=0).stdout
        assert [item["auditID"] for item in json.loads(out)] == [ids[0], ids[len(ids) // 2]]
        gone = labkit("requests", "explain", "no-such-id", "--state", str(srv.state_dir), check=2)
        assert "keeps each one as long as its audit event" in gone.stderr
    finally:
        with host_lock(False):
            srv.stop()
