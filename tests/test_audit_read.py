"""Reading the audit log as checks do: `received_at` reads labkit's fixed timestamp layout without
time.strptime and gives the same seconds; `read_since` (Target.audit) gives what filtering `read`
gives, reading again only what was appended since its last call, parsing each line once for the
earliest time asked and none before it or of a user left out (the events are shared by the calls)."""

from __future__ import annotations

import calendar
import json
import time

from labkit.apiserver import audit


def _strptime_seconds(stamp: str) -> float:
    main, _, frac = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


def test_received_at_gives_the_seconds_strptime_gives():
    stamps = ["2026-12-06T10:46:50.123456Z", "1970-01-01T00:00:00Z", "2024-02-29T23:59:59.000001Z",
              "2031-07-04T12:00:00.5Z", audit._timestamp(1_780_000_000.25), audit._timestamp(time.time())]
    for stamp in stamps:
        assert audit.received_at({"requestReceivedTimestamp": stamp}) == _strptime_seconds(stamp), stamp
    assert audit.received_at({}) == 0.0


def _event(n: int, at: float) -> str:
    return json.dumps({"auditID": str(n), "requestReceivedTimestamp": audit._timestamp(at)},
                      separators=(",", ":")) + "\n"


def test_read_since_is_read_filtered_and_reads_only_what_was_appended(tmp_path, monkeypatch):
    log = tmp_path / "audit.log"
    start = 1_780_000_000.0
    # written when each request ended: a long request's line comes after a later one's
    log.write_text(_event(1, start) + _event(2, start + 2) + _event(3, start + 1) + "{cut short by a crash\n")

    def expected(since):
        return [e for e in audit.read(log) if audit.received_at(e) >= since]
    for since in (0, start, start + 1, start + 1.5, start + 3):
        assert audit.read_since(log, since) == expected(since), since

    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(audit.json, "loads", lambda text: parsed.append(text) or real_loads(text))
    with log.open("a") as f:
        f.write(_event(4, start + 4) + '{"auditID":"5","requestRecei')   # the last line still being written
    assert [e["auditID"] for e in audit.read_since(log, start + 1)] == ["2", "3", "4"]
    assert [real_loads(p)["auditID"] for p in parsed] == ["4"]      # only the new line: the others were parsed
    with log.open("a") as f:
        f.write('vedTimestamp":"' + audit._timestamp(start + 5)[:-1] + 'Z"}\n')
    assert [e["auditID"] for e in audit.read_since(log, start + 3)] == ["4", "5"]
    whole = expected(0)
    del parsed[:]
    assert audit.read_since(log, 0) == whole and parsed == []


def test_read_since_parses_each_line_once_and_none_before_the_time_asked(tmp_path, monkeypatch):
    log = tmp_path / "audit.log"
    log.write_text("".join(_event(n, 1000.0 + n) for n in range(6)))
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(audit.json, "loads", lambda text: parsed.append(text) or real_loads(text))
    first = audit.read_since(log, 1003)
    assert [e["auditID"] for e in first] == ["3", "4", "5"]
    assert [real_loads(p)["auditID"] for p in parsed] == ["3", "4", "5"]     # the earlier lines never parsed
    for since in (1003, 1004, 1005, 1003):      # a check asks again and again: nothing is parsed again
        assert audit.read_since(log, since) == [e for e in first if audit.received_at(e) >= since]
    assert len(parsed) == 3
    assert [e["auditID"] for e in audit.read_since(log, 1001)] == ["1", "2", "3", "4", "5"]   # earlier: read again


def _by(n: int, at: float, user: str, body: dict | None = None) -> str:
    """A line as AuditLog.write writes it: the event's keys in its order, a body after the user."""
    event = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request", "auditID": str(n),
             "stage": "ResponseComplete", "requestURI": '/api/v1/x?q="user":{"username":"ctl"}', "verb": "create",
             "user": {"username": user, "groups": ["system:authenticated"]}, "sourceIPs": ["127.0.0.1"]}
    if body is not None:
        event["requestObject"] = body
    event["requestReceivedTimestamp"] = audit._timestamp(at)
    event["stageTimestamp"] = audit._timestamp(at + 0.5)
    event["annotations"] = {"note": '"requestReceivedTimestamp":"1970-01-01T00:00:00Z"'}
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n"


def test_read_since_leaves_out_the_users_asked_without_parsing_their_lines(tmp_path, monkeypatch):
    log = tmp_path / "audit.log"
    hidden = {"user": {"username": "ctl"}, "requestReceivedTimestamp": "2031-01-01T00:00:00Z"}
    log.write_text(_by(1, 2000.0, "ctl") + _by(2, 2001.0, "alice", {"spec": hidden})
                   + _by(3, 2002.0, "ctl-2") + _by(4, 2003.0, 'ct"l') + _by(5, 2004.0, "ctl"))
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(audit.json, "loads", lambda text: parsed.append(text) or real_loads(text))
    got = audit.read_since(log, 2000.0, exclude_users=("ctl",))
    # a body naming the left-out user, or carrying a later timestamp, is not the event's own
    assert [e["auditID"] for e in got] == ["2", "3", "4"]
    assert [real_loads(p)["auditID"] for p in parsed] == ["2", "3", "4"]
    assert [e["auditID"] for e in audit.read_since(log, 2001.5, exclude_users=("ctl",))] == ["3", "4"]
    assert [audit.received_at(e) for e in got] == [2001.0, 2002.0, 2003.0]
    # a first sieve on the line's text: only lines holding it are parsed (the body's text counts too)
    del parsed[:]
    assert [e["auditID"] for e in audit.read_since(log, 0, containing='"spec":')] == ["2"] and len(parsed) == 1
    everyone = [e["auditID"] for e in audit.read_since(log, 0)]
    assert everyone == ["1", "2", "3", "4", "5"] == [e["auditID"] for e in audit.read(log)]


def test_read_since_reads_a_replaced_log_from_its_start(tmp_path):
    log = tmp_path / "audit.log"
    log.write_text(_event(1, 100.0) + _event(2, 200.0))
    assert [e["auditID"] for e in audit.read_since(log, 0)] == ["1", "2"]
    replaced = tmp_path / "new.log"
    replaced.write_text(_event(7, 300.0))
    replaced.replace(log)                   # a lab rebuilt: another file under the same name
    assert [e["auditID"] for e in audit.read_since(log, 0)] == ["7"]
    log.unlink()
    assert audit.read_since(log, 0) == []
