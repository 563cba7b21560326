"""A model of iptables rulesets, parsed from iptables-save output or iptables-restore input.

Both forms parse to the same model, so a ruleset reads the same whether it was written by kube-proxy
(`-m tcp -p tcp -d 172.30.0.41 --dport 80`, probabilities with 10 decimals, `MARK --or-mark`,
`recent --rcheck --name X`) or printed back by iptables-save (`-d 172.30.0.41/32 -p tcp -m tcp
--dport 80`, 11 decimals such as 0.33333333349 because xt_statistic keeps lround(p * 2^31),
`MARK --set-xmark 0x4000/0x4000`, `recent ... --mask 255.255.255.255 --rsource`,
`nfacct --nfacct-name  X`, `REJECT --reject-with icmp-port-unreachable`).

A rule is its chain, an ordered list of conditions (Cond), and a target with its options. Options
labkit does not model are kept as "other" conditions and reported by the tracer. The unquoted
multi-word comments of kube-proxy's fake iptables (`--comment kubernetes service portals -j …`)
are read as one comment.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import shlex
import socket
from dataclasses import dataclass, field

from labkit.errors import LabkitError

BUILTIN_CHAINS = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "raw": ("PREROUTING", "OUTPUT"),
    "security": ("INPUT", "FORWARD", "OUTPUT"),
}


@dataclass
class Cond:
    """One condition of a rule. kind: src, dst, proto, in, out, dport, sport, src-type, dst-type,
    mark, ctstate, statistic, recent, nfacct (always matches) or other (not modelled)."""
    kind: str
    negated: bool
    value: object
    text: str                      # the option as written, e.g. "! -s 10.0.0.0/8"


@dataclass
class Rule:
    chain: str
    text: str                      # the rule as given, "-A CHAIN ..."
    conds: list[Cond]
    target: str | None             # None: no -j (a counting rule)
    goto: bool = False             # -g instead of -j
    target_args: list[str] = field(default_factory=list)
    comment: str | None = None

    def target_option(self, name: str) -> str | None:
        args = self.target_args
        for i, word in enumerate(args[:-1]):
            if word == name:
                return args[i + 1]
        return None

    def has_target_flag(self, name: str) -> bool:
        return name in self.target_args

    def cond(self, kind: str) -> Cond | None:
        return next((c for c in self.conds if c.kind == kind), None)

    @property
    def dst_exact(self) -> int | None:
        """The single destination address this rule requires (for indexing), if any."""
        for c in self.conds:
            if c.kind == "dst" and not c.negated and c.value.num_addresses == 1:
                return int(c.value.network_address)
        return None


@dataclass
class Chain:
    """A chain and its rules. In a lazily parsed ruleset (parse(text, lazy=True)) a chain finds its
    "-A" lines in the table's text when first used, and keeps each rule as its line until it is
    needed: `rule(i)` parses one, `rules` all of them."""
    name: str
    policy: str | None = None      # built-in chains: ACCEPT / DROP
    _source: str | None = field(default=None, repr=False)      # lazily: the table's text
    _list: list = field(default_factory=list, repr=False)      # Rule, or (line number or None, "-A ..." line)
    _index: tuple | None = field(default=None, repr=False)

    @property
    def _items(self) -> list:
        if self._source is not None:
            body, self._source = self._source, None
            needle = f"\n-A {self.name} "
            at = body.find(needle)
            while at >= 0:
                end = body.find("\n", at + 1)
                self._list.append((None, body[at + 1:end].rstrip()))
                at = body.find(needle, end)
        return self._list

    @property
    def rules(self) -> list[Rule]:
        items = self._items
        for i, item in enumerate(items):
            if not isinstance(item, Rule):
                items[i] = _parse_line(*item)
        return items

    def rule(self, i: int) -> Rule:
        item = self._items[i]
        if not isinstance(item, Rule):
            item = self._items[i] = _parse_line(*item)
        return item

    def candidates(self, dst: int) -> list[int]:
        """Indices of the rules that can match a packet to `dst`, in order: rules that require
        another single destination address are left out (an index keeps a 10,000-service
        KUBE-SERVICES chain quick to walk; unparsed rules are indexed from their text)."""
        if self._index is None:
            generic, by_dst = [], {}
            for i, item in enumerate(self._items):
                exact = item.dst_exact if isinstance(item, Rule) else _dst_exact_of_line(item[1])
                if exact is None:
                    generic.append(i)
                else:
                    by_dst.setdefault(exact, []).append(i)
            self._index = (generic, by_dst)
        generic, by_dst = self._index
        specific = by_dst.get(dst)
        return sorted(generic + specific) if specific else generic


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_DST = re.compile(r"(?:^|\s)(!\s+)?(?:-d|--destination|--dst)\s+(\S+)")


def _dst_exact_of_line(line: str) -> int | None:
    """Rule.dst_exact from a rule's text, without parsing it (quoted comments are skipped). Only a
    rule with one plain -d of a single address gets one; anything else is a candidate for every
    destination, which is always safe."""
    found = _DST.findall(_QUOTED.sub('""', line) if '"' in line else line)
    if len(found) != 1 or found[0][0]:
        return None
    return _single_address(found[0][1])


def _single_address(text: str) -> int | None:
    address, _, prefix = text.partition("/")
    if ":" not in address:
        if prefix not in ("", "32"):
            return None
        try:
            return int.from_bytes(socket.inet_aton(address), "big") if address.count(".") == 3 else None
        except OSError:
            return None
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    return int(net.network_address) if net.num_addresses == 1 else None


def _parse_line(number: int | None, line: str) -> Rule:
    try:
        return parse_rule(line)
    except LabkitError as exc:
        raise LabkitError(f"line {number}: {exc}" if number else str(exc)) from None


@dataclass
class Table:
    name: str
    _chains: dict = field(default_factory=dict, repr=False)
    _source: str | None = field(default=None, repr=False)     # lazily: the table's text
    _deleted: set = field(default_factory=set, repr=False)    # lazily: chains the text deletes (-X)

    @property
    def chains(self) -> dict[str, Chain]:
        if self._source is not None:
            body, self._source = self._source, None
            at = body.find("\n:")
            while at >= 0:
                end = body.find("\n", at + 1)
                name = body[at + 2:end].split(maxsplit=1)[0]
                if name not in self._chains and name not in self._deleted:
                    self._declare(body, name, at, end)
                at = body.find("\n:", end)
        return self._chains

    def chain(self, name: str, create: bool = False) -> Chain | None:
        found = self._chains.get(name)
        if found is None and self._source is not None and name not in self._deleted:
            at = self._source.find(f"\n:{name} ")
            if at >= 0:
                found = self._declare(self._source, name, at, self._source.find("\n", at + 1))
        if found is None and create:
            found = self._chains[name] = Chain(name)
        return found

    def _declare(self, body: str, name: str, at: int, end: int) -> Chain:
        parts = body[at + 2:end].split()
        chain = self._chains.get(name)
        if chain is None:
            chain = Chain(name)
        if len(parts) > 1 and parts[1] != "-":
            chain.policy = parts[1]
        chain._source = body
        self._chains[name] = chain
        return chain


@dataclass
class Ruleset:
    tables: dict[str, Table] = field(default_factory=dict)
    deleted: dict[str, list[str]] = field(default_factory=dict)     # "-X CHAIN" lines of restore input

    def table(self, name: str, create: bool = False) -> Table | None:
        if name not in self.tables and create:
            table = Table(name)
            for builtin in BUILTIN_CHAINS.get(name, ()):
                table.chains[builtin] = Chain(builtin, "ACCEPT")
            self.tables[name] = table
        return self.tables.get(name)

    def chain(self, table: str, name: str) -> Chain | None:
        t = self.tables.get(table)
        return t.chain(name) if t else None

    def chain_names(self, table: str) -> list[str]:
        t = self.tables.get(table)
        return list(t.chains) if t else []

    def ensure_rule_first(self, table: str, chain: str, args: list[str]) -> bool:
        """Like `iptables -C` then `-I CHAIN 1` (kube-proxy's EnsureRule(Prepend)); True if added."""
        c = self.table(table, create=True).chain(chain, create=True)
        text = f"-A {chain} " + " ".join(quote_word(a) for a in args)
        rule = parse_rule(text)
        if any(same_rule(rule, r) for r in c.rules):
            return False
        c._items.insert(0, rule)
        c._index = None
        return True


def same_rule(a: Rule, b: Rule) -> bool:
    return ([(c.kind, c.negated, str(c.value)) for c in a.conds], a.target, a.target_args, a.comment) == \
        ([(c.kind, c.negated, str(c.value)) for c in b.conds], b.target, b.target_args, b.comment)


def quote_word(word: str) -> str:
    return f'"{word}"' if (" " in word or word == "") else word


def _split(line: str) -> list[str]:
    if '"' not in line and "'" not in line and "\\" not in line:
        return line.split()
    return list(_shell_words(line))


@functools.lru_cache(maxsize=1 << 16)
def _shell_words(line: str) -> tuple[str, ...]:
    """shlex.split of a quoted line (a rule with a comment), remembered: checks and resets read
    the same rule sets again and again, and shlex costs ~0.1 ms a line."""
    try:
        return tuple(shlex.split(line))
    except ValueError as exc:
        raise LabkitError(f"cannot parse rule {line!r}: {exc}") from None


def parse(text: str, *, lazy: bool = False) -> Ruleset:
    """A Ruleset from iptables-save output or iptables-restore input (several tables).

    With `lazy`, a file made only of tables, chain lines, "-A" rules and "-X" deletions (what
    iptables-save prints and kube-proxy restores) is read without parsing its rules: each chain
    finds and parses its own when first used, so a tracer following one packet through a
    10,000-service ruleset touches a few dozen of them. A malformed rule is then reported when it
    is reached. Other files are parsed in full."""
    ruleset = Ruleset()
    table: Table | None = None
    if lazy:
        found = _parse_lazily(text)
        if found is not None:
            return found
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        try:
            if line.startswith("*"):
                table = ruleset.table(line[1:].strip(), create=True)
                continue
            if line == "COMMIT":
                table = None
                continue
            if table is None:
                raise LabkitError("rule outside a table (missing *table line)")
            if line.startswith(":"):
                parts = line[1:].split()
                name = parts[0]
                policy = parts[1] if len(parts) > 1 and parts[1] != "-" else None
                chain = table.chain(name, create=True)
                if policy:
                    chain.policy = policy
                chain._items.clear()           # a chain line in restore input flushes the chain
                chain._index = None
                continue
            words = _split(line)
            op = words[0]
            if op in ("-A", "--append", "-I", "--insert"):
                if len(words) < 2:
                    raise LabkitError("no chain name")
                chain = table.chain(words[1], create=True)
                position = None
                rest = words[2:]
                if op in ("-I", "--insert"):
                    position = 0
                    if rest and rest[0].isdigit():
                        position, rest = int(rest[0]) - 1, rest[1:]
                rule = _build(words[1], line, rest)
                if position is None:
                    chain._items.append(rule)
                else:
                    chain._items.insert(position, rule)
                chain._index = None
            elif op in ("-N", "--new-chain"):
                table.chain(words[1], create=True)
            elif op in ("-X", "--delete-chain"):
                names = words[1:] or [n for n, c in table.chains.items() if c.policy is None]
                for name in names:
                    table.chains.pop(name, None)
                    ruleset.deleted.setdefault(table.name, []).append(name)
            elif op in ("-F", "--flush"):
                for c in ([table.chain(words[1])] if len(words) > 1 else table.chains.values()):
                    if c is not None:
                        c._items.clear()
                        c._index = None
            else:
                raise LabkitError(f"unknown command {op}")
        except LabkitError as exc:
            raise LabkitError(f"line {number}: {exc}: {line}") from None
    return ruleset


_NOT_SIMPLE = re.compile(r"\n(?:-[IFNRD-]|[ \t])")     # inserts, flushes, new chains, long options, indents


def _parse_lazily(text: str) -> Ruleset | None:
    """parse(lazy=True) for files of the simple form; None for anything else."""
    text = "\n" + (text.replace("\r", "") if "\r" in text else text)
    if _NOT_SIMPLE.search(text):
        return None
    ruleset = Ruleset()
    at = text.find("\n*")
    if at < 0 or any(l.strip() and not l.startswith("#") for l in text[:at].split("\n")):
        return None
    while at >= 0:
        eol = text.find("\n", at + 1)
        end = text.find("\nCOMMIT", at)
        name = text[at + 2:eol].strip()
        if eol < 0 or end < 0 or name in ruleset.tables:
            return None
        table = ruleset.table(name, create=True)
        body = text[eol:end + 1]
        deleted = body.find("\n-X")
        while deleted >= 0:
            line_end = body.find("\n", deleted + 1)
            for chain_name in body[deleted + 3:line_end].split():
                table._deleted.add(chain_name)
                ruleset.deleted.setdefault(name, []).append(chain_name)
            deleted = body.find("\n-X", line_end)
        for builtin in list(table._chains):
            table._chains[builtin]._source = body
            declared = body.find(f"\n:{builtin} ")
            if declared >= 0:
                table._declare(body, builtin, declared, body.find("\n", declared + 1))
        table._source = body
        at = text.find("\n*", end + 1)
        rest = text[end + 8:at if at >= 0 else len(text)]
        if any(l.strip() and not l.startswith("#") for l in rest.split("\n")):
            return None
    return ruleset


def parse_rule(text: str) -> Rule:
    """One "-A CHAIN ..." line."""
    words = _split(text)
    if len(words) < 2 or words[0] not in ("-A", "--append"):
        raise LabkitError(f"not a rule (\"-A CHAIN ...\"): {text}")
    return _build(words[1], text.strip(), words[2:])


# option -> (kind, number of arguments)
_OPTIONS = {
    "-s": ("src", 1), "--source": ("src", 1), "--src": ("src", 1),
    "-d": ("dst", 1), "--destination": ("dst", 1), "--dst": ("dst", 1),
    "-p": ("proto", 1), "--protocol": ("proto", 1),
    "-i": ("in", 1), "--in-interface": ("in", 1),
    "-o": ("out", 1), "--out-interface": ("out", 1),
    "--dport": ("dport", 1), "--destination-port": ("dport", 1),
    "--sport": ("sport", 1), "--source-port": ("sport", 1),
    "--dports": ("dport", 1), "--destination-ports": ("dport", 1),
    "--sports": ("sport", 1), "--source-ports": ("sport", 1),
    "--src-type": ("src-type", 1), "--dst-type": ("dst-type", 1),
    "--mark": ("mark", 1),
    "--ctstate": ("ctstate", 1), "--state": ("ctstate", 1),
    "--nfacct-name": ("nfacct", 1),
    "--comment": ("comment", 1),
}
_STATISTIC = ("--mode", "--probability", "--every", "--packet")
_RECENT = ("--name", "--set", "--rcheck", "--update", "--remove", "--seconds", "--reap", "--hitcount",
           "--rttl", "--rsource", "--rdest", "--mask")
_RECENT_ARGS = ("--name", "--seconds", "--hitcount", "--mask")


def _ports(text: str) -> list[tuple[int, int]]:
    ranges = []
    for part in text.split(","):
        lo, _, hi = part.partition(":")
        ranges.append((int(lo or 0), int(hi or 65535) if _ else int(lo)))
    return ranges


def _network(text: str):
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise LabkitError(f"bad address {text!r}") from None


# Rules built before, by their chain and words: checks, resets and the mutant runs parse the same
# nodes' rules again and again (the kube-proxy lab's reset compares every node's tables with the
# rules the lab left, for each exercise), and building a rule from its words was most of a parse.
# A Rule is never changed once built (nothing assigns to its fields outside _build_rule), so
# rulesets share them; a line that does not build is not kept, so its error is made afresh.
_BUILT: dict[tuple[str, ...], Rule] = {}
_BUILT_MAX = 1 << 16


def _build(chain: str, text: str, words: list[str]) -> Rule:
    key = (chain, text, *words)
    rule = _BUILT.get(key)
    if rule is None:
        rule = _build_rule(chain, text, words)
        if len(_BUILT) >= _BUILT_MAX:
            _BUILT.clear()
        _BUILT[key] = rule
    return rule


def _build_rule(chain: str, text: str, words: list[str]) -> Rule:
    conds: list[Cond] = []
    rule = Rule(chain=chain, text=text if text.startswith("-A") else f"-A {chain} " + " ".join(words), conds=conds, target=None)
    module = None
    statistic: dict | None = None
    recent: dict | None = None
    negate = False
    i, n = 0, len(words)

    def value_words(start: int) -> int:
        j = start
        while j < n and words[j] != "!" and not words[j].startswith("-"):
            j += 1
        return j

    while i < n:
        word = words[i]
        if word == "!":
            negate = True
            i += 1
            continue
        if word in ("-m", "--match") and i + 1 < n:
            module = words[i + 1]
            if module == "statistic":
                statistic = {}
                conds.append(Cond("statistic", False, statistic, "-m statistic"))
            elif module == "recent":
                recent = {"action": None, "name": "DEFAULT", "seconds": None, "reap": False, "side": "rsource"}
                conds.append(Cond("recent", False, recent, "-m recent"))
            i += 2
            continue
        if word in ("-j", "--jump", "-g", "--goto"):
            if i + 1 >= n:
                raise LabkitError(f"{word} needs a target")
            rule.target = words[i + 1]
            rule.goto = word in ("-g", "--goto")
            rule.target_args = words[i + 2:]
            break
        neg, negate = negate, False
        prefix = "! " if neg else ""
        if module == "statistic" and word in _STATISTIC and i + 1 < n:
            statistic[word[2:]] = words[i + 1]
            if neg:
                conds[-1].negated = True
            i += 2
            continue
        if module == "recent" and word in _RECENT:
            if word in _RECENT_ARGS and i + 1 < n:
                recent[word[2:]] = words[i + 1] if word != "--seconds" else int(words[i + 1])
                i += 2
            else:
                if word in ("--set", "--rcheck", "--update", "--remove"):
                    recent["action"] = word[2:]
                    for c in conds:
                        if c.value is recent:
                            c.negated = neg
                elif word == "--reap":
                    recent["reap"] = True
                elif word in ("--rsource", "--rdest"):
                    recent["side"] = word[2:]
                i += 1
            continue
        spec = _OPTIONS.get(word)
        if spec is None:
            j = value_words(i + 1)
            conds.append(Cond("other", neg, (module, word, words[i + 1:j]), prefix + " ".join(words[i:j])))
            i = j
            continue
        kind, _ = spec
        if i + 1 >= n:
            raise LabkitError(f"{word} needs a value")
        value = words[i + 1]
        i += 2
        if kind == "comment":
            # kube-proxy's fake iptables writes multi-word comments without quotes
            j = value_words(i)
            rule.comment = " ".join([value] + words[i:j])
            i = j
            continue
        if kind in ("src", "dst"):
            parsed = _network(value)
        elif kind in ("dport", "sport"):
            try:
                parsed = _ports(value)
            except ValueError:
                raise LabkitError(f"bad port {value!r}") from None
        elif kind in ("src-type", "dst-type", "ctstate"):
            parsed = frozenset(value.split(","))
        elif kind == "mark":
            v, _, m = value.partition("/")
            parsed = (int(v, 0), int(m, 0) if m else 0xFFFFFFFF)
        elif kind == "proto":
            parsed = value.lower()
        else:
            parsed = value
        conds.append(Cond(kind, neg, parsed, f"{prefix}{word} {value}"))
    for c in conds:
        if c.kind == "statistic":
            stat = c.value
            if "probability" in stat:
                stat["p"] = float(stat["probability"])
            elif "every" in stat:
                stat["p"] = 1.0 / int(stat["every"])
            else:
                stat["p"] = 1.0
            c.text = ("! " if c.negated else "") + f"statistic p={stat.get('probability', stat['p'])}"
        elif c.kind == "recent":
            r = c.value
            c.text = ("! " if c.negated else "") + f"recent --{r['action']} --name {r['name']}" + \
                (f" --seconds {r['seconds']}" if r["seconds"] else "")
    return rule
