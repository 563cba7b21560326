"""`labkit class grade` over real SSH, and the class report in a real browser.

A small class of fake student machines, each a real sshd on a loopback port whose logins see
the machine's own labkit instance (tests/class_machines.py), all running the demo lab:
  alice   every exercise solved
  bob     one exercise solved, a wrong answer with HTML in it (the report must escape it)
  dave    the lab never started (not attempted)
  carol   unreachable: nothing listens on her port
  erin    broken: her labkit does not know the lab
The class is graded once for the module; the tests read what that run wrote.
"""

import csv
import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

import browser
from class_machines import FakeMachine, free_port, keygen
from conftest import fresh_environment
from support import host_lock, labkit

EXERCISES = ["find-address", "serve-greeting", "container-mount"]
POINTS = {"find-address": 2, "serve-greeting": 3, "container-mount": 5}
REMOTE_LABKIT = str(Path(sys.executable).parent / "labkit")
NASTY = "<script>alert('owned')</script>"


@dataclass
class GradedClass:
    base: Path
    out: Path
    inventory: Path
    machines: dict
    grader_env: dict
    run: object          # the CompletedProcess of the grading run


def grade(klass, out, *extra, inventory=None):
    return labkit("class", "grade", "--inventory", str(inventory or klass.inventory), "--labs", "demo",
                  "--out", str(out), "--labkit", REMOTE_LABKIT, "--retries", "1", "--parallel", "3",
                  *extra, env=klass.grader_env, timeout=300)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    base = tmp_path_factory.mktemp("class")
    key = keygen(base / "client_key")
    (base / "no-labs").mkdir()
    machines = {}
    with host_lock(False):
        try:
            for name in ("alice", "bob", "dave", "erin"):
                env = {**os.environ, **fresh_environment(base / name)}
                if name == "erin":
                    env["LABKIT_LABS_PATH"] = str(base / "no-labs")
                machines[name] = FakeMachine(name, base / f"{name}-sshd", env)
                machines[name].start(key)
            alice, bob = machines["alice"].env, machines["bob"].env
            labkit("run", "demo", env=alice, check=0)
            for ex in EXERCISES:
                labkit("solve", "demo", ex, env=alice, check=0)
            labkit("run", "demo", env=bob, check=0)
            labkit("solve", "demo", "serve-greeting", env=bob, check=0)
            answers = Path(bob["LABKIT_ANSWERS_DIR"]) / "demo"
            answers.mkdir(parents=True, exist_ok=True)
            (answers / "find-address.yaml").write_text(json.dumps({"address": NASTY}) + "\n")

            inventory = base / "class.yaml"
            lines = ["defaults:", "  host: 127.0.0.1", f"  key: {base / 'client_key'}", "machines:"]
            for name in ("alice", "bob", "carol", "dave", "erin"):
                port = machines[name].port if name in machines else free_port()   # carol: nobody listens
                lines.append(f"  - {{name: {name}, port: {port}}}")
            inventory.write_text("\n".join(lines) + "\n")
            grader_env = {**os.environ, **fresh_environment(base / "grader")}
            klass = GradedClass(base, base / "out", inventory, machines, grader_env, None)
            klass.run = grade(klass, klass.out)
            yield klass
        finally:
            for m in machines.values():
                try:
                    labkit("cleanup", "--all", env=m.env, check=0)
                finally:
                    m.stop()


def gradebook(out):
    with open(out / "gradebook.csv", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


def test_grading_run_reports_every_machine(klass):
    assert klass.run.returncode == 1, klass.run.stderr     # not every machine could be graded
    err = klass.run.stderr
    assert "grading 5 machines" in err and "3 of 5 machines graded" in err
    assert "carol: unreachable" in err and "erin: broken" in err
    assert "Traceback" not in err


def test_gradebook_has_points_totals_and_states(klass):
    book = gradebook(klass.out)
    assert list(book) == ["alice", "bob", "carol", "dave", "erin"]
    columns = [f"demo/{ex}" for ex in EXERCISES]
    assert [book["alice"][c] for c in columns] == ["2", "3", "5"]
    assert (book["alice"]["score"], book["alice"]["max_score"], book["alice"]["state"]) == ("10", "10", "ok")
    assert [book["bob"][c] for c in columns] == ["0", "3", "0"]
    assert (book["bob"]["score"], book["bob"]["state"]) == ("3", "ok")
    assert [book["dave"][c] for c in columns] == ["0", "0", "0"] and book["dave"]["state"] == "ok"
    # no report, no points: the cells stay empty and the row says why
    assert [book["carol"][c] for c in columns] == ["", "", ""]
    assert book["carol"]["state"] == "unreachable" and "Connection refused" in book["carol"]["problems"]
    assert [book["erin"][c] for c in columns] == ["", "", ""]
    assert book["erin"]["state"] == "broken"
    assert "exited 2" in book["erin"]["problems"] and "no lab named 'demo'" in book["erin"]["problems"]


def test_the_ledger_keeps_each_pass_seen_live(klass):
    """The instructor's ledger in the grading directory: one line per exercise that passed live,
    with machine, lab, exercise and the time of the grading run that saw it."""
    lines = [json.loads(line) for line in (klass.out / "passes-seen.jsonl").read_text().splitlines()]
    assert sorted((e["machine"], e["lab"], e["exercise"]) for e in lines) == sorted(
        [("alice", "demo", ex) for ex in EXERCISES] + [("bob", "demo", "serve-greeting")])
    graded = json.loads((klass.out / "class.json").read_text())["time"]
    for entry in lines:
        assert (entry["host"], entry["port"]) == ("127.0.0.1", klass.machines[entry["machine"]].port)
        assert entry["time"] == graded and entry["report_time"] and entry["message"]
    assert "4 new passes in the ledger" in klass.run.stderr


def test_per_student_files_are_what_labkit_check_writes(klass):
    # alice's Gradescope file is exactly what `labkit check --format gradescope` gives on her machine
    mine = labkit("check", "demo", "--format", "gradescope", env=klass.machines["alice"].env, check=0)
    assert json.loads((klass.out / "alice" / "results.json").read_text()) == json.loads(mine.stdout)
    bob = json.loads((klass.out / "bob" / "results.json").read_text())
    assert (bob["score"], bob["max_score"]) == (3, 10)
    assert [t["status"] for t in bob["tests"]] == ["failed", "passed", "failed"]
    assert NASTY in bob["tests"][0]["output"]

    for name, failures, errors in (("alice", 0, 0), ("bob", 2, 0), ("dave", 0, 3), ("carol", 0, 3)):
        suite = ET.parse(klass.out / name / "junit.xml").getroot().find("testsuite")
        assert suite.get("name") == "demo"
        assert [c.get("name") for c in suite.findall("testcase")] == EXERCISES
        assert (int(suite.get("failures")), int(suite.get("errors"))) == (failures, errors), name
    carol = json.loads((klass.out / "carol" / "results.json").read_text())
    assert carol["score"] == 0 and [t["max_score"] for t in carol["tests"]] == [2, 3, 5]
    assert all("machine unreachable" in t["output"] for t in carol["tests"])


def test_raw_json_keeps_each_machines_report(klass):
    raw = json.loads((klass.out / "class.json").read_text())
    states = {s["name"]: s["state"] for s in raw["students"]}
    assert states == {"alice": "ok", "bob": "ok", "carol": "unreachable", "dave": "ok", "erin": "broken"}
    carol = next(s for s in raw["students"] if s["name"] == "carol")["labs"]["demo"]
    assert carol["attempts"] == 2 and carol["report"] is None       # one retry
    erin = next(s for s in raw["students"] if s["name"] == "erin")["labs"]["demo"]
    assert erin["attempts"] == 1                                       # a broken machine is not retried
    bob = json.loads((klass.out / "bob" / "demo.json").read_text())
    assert bob["lab"] == "demo" and bob["score"] == 3
    assert not (klass.out / "carol" / "demo.json").exists()
    dave = json.loads((klass.out / "dave" / "demo.json").read_text())
    assert all(r["details"] == {"lab_running": False} for r in dave["results"])


def test_regrading_rewrites_the_same_results(klass):
    ledger = (klass.out / "passes-seen.jsonl").read_bytes()
    before = {p.relative_to(klass.out): p.read_bytes() for p in klass.out.rglob("*")
              if p.is_file() and p.suffix in (".csv", ".xml") or p.name == "results.json"}
    again = grade(klass, klass.out)
    assert again.returncode == 1, again.stderr
    after = {p.relative_to(klass.out): p.read_bytes() for p in klass.out.rglob("*")
             if p.is_file() and p.suffix in (".csv", ".xml") or p.name == "results.json"}
    assert set(after) == set(before)
    assert after[Path("gradebook.csv")] == before[Path("gradebook.csv")]
    assert (klass.out / "passes-seen.jsonl").read_bytes() == ledger      # the first sightings stay
    for name in ("alice", "bob", "carol", "dave", "erin"):
        assert after[Path(name) / "results.json"] == before[Path(name) / "results.json"], name
    assert not [p for p in klass.out.rglob("*.tmp")]


def test_a_changed_host_key_is_refused(klass, tmp_path):
    """Host keys are pinned in OUT/known_hosts on first use: another key is never graded."""
    out = tmp_path / "out"
    out.mkdir()
    impostor = keygen(tmp_path / "impostor")
    port = klass.machines["alice"].port
    (out / "known_hosts").write_text(f"[127.0.0.1]:{port} {Path(str(impostor) + '.pub').read_text()}")
    inventory = tmp_path / "one.csv"
    inventory.write_text(f"name,host,port,key\nalice,127.0.0.1,{port},{klass.base / 'client_key'}\n")
    run = grade(klass, out, inventory=inventory)
    assert run.returncode == 1, run.stderr
    alice = json.loads((out / "class.json").read_text())["students"][0]
    assert alice["state"] == "broken" and alice["labs"]["demo"]["attempts"] == 1
    assert "Host key verification failed" in alice["labs"]["demo"]["reason"]
    assert gradebook(out)["alice"]["demo/find-address"] == ""


def test_the_remote_command_is_quoted(klass, tmp_path):
    """A --labkit value with shell syntax reaches the machine as one word, never as a command."""
    marker = tmp_path / "injected"
    inventory = tmp_path / "one.csv"
    inventory.write_text(f"name,host,port,key\nalice,127.0.0.1,{klass.machines['alice'].port},"
                         f"{klass.base / 'client_key'}\n")
    run = labkit("class", "grade", "--inventory", str(inventory), "--labs", "demo", "--out", str(tmp_path / "out"),
                 "--labkit", f"{REMOTE_LABKIT}; touch {marker}", "--retries", "0", env=klass.grader_env)
    assert run.returncode == 1, run.stderr
    reason = json.loads((tmp_path / "out" / "class.json").read_text())["students"][0]["labs"]["demo"]["reason"]
    assert "exited 127" in reason and "not found on the machine" in reason
    assert not marker.exists()


def _row_states(dom, name):
    import re
    row = re.search(rf'<tr data-student="{name}">(.*?)</tr>', dom, re.S)
    assert row, f"no heat-map row for {name}"
    return re.findall(r'data-state="([^"]+)"', row.group(1))


def test_report_renders_in_chromium(klass, tmp_path):
    from PIL import Image

    shot = tmp_path / "report.png"
    page = browser.load(klass.out / "report.html", screenshot=shot)
    assert page.console == [], page.console
    dom = page.dom
    assert _row_states(dom, "alice") == ["passed"] * 3
    assert _row_states(dom, "bob") == ["failed", "passed", "failed"]
    assert _row_states(dom, "dave") == ["not attempted"] * 3
    assert _row_states(dom, "carol") == ["unreachable"] * 3
    assert _row_states(dom, "erin") == ["unreachable"] * 3
    for name in ("alice", "bob", "carol", "dave", "erin"):
        assert f'id="student-{name}"' in dom
    assert 'id="pass-rates"' in dom and "1 of 3" in dom and "2 of 3" in dom  # 3 machines answered
    assert "Connection refused" in dom and "no lab named" in dom
    # the student's answer is shown as text, never as markup
    assert "&lt;script&gt;alert('owned')&lt;/script&gt;" in dom
    assert "<script>alert(" not in dom and "<script>alert(" not in (klass.out / "report.html").read_text()

    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1600)
    colors = image.getcolors(1 << 24)
    assert len(colors) > 50, "the screenshot is (nearly) blank"
    for state, color in {"passed": (0x2E, 0xA4, 0x4F), "failed": (0xD7, 0x3A, 0x49),
                         "not attempted": (0xF2, 0xC9, 0x4C), "unreachable": (0x6A, 0x73, 0x7D)}.items():
        near = sum(n for n, c in colors if all(abs(a - b) <= 4 for a, b in zip(c, color)))
        # a heat-map cell is ~26x22 px, a legend swatch 14x14: the fewest cells of a state is 2 (failed)
        assert near > 2 * 400, f"{state}: only {near} pixels of its colour in the screenshot"


def test_console_errors_are_detected(tmp_path):
    """The check above can fail: a script error and a blocked network fetch are both reported."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" "
                    "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
                    "<img src=\"http://127.0.0.1:9/x.png\"><script>undefinedFunction();</script></body></html>")
    console = browser.load(page).console
    assert any("undefinedFunction is not defined" in line for line in console), console
    assert any("Content Security Policy" in line for line in console), console


def test_a_hanging_or_garbled_labkit_is_reported(klass, tmp_path):
    """A machine whose labkit hangs is cut off after --timeout; one that prints garbage is broken."""
    inventory = tmp_path / "one.csv"
    inventory.write_text(f"name,host,port,key\nalice,127.0.0.1,{klass.machines['alice'].port},"
                         f"{klass.base / 'client_key'}\n")
    pidfile = tmp_path / "hanging.pid"
    hanging, garbled = tmp_path / "hanging-labkit", tmp_path / "garbled-labkit"
    hanging.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 120\n")
    garbled.write_text("#!/bin/sh\necho '{\"lab\": \"demo\", \"results\": \"all good\"}'\n")
    hanging.chmod(0o755)
    garbled.chmod(0o755)

    def reason(command, *extra):
        out = tmp_path / f"out-{command.name}"
        run = labkit("class", "grade", "--inventory", str(inventory), "--labs", "demo", "--out", str(out),
                     "--labkit", str(command), "--retries", "0", *extra, env=klass.grader_env)
        assert run.returncode == 1, run.stderr
        student = json.loads((out / "class.json").read_text())["students"][0]
        return student["state"], student["labs"]["demo"]["reason"]

    try:
        assert reason(hanging, "--timeout", "2") == ("unreachable", "no answer within 2 s")
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), 9)
            except ProcessLookupError:
                pass
    state, why = reason(garbled)
    assert state == "broken" and "unusable output: output is not a labkit check report" in why


def test_several_labs(klass, tmp_path):
    """A second lab nobody started: not attempted everywhere a report came back; an unreachable
    machine is not tried again for it."""
    out = tmp_path / "out"
    run = grade(klass, out, "--labs", "numa")          # with --labs demo from grade(): demo, numa
    assert run.returncode == 1, run.stderr
    book = gradebook(out)
    numa = [c for c in book["alice"] if c.startswith("numa/")]
    assert len(numa) == 8
    assert (book["alice"]["score"], book["alice"]["max_score"]) == ("10", "38")
    assert all(book["alice"][c] == "0" for c in numa) and all(book["carol"][c] == "" for c in numa)
    raw = {s["name"]: s for s in json.loads((out / "class.json").read_text())["students"]}
    assert raw["carol"]["labs"]["numa"]["attempts"] == 0
    assert raw["carol"]["labs"]["numa"]["reason"] == raw["carol"]["labs"]["demo"]["reason"]
    # erin's labkit knows the built-in labs, not the demo lab
    assert raw["erin"]["labs"]["demo"]["outcome"] == "broken" and raw["erin"]["labs"]["numa"]["outcome"] == "ok"
    alice = json.loads((out / "alice" / "results.json").read_text())
    assert len(alice["tests"]) == 11 and (alice["score"], alice["max_score"]) == (10, 38)
    assert [s.get("name") for s in ET.parse(out / "alice" / "junit.xml").getroot().findall("testsuite")] == ["demo", "numa"]
    page = (out / "report.html").read_text()
    assert page.count('data-state="not attempted"') == 3 + 4 * 8      # dave's demo; numa of all who answered


def test_parallelism_is_bounded(klass, tmp_path):
    """--parallel 2: never more than two machines at work at once (one sshd listed six times)."""
    log = tmp_path / "log"
    script = tmp_path / "slow-labkit"
    script.write_text(f"#!/bin/sh\necho start >> {log}\nsleep 0.3\necho end >> {log}\nexit 3\n")
    script.chmod(0o755)
    inventory = tmp_path / "six.csv"
    port = klass.machines["alice"].port
    inventory.write_text("name,host,port,key\n" + "".join(
        f"m{i},127.0.0.1,{port},{klass.base / 'client_key'}\n" for i in range(6)))
    run = labkit("class", "grade", "--inventory", str(inventory), "--labs", "demo", "--out", str(tmp_path / "out"),
                 "--labkit", str(script), "--parallel", "2", env=klass.grader_env)
    assert run.returncode == 1 and "0 of 6 machines graded" in run.stderr, run.stderr
    events = log.read_text().split()
    assert events.count("start") == 6 and events.count("end") == 6
    running = peak = 0
    for event in events:
        running += 1 if event == "start" else -1
        peak = max(peak, running)
    assert peak <= 2, events
    reasons = {s["labs"]["demo"]["reason"] for s in json.loads((tmp_path / "out" / "class.json").read_text())["students"]}
    assert reasons == {"labkit check exited 3: no output"}


def test_a_pass_seen_by_grading_keeps_its_points_beside_the_live_result(klass, tmp_path):
    """alice's exercises passed live when the class was graded (the grading directory's ledger saw
    them); her container is restarted since, so the mount is gone: the live check fails, the points
    stay. Graded after the deadline with --reveal-answers, the reports carry the right answers."""
    alice = klass.machines["alice"].env
    labkit("reset", "demo", "container-mount", env=alice, check=0)
    out = tmp_path / "out"
    shutil.copytree(klass.out, out)        # the same grading directory, with its ledger
    assert grade(klass, out, "--reveal-answers").returncode == 1       # carol and erin
    book = gradebook(out)
    assert (book["alice"]["demo/container-mount"], book["alice"]["score"]) == ("5", "10")
    assert book["alice"]["recorded_not_counted"] == ""
    report = json.loads((out / "alice" / "demo.json").read_text())
    mount = next(r for r in report["results"] if r["exercise"] == "container-mount")
    assert mount["status"] == "fail" and mount["recorded"]["message"].startswith("host c sees a tmpfs")
    assert (report["score"], report["passing"]) == (10, 2)
    page = (out / "report.html").read_text()
    assert "passed (now fail)" in page and "passed before, at " in page
    # bob's wrong address: the right one only in reports made with --reveal-answers
    revealed = json.loads((out / "bob" / "demo.json").read_text())["results"][0]
    assert revealed["right_answer"]["address"].startswith("10.77.")
    assert json.loads((klass.out / "bob" / "demo.json").read_text())["results"][0]["right_answer"] is None


def test_a_pass_recorded_only_on_the_machine_is_shown_not_counted(klass, tmp_path):
    """Graded into a fresh directory, no grading run saw alice's container-mount pass: the pass her
    machine recorded is shown and earns nothing, unless the instructor says --accept-recorded."""
    alice = klass.machines["alice"].env
    labkit("reset", "demo", "container-mount", env=alice, check=0)
    out = tmp_path / "out"
    run = grade(klass, out)
    assert run.returncode == 1, run.stderr
    assert "alice: ok, 1 recorded passes not counted (demo/container-mount), 5/10 points" in run.stderr
    book = gradebook(out)
    assert (book["alice"]["demo/container-mount"], book["alice"]["score"]) == ("0", "5")
    assert book["alice"]["recorded_not_counted"] == "demo/container-mount"
    scores = json.loads((out / "alice" / "results.json").read_text())
    assert (scores["score"], [t["status"] for t in scores["tests"]]) == (5, ["passed", "passed", "failed"])
    suite = ET.parse(out / "alice" / "junit.xml").getroot().find("testsuite")
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["score"] == "5"
    # the machine's report itself is kept as received, recorded pass included
    raw = json.loads((out / "alice" / "demo.json").read_text())
    assert raw["results"][2]["recorded"]["message"].startswith("host c sees a tmpfs")
    page = (out / "report.html").read_text()
    assert "failed (recorded on the machine, not counted)" in page and "Recorded passes not counted: 1." in page
    assert "no grading run saw it pass" in page

    accepted = tmp_path / "accepted"
    run = grade(klass, accepted, "--accept-recorded")
    assert run.returncode == 1 and "recorded passes counted (--accept-recorded)" in run.stderr, run.stderr
    book = gradebook(accepted)
    assert (book["alice"]["demo/container-mount"], book["alice"]["score"], book["alice"]["recorded_not_counted"]) \
        == ("5", "10", "")
    assert json.loads((accepted / "alice" / "results.json").read_text())["score"] == 10
    assert "counted: --accept-recorded" in (accepted / "report.html").read_text()
    # only live passes enter the ledger, never accepted records
    seen = [json.loads(line) for line in (accepted / "passes-seen.jsonl").read_text().splitlines()]
    assert ("alice", "container-mount") not in {(e["machine"], e["exercise"]) for e in seen}


def test_a_forged_credit_record_earns_nothing(klass, tmp_path):
    """bob, root on his machine, writes a pass of find-address into labkit's credit record there:
    the grading directory that graded his class before (its ledger included) does not count it."""
    credit = Path(klass.machines["bob"].env["LABKIT_STATE_DIR"]) / "demo" / "credit.json"
    original = credit.read_text()
    forged = json.loads(original)
    forged["find-address"] = {"at": 1.0, "time": "2026-01-01T09:00:00+0000", "points": 2, "max_points": 2,
                              "message": "forged", "details": {}, "build": None}
    credit.write_text(json.dumps(forged))
    try:
        out = tmp_path / "out"
        shutil.copytree(klass.out, out)
        run = grade(klass, out)
        assert run.returncode == 1, run.stderr
        assert "bob: ok, 1 recorded passes not counted (demo/find-address), 3/10 points" in run.stderr
        book = gradebook(out)
        assert (book["bob"]["demo/find-address"], book["bob"]["score"]) == ("0", "3")
        assert book["bob"]["recorded_not_counted"] == "demo/find-address"
        bob = json.loads((out / "bob" / "results.json").read_text())
        assert bob["score"] == 3 and bob["tests"][0]["status"] == "failed"
        received = json.loads((out / "bob" / "demo.json").read_text())["results"][0]
        assert received["recorded"]["message"] == "forged"          # shown as the machine sent it
        seen = {(e["machine"], e["exercise"]) for e in map(json.loads, (out / "passes-seen.jsonl").read_text().splitlines())}
        assert ("bob", "find-address") not in seen
    finally:
        credit.write_text(original)


def test_a_machine_that_no_longer_answers_keeps_the_passes_grading_saw(klass, tmp_path):
    """alice's VM is gone (nothing listens on her port now): in the grading directory whose ledger
    saw her passes they keep their points; in a fresh one she has none."""
    inventory = tmp_path / "gone.csv"
    inventory.write_text(f"name,host,port,key\nalice,127.0.0.1,{free_port()},{klass.base / 'client_key'}\n")
    out = tmp_path / "out"
    shutil.copytree(klass.out, out)
    run = grade(klass, out, "--retries", "0", inventory=inventory)
    assert run.returncode == 1 and "alice: unreachable" in run.stderr, run.stderr
    book = gradebook(out)
    assert [book["alice"][f"demo/{ex}"] for ex in EXERCISES] == ["2", "3", "5"]
    assert (book["alice"]["score"], book["alice"]["state"]) == ("10", "unreachable")
    scores = json.loads((out / "alice" / "results.json").read_text())
    assert scores["score"] == 10 and [t["status"] for t in scores["tests"]] == ["passed"] * 3
    page = (out / "report.html").read_text()
    assert "passed (now no report)" in page and "seen live by class grade" in page

    fresh = tmp_path / "fresh"
    assert grade(klass, fresh, "--retries", "0", inventory=inventory).returncode == 1
    assert [gradebook(fresh)["alice"][f"demo/{ex}"] for ex in EXERCISES] == ["", "", ""]
    assert json.loads((fresh / "alice" / "results.json").read_text())["score"] == 0


def test_a_damaged_ledger_stops_the_run_with_one_line(tmp_path):
    """The ledger is evidence: one that cannot be read is an error (exit 2), never silently empty."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "passes-seen.jsonl").write_text('{"machine": "alice", "lab": "demo"}\n')
    inventory = tmp_path / "one.csv"
    inventory.write_text(f"name,host,port\nalice,127.0.0.1,{free_port()}\n")
    run = labkit("class", "grade", "--inventory", str(inventory), "--labs", "demo", "--out", str(out))
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"labkit: {out / 'passes-seen.jsonl'}: line 1: not a ledger entry")
    assert "Traceback" not in run.stderr and not (out / "gradebook.csv").exists()
