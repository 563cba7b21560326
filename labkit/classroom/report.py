"""The class report: one self-contained static HTML page (inline CSS, SVG and a little JS).

It needs no network to be viewed (its Content-Security-Policy even forbids fetching anything):
a heat map of students x exercises (passed / failed / not attempted / unreachable), the pass rate
of each exercise, the most common failure messages, the machines that need attention, and each
student's details. Everything that came from a machine or the inventory is HTML-escaped; the
script uses no data at all, it only filters rows and opens a student's details.
"""

from __future__ import annotations

from html import escape

from labkit import __version__
from labkit.classroom import remote
from labkit.classroom.grade import CELL_STATES, FAILED, LIVE, NOT_ATTEMPTED, PASSED, UNREACHABLE, ClassResult
from labkit.grading import feedback_lines

COLORS = {PASSED: "#2ea44f", FAILED: "#d73a49", NOT_ATTEMPTED: "#f2c94c", UNREACHABLE: "#6a737d"}
SYMBOLS = {PASSED: "\u2713", FAILED: "\u2717", NOT_ATTEMPTED: "\u2013", UNREACHABLE: "?"}
CSS_CLASS = {PASSED: "passed", FAILED: "failed", NOT_ATTEMPTED: "not-attempted", UNREACHABLE: "unreachable"}

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.meta{color:#57606a}table{border-collapse:collapse}th,td{padding:3px 8px;text-align:left;vertical-align:top}
table.list td,table.list th{border-bottom:1px solid #eaeef2;white-space:nowrap}
.heat td.cell{width:30px;height:26px;text-align:center;color:#fff;font-weight:bold;cursor:pointer;border:2px solid #fff;padding:0}
.heat th.ex{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;font-size:12px;padding:4px 2px}
.heat th.lab{text-align:center;border-bottom:2px solid #57606a}
.heat td.rate{font-size:11px;text-align:center;color:#57606a;padding:2px 0}
.cell.passed{background:%(passed)s}.cell.failed{background:%(failed)s}
.cell.not-attempted{background:%(na)s;color:#1f2328}.cell.unreachable{background:%(unreachable)s}
.legend span.swatch{display:inline-block;width:14px;height:14px;vertical-align:middle;margin:0 4px 0 14px;border-radius:2px}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;color:#fff}
.badge.ok{background:#2ea44f}.badge.unreachable,.badge.broken{background:#6a737d}
.state.passed{color:#1a7f37}.state.failed{color:#cf222e}.state.not-attempted{color:#9a6700}.state.unreachable{color:#57606a}
details{margin:6px 0;border:1px solid #d0d7de;border-radius:6px;padding:4px 10px}
summary{cursor:pointer;font-weight:600}pre{margin:0;white-space:pre-wrap;font-size:12px}
#filter{margin:8px 0;padding:4px 8px;width:260px}
""" % {"passed": COLORS[PASSED], "failed": COLORS[FAILED], "na": COLORS[NOT_ATTEMPTED],
       "unreachable": COLORS[UNREACHABLE]}

SCRIPT = """
(function () {
  var box = document.getElementById('filter');
  box.addEventListener('input', function () {
    var q = box.value.toLowerCase();
    document.querySelectorAll('[data-student]').forEach(function (el) {
      el.style.display = el.getAttribute('data-student').toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
  document.querySelectorAll('td.cell, a.student').forEach(function (el) {
    el.addEventListener('click', function () {
      var d = document.getElementById('student-' + el.closest('tr').getAttribute('data-student'));
      if (d) { d.open = true; d.scrollIntoView(); }
    });
  });
})();
"""


def _e(value) -> str:
    return escape("" if value is None else str(value), quote=True)


def _bar(rate: float | None, width: int = 160) -> str:
    filled = 0 if rate is None else round(rate * width)
    return (f'<svg width="{width}" height="12" role="img" aria-label="pass rate">'
            f'<rect width="{width}" height="12" fill="#eaeef2"/>'
            f'<rect width="{filled}" height="12" fill="{COLORS[PASSED]}"/></svg>')


def _percent(rate: float | None, sign: str = "%") -> str:
    return "\u2013" if rate is None else f"{rate * 100:.0f}{sign}"


def _heat_map(result: ClassResult) -> str:
    head1 = ['<th rowspan="2">student</th>']
    head2 = []
    for lab in result.labs:
        head1.append(f'<th class="lab" colspan="{len(lab.exercises)}" title="{_e(lab.title)}">{_e(lab.id)}</th>')
        head2 += [f'<th class="ex" title="{_e(ex.title)}">{_e(ex.id)}</th>' for ex in lab.exercises]
    head1.append('<th rowspan="2">score</th>')
    rows = []
    for s in result.students:
        cells = []
        for lab, ex, cell in result.cells(s):
            tip = f"{s.name} \u00b7 {lab.id}/{ex.id}: {cell.state} ({cell.points}/{cell.max_points}) \u2014 {cell.summary}"
            cells.append(f'<td class="cell {CSS_CLASS[cell.state]}" data-state="{_e(cell.state)}" '
                         f'title="{_e(tip)}">{SYMBOLS[cell.state]}</td>')
        score, max_score = result.totals(s)
        rows.append(f'<tr data-student="{_e(s.name)}"><th><a class="student" href="#student-{_e(s.name)}">'
                    f'{_e(s.name)}</a></th>{"".join(cells)}<td>{score}/{max_score}</td></tr>')
    rates = ['<th title="per cent of the students whose machine answered">pass %</th>']
    rates += [f'<td class="rate">{_percent(r["rate"], sign="")}</td>' for r in result.pass_rates()]
    rates.append("<td></td>")
    return (f'<table class="heat" id="heatmap"><thead><tr>{"".join(head1)}</tr><tr>{"".join(head2)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody><tfoot><tr>{"".join(rates)}</tr></tfoot></table>')


def _pass_rates(result: ClassResult) -> str:
    rows = []
    for r in result.pass_rates():
        pct = _percent(r["rate"])
        rows.append(f'<tr><td>{_e(r["lab"])}/{_e(r["exercise"])}</td><td>{_e(r["title"])}</td>'
                    f'<td>{_bar(r["rate"])}</td><td>{pct}</td><td>{r["passed"]} of {r["graded"]}</td>'
                    f'<td>{r["failed"]}</td><td>{r["not_attempted"]}</td><td>{r["unreachable"]}</td></tr>')
    return ('<table class="list" id="pass-rates"><thead><tr><th>exercise</th><th>title</th><th></th><th>pass rate</th>'
            '<th>passed</th><th>failed</th><th>not attempted</th><th>unreachable</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            '<p class="meta">The rate counts the students whose machine answered; unreachable machines are left out.</p>')


def _common_failures(result: ClassResult) -> str:
    failures = result.common_failures()
    if not failures:
        return '<p id="common-failures">No failed checks.</p>'
    rows = [f'<tr><td>{f["count"]}</td><td>{_e(f["lab"])}/{_e(f["exercise"])}</td><td><pre>{_e(f["message"])}</pre></td>'
            f'<td>{_e(", ".join(f["students"]))}</td></tr>' for f in failures]
    return ('<table class="list" id="common-failures"><thead><tr><th>students</th><th>exercise</th><th>message</th>'
            f'<th>who</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _attention(result: ClassResult) -> str:
    rows = []
    for s in result.students:
        for lab, o in s.outcomes.items():
            if o.outcome != remote.OK:
                rows.append(f'<tr data-student="{_e(s.name)}"><td>{_e(s.name)}</td><td>{_e(s.machine.host)}:{s.machine.port}</td>'
                            f'<td>{_e(lab)}</td><td><span class="badge {_e(o.outcome)}">{_e(o.outcome)}</span></td>'
                            f'<td><pre>{_e(o.reason)}</pre></td><td>{o.attempts}</td></tr>')
    if not rows:
        return '<p id="attention">Every machine answered.</p>'
    return ('<table class="list" id="attention"><thead><tr><th>student</th><th>machine</th><th>lab</th><th>state</th>'
            f'<th>reason</th><th>attempts</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _student_details(result: ClassResult) -> str:
    parts = []
    for s in result.students:
        score, max_score = result.totals(s)
        rows = []
        for lab, ex, cell in result.cells(s):
            lines = feedback_lines(cell.result, recorded=False) if cell.result else [cell.message]
            feedback = "\n".join(lines + cell.notes())
            live = f" (now {cell.live or 'no report'})" if cell.state == PASSED and cell.basis != LIVE else ""
            if cell.uncounted_record:
                live = " (recorded on the machine, not counted)"
            rows.append(f'<tr><td>{_e(lab.id)}/{_e(ex.id)}</td><td class="state {CSS_CLASS[cell.state]}">'
                        f'{_e(cell.state)}{_e(live)}</td>'
                        f'<td>{cell.points}/{cell.max_points}</td><td><pre>{_e(feedback)}</pre></td></tr>')
        hosts = sorted({o.report["host"] for o in s.outcomes.values() if o.report})
        seen_as = f" \u00b7 reports from host {_e(', '.join(hosts))}" if hosts else ""
        parts.append(
            f'<details id="student-{_e(s.name)}" data-student="{_e(s.name)}"><summary>{_e(s.name)} \u2014 {score}/{max_score} '
            f'<span class="badge {_e(s.state)}">{_e(s.state)}</span></summary>'
            f'<p class="meta">{_e(s.machine.user)}@{_e(s.machine.host)}:{s.machine.port}{seen_as}</p>'
            '<table class="list"><thead><tr><th>exercise</th><th>state</th><th>points</th><th>feedback</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></details>')
    return "".join(parts)


def _trust(result: ClassResult) -> str:
    uncounted = sum(len(result.uncounted(s)) for s in result.students)
    if result.accept_recorded:
        rule = ("Passes count when the check passed live in this run, when an earlier grading run into this "
                "directory saw it pass, or when the machine reports it as recorded (--accept-recorded).")
    else:
        rule = ("Passes count when the check passed live in this run or an earlier grading run into this "
                "directory saw it pass; a pass only recorded on a student's machine is shown, not counted.")
    return _e(rule + f" Recorded passes not counted: {uncounted}.")


def render(result: ClassResult) -> str:
    counts = {kind: sum(1 for s in result.students if s.state == kind)
              for kind in (remote.OK, remote.UNREACHABLE, remote.BROKEN)}
    legend = "".join(f'<span class="swatch" style="background:{COLORS[st]}"></span>{_e(st)}' for st in CELL_STATES)
    labs = ", ".join(lab.id for lab in result.labs)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>labkit class report</title><style>{STYLE}</style></head>
<body>
<h1>labkit class report</h1>
<p class="meta" id="summary">{len(result.students)} students \u00b7 labs: {_e(labs)} \u00b7 graded {_e(result.time)}
in {result.seconds:.1f} s \u00b7 machines: {counts[remote.OK]} ok, {counts[remote.UNREACHABLE]} unreachable,
{counts[remote.BROKEN]} broken \u00b7 labkit {_e(__version__)}</p>
<p class="meta" id="trust">{_trust(result)}</p>
<input id="filter" type="search" placeholder="filter students" aria-label="filter students">
<h2>Students \u00d7 exercises</h2>
<p class="legend">{legend}</p>
{_heat_map(result)}
<h2>Pass rate per exercise</h2>
{_pass_rates(result)}
<h2>Most common failures</h2>
{_common_failures(result)}
<h2>Machines that need attention</h2>
{_attention(result)}
<h2>Students</h2>
{_student_details(result)}
<script>{SCRIPT}</script>
</body></html>
"""
