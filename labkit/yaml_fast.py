"""Large YAML read fast: rapidyaml's C++ parser, where it gives exactly what PyYAML gives.

PyYAML (even with libyaml's parser) builds every node in Python: a 24 MB multi-document file of
Services and EndpointSlices takes ~15 s. rapidyaml parses the same text and writes it out as JSON in
about a second, and the json module reads that back fast. But rapidyaml follows YAML 1.2's core
schema where PyYAML's SafeLoader follows YAML 1.1 (`yes`, `on`, `0777`, `12:30`, `2025-06-01`, `~`
and `1e3` are read differently), and it accepts some text PyYAML refuses. So `documents()` takes
the fast path only for text in which nothing can be read differently, decided by a conservative
scan of its lines: each line's key and value must be plain scalars whose YAML 1.1 reading is a
string or one of the JSON-like values both share (decimal integers and fractions, true, false,
null, the empty value), quoted strings closed on their line with JSON's escapes only, or `{}` and
`[]`; keys must be strings. Anything else (anchors, tags, block scalars, flow collections,
directives, tabs, numbers as keys, ...) sends the whole text to PyYAML, as does anything rapidyaml
refuses: `documents()` returns None and the caller reads the text as before. False alarms only cost
speed; tests/test_yaml_fast.py compares both readers on generated, broken and shipped files.
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager

import yaml

import ryml

_SAFE_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?|\.[0-9]+")


def _pyyaml_pattern(tag: str) -> str:
    """PyYAML's own implicit-resolver pattern for `tag` (SafeLoader's YAML 1.1 rules)."""
    for resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.values():
        for found, regexp in resolvers:
            if found == tag:
                return "(?x:" + regexp.pattern.strip()[1:-1] + ")"  # written for re.X; without ^ $
    raise LookupError(tag)


# Numbers, dates and times PyYAML reads, and numbers as rapidyaml reads them.
_NUMBER = re.compile("|".join(
    [_pyyaml_pattern("tag:yaml.org,2002:" + tag) for tag in ("int", "float", "timestamp")]
    + [r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"]))
_WORDS = (r"yes|Yes|YES|no|No|NO|True|TRUE|False|FALSE|on|On|ON|off|Off|OFF|y|Y|n|N|~|Null|NULL"
          r"|(?i:[-+]?\.?(?:inf|infinity|nan))")
# Most lines of a Kubernetes object need no closer look: an identifier-like key and a value that is
# empty, text starting with a letter, a plain decimal, an address, a UID, a quoted string, {} or [].
_SIMPLE_KEY = rf"(?!(?:{_WORDS}|true|false|null):)[A-Za-z_][A-Za-z0-9_./-]*:"
_SIMPLE_VALUE = "|".join([
    rf"(?!(?:{_WORDS})[ ]*\n)[A-Za-z_/][^\n:#]*(?::[^ \n#][^\n:#]*)*",
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?",
    r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+(?:/[0-9]+)?",
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    r"[0-9a-fA-F:]*::[0-9a-fA-F:]*[0-9a-fA-F](?:/[0-9]+)?",  # IPv6 with "::" (never 1.1's 1:20)
    r"'(?:[^'\n]|'')*'",
    r'"(?:[^"\\\n]|\\[\\"/ntu])*"',
    r"\{\}|\[\]",
])
_SIMPLE_LINE = rf"(?:{_SIMPLE_KEY}(?:[ ]+(?:{_SIMPLE_VALUE}))?|{_SIMPLE_VALUE}|---)?[ ]*\n"
# The content of every other line, after its indentation and any "- " of block sequences.
_LINE_BODY = re.compile(rf"\n(?>[ ]*(?:-[ ]+)*)(?!{_SIMPLE_LINE})([^\n]*)")
# YAML 1.1's booleans and nulls beyond JSON's (and y, n: strings in PyYAML, but close), merge and
# value keys, and the infinities and NaNs rapidyaml rewrites as .inf and .nan.
_WORD = re.compile(_WORDS + "|<<|=")
# A plain key and what follows it.
_PLAIN_KEY = re.compile(r"([^'\"][^\n]*?):(?:[ ]+(.*)|)$")
_QUOTED = {"'": re.compile(r"'(?:[^']|'')*'"), '"': re.compile(r'"(?:[^"\\]|\\[\\"/ntu])*"')}


def _plain_differs(token: str) -> bool:
    """True when a plain scalar may be read differently (or is not a plain scalar this reader
    knows)."""
    token = token.split(" #", 1)[0].rstrip()
    if not token:
        return False
    if token[0] in "&*!%?@`|>:,[]{}#'\"" or _WORD.fullmatch(token):
        return True
    return token[0] in "-+.0123456789" and not _SAFE_NUMBER.fullmatch(token) and bool(_NUMBER.fullmatch(token))


def _value_differs(value: str) -> bool:
    if not value or value.startswith("#"):
        return False
    if value[0] in "'\"":
        quoted = _QUOTED[value[0]].match(value)  # closed on its line, JSON's escapes only
        rest = value[quoted.end():].strip() if quoted else "x"
        return bool(rest) and not rest.startswith("#")
    if value[0] in "[{":
        return value.split(" #", 1)[0].rstrip() not in ("[]", "{}")  # other flow collections: PyYAML
    return _plain_differs(value)


def _line_differs(body: str) -> bool:
    """One line's content: a key and its value, or a value."""
    if body.startswith(("---", "...", "%")):
        return body != "---"
    if not body or body[0] == "#":
        return False
    if body[0] in "'\"":
        quoted = _QUOTED[body[0]].match(body)
        if quoted and body[quoted.end():quoted.end() + 1] == ":":  # a quoted key
            after = body[quoted.end() + 1:]
            return bool(after) and (after[0] != " " or _value_differs(after.strip()))
        return _value_differs(body)
    key = _PLAIN_KEY.match(body)
    if key is None:
        return _value_differs(body)
    name = key.group(1).rstrip()
    if name in ("", "true", "false", "null") or name[0] in "-+.0123456789" or _plain_differs(name):
        return True  # a key of another type than string (JSON makes it one), or not plain
    return _value_differs((key.group(2) or "").strip())


def _differs(text: str) -> bool:
    """Whether any scalar of `text` may be read differently, or its structure is beyond what this
    reader promises (tabs, carriage returns, escapes beyond JSON's, flow collections, block and
    multi-line quoted scalars, anchors, tags, directives)."""
    if "\t" in text or "\r" in text:
        return True
    return any(_line_differs(body) for body in set(_LINE_BODY.findall("\n" + text + "\n")))


def documents(text: str) -> list | None:
    """Every document of `text`, as yaml.safe_load_all would give them; None when this reader
    cannot promise that (then read the text with PyYAML)."""
    if _differs(text):
        return None
    try:
        with _quiet_stderr():  # rapidyaml prints what it refuses; PyYAML's one-line error follows
            tree = ryml.parse_in_arena(text.encode())
        root = tree.root_id()
        written = ryml.emit_json_malloc(tree, root)
        if written is None:  # no document at all (only comments or nothing)
            return []
        stream = tree.is_stream(root)
        loaded = json.loads(written)
    except Exception:  # rapidyaml refused it, or wrote what JSON does not read: PyYAML decides
        return None
    return loaded if stream else [loaded]


@contextmanager
def _quiet_stderr():
    """File descriptor 2 to /dev/null for the block (rapidyaml writes its errors there itself)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
