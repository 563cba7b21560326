"""kube-proxy's own canonical order for iptables-restore text (`sortIPTablesRules`).

kube-proxy visits Services in Go map order, so two syncs of the same state list rules in
different orders. Its unit tests (pkg/proxy/iptables/proxier_test.go) compare texts after
`sortIPTablesRules`, which parses the text with `ParseIPTablesDump`
(pkg/util/iptables/testing/parse.go), then:
- sorts tables by name;
- sorts chains: KUBE-NODEPORTS, then KUBE-SERVICES, then other KUBE-* alphabetically, then the rest;
- stable-sorts the rules of KUBE-NODEPORTS and KUBE-SERVICES (filter and nat) by the service
  name in their comment (the text before the first space or colon), keeping nat KUBE-SERVICES'
  "must be the last rule" jump last;
- prints all chain lines, then all rules chain by chain, then the "-X" lines.
This module re-implements both functions, including Go's sort.SliceStable algorithm (insertion
sort in blocks of 20, then SymMerge), so the result is the same even for rules without comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from labkit.errors import LabkitError

_TABLE = re.compile(r"^\*(.*)$")
_CHAIN = re.compile(r"^:([^ ]*) - \[([0-9]*):([0-9]*)\]$")
_RULE = re.compile(r"^-A ([^ ]*) (.*)$")
_DELETE = re.compile(r"^-X (.*)$")
_WORD = re.compile(r'(?:^|\s)("[^"]*"|[^"]\S*)')     # wordRegex: a word or a quoted string


@dataclass
class _Rule:
    raw: str
    comment: str | None


@dataclass
class _Chain:
    name: str
    packets: str
    bytes: str
    rules: list[_Rule] = field(default_factory=list)
    deleted: bool = False


@dataclass
class _Table:
    name: str
    chains: list[_Chain] = field(default_factory=list)

    def chain(self, name: str) -> _Chain | None:
        return next((c for c in self.chains if c.name == name), None)


def rule_comment(rule: str) -> str | None:
    """The --comment value as ParseRule reads it (one word, or one quoted string without quotes)."""
    words = [m.group(1).strip('"') for m in _WORD.finditer(rule)]
    for i, word in enumerate(words[:-1]):
        if word == "--comment":
            return words[i + 1]
    return None


def parse_dump(text: str) -> list[_Table]:
    """ParseIPTablesDump: tables, chain declarations, "-A" rules and "-X" deletions."""
    tables: list[_Table] = []
    state = "table"
    for line in text.strip("\n").split("\n"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if state == "table":
            m = _TABLE.match(line)
            if not m:
                raise LabkitError(f"could not parse iptables data (table {len(tables) + 1} starts with {line!r} not a table name)")
            tables.append(_Table(m.group(1)))
            state = "chains"
            continue
        table = tables[-1]
        if state == "chains":
            m = _CHAIN.match(line)
            if m:
                table.chains.append(_Chain(m.group(1), m.group(2), m.group(3)))
                continue
            state = "rules"
        m = _RULE.match(line)
        if m:
            chain = table.chain(m.group(1))
            if chain is None:
                raise LabkitError(f"error parsing rule {line!r}: no such chain {m.group(1)!r}")
            if chain.deleted:
                raise LabkitError(f"cannot add rules to deleted chain {m.group(1)!r}")
            chain.rules.append(_Rule(line, rule_comment(line)))
        elif _DELETE.match(line):
            name = _DELETE.match(line).group(1)
            chain = table.chain(name)
            if chain is None:
                raise LabkitError(f"error parsing rule {line!r}: no such chain {name!r}")
            if chain.rules:
                raise LabkitError(f"cannot delete chain {name!r} after adding rules")
            chain.deleted = True
        elif line == "COMMIT":
            state = "table"
        else:
            raise LabkitError(f"error parsing rule {line!r}")
    if state != "table":
        raise LabkitError("could not parse iptables data (no COMMIT line?)")
    return tables


def dump_string(tables: list[_Table]) -> str:
    out = []
    for t in tables:
        out.append(f"*{t.name}")
        out += [f":{c.name} - [{c.packets}:{c.bytes}]" for c in t.chains]
        out += [r.raw for c in t.chains for r in c.rules]
        out += [f"-X {c.name}" for c in t.chains if c.deleted]
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def _service_name(comment: str) -> str:
    cut = [i for i in (comment.find(" "), comment.find(":")) if i != -1]
    return comment[:min(cut)] if cut else comment


def _order_by_comment(r1: _Rule, r2: _Rule) -> bool:
    if r1.comment is None or r2.comment is None:
        return False
    return _service_name(r1.comment) < _service_name(r2.comment)


def _is_last(rule: _Rule) -> bool:
    return rule.comment is not None and "must be the last rule" in rule.comment


def _nat_services_less(r1: _Rule, r2: _Rule) -> bool:
    if _is_last(r1):
        return False
    if _is_last(r2):
        return True
    return _order_by_comment(r1, r2)


def _chain_rank(name: str) -> tuple[int, str]:
    if name == "KUBE-NODEPORTS":
        return (0, "")
    if name == "KUBE-SERVICES":
        return (1, "")
    return (2 if name.startswith("KUBE-") else 3, name)


def sort_rules(text: str) -> str:
    """sortIPTablesRules: `text` in kube-proxy's canonical order."""
    tables = parse_dump(text)
    tables.sort(key=lambda t: t.name)
    for t in tables:
        t.chains.sort(key=lambda c: _chain_rank(c.name))
    by_name = {t.name: t for t in tables}
    for table_name, chain_name, less in (("filter", "KUBE-NODEPORTS", _order_by_comment),
                                         ("nat", "KUBE-NODEPORTS", _order_by_comment),
                                         ("filter", "KUBE-SERVICES", _order_by_comment),
                                         ("nat", "KUBE-SERVICES", _nat_services_less)):
        table = by_name.get(table_name)
        chain = table.chain(chain_name) if table else None
        if chain is not None:
            go_stable_sort(chain.rules, less)
    return dump_string(tables)


def chain_rules(text: str, table: str, chain: str) -> str:
    """What assertIPTablesChainEqual compares: the raw rules of one chain, each ending in a newline."""
    for t in parse_dump(text):
        if t.name == table:
            c = t.chain(chain)
            return "".join(r.raw + "\n" for r in c.rules) if c else ""
    return ""


# -- Go's sort.SliceStable (sort/zsortfunc.go) ---------------------------------------------------

def go_stable_sort(data: list, less) -> None:
    n = len(data)
    block = 20
    a, b = 0, block
    while b <= n:
        _insertion_sort(data, less, a, b)
        a, b = b, b + block
    _insertion_sort(data, less, a, n)
    while block < n:
        a, b = 0, 2 * block
        while b <= n:
            _sym_merge(data, less, a, a + block, b)
            a, b = b, b + 2 * block
        m = a + block
        if m < n:
            _sym_merge(data, less, a, m, n)
        block *= 2


def _insertion_sort(data, less, a, b):
    for i in range(a + 1, b):
        j = i
        while j > a and less(data[j], data[j - 1]):
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1


def _sym_merge(data, less, a, m, b):
    if m - a == 1:
        i, j = m, b
        while i < j:
            h = (i + j) >> 1
            if less(data[h], data[a]):
                i = h + 1
            else:
                j = h
        for k in range(a, i - 1):
            data[k], data[k + 1] = data[k + 1], data[k]
        return
    if b - m == 1:
        i, j = a, m
        while i < j:
            h = (i + j) >> 1
            if not less(data[m], data[h]):
                i = h + 1
            else:
                j = h
        for k in range(m, i, -1):
            data[k], data[k - 1] = data[k - 1], data[k]
        return
    mid = (a + b) >> 1
    n = mid + m
    if m > mid:
        start, r = n - b, mid
    else:
        start, r = a, m
    p = n - 1
    while start < r:
        c = (start + r) >> 1
        if not less(data[p - c], data[c]):
            start = c + 1
        else:
            r = c
    end = n - start
    if start < m < end:
        _rotate(data, start, m, end)
    if a < start < mid:
        _sym_merge(data, less, a, start, mid)
    if mid < end < b:
        _sym_merge(data, less, mid, end, b)


def _swap_range(data, a, b, n):
    for i in range(n):
        data[a + i], data[b + i] = data[b + i], data[a + i]


def _rotate(data, a, m, b):
    i, j = m - a, b - m
    while i != j:
        if i > j:
            _swap_range(data, m - i, m, j)
            i -= j
        else:
            _swap_range(data, m - i, m + j - i, i)
            j -= i
    _swap_range(data, m - i, m, i)
