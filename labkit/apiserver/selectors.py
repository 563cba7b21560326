"""Label and field selectors, parsed and matched as k8s.io/apimachinery/pkg/labels and
pkg/fields do (set-based label requirements; field terms with =, == and !=)."""

from __future__ import annotations

import re

from labkit.apiserver.errors import bad_request

_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|[^\s!=(),]+)")


class LabelSelector:
    """A parsed label selector: a list of (key, operator, values) requirements, all must hold."""

    def __init__(self, requirements: list[tuple[str, str, list[str]]]):
        self.requirements = requirements

    @classmethod
    def parse(cls, text: str | None) -> "LabelSelector":
        if not text or not text.strip():
            return cls([])
        tokens = _tokenize(text)
        reqs: list[tuple[str, str, list[str]]] = []
        i = 0

        def expect_identifier(pos: int) -> str:
            if pos >= len(tokens) or tokens[pos] in ("!=", "==", "=", "!", "(", ")", ","):
                found = tokens[pos] if pos < len(tokens) else ""
                raise bad_request(f"unable to parse requirement: found '{found}', expected: identifier")
            return tokens[pos]

        while i < len(tokens):
            if tokens[i] == "!":
                key = expect_identifier(i + 1)
                _check_label_key(key)
                reqs.append((key, "!", []))
                i += 2
            else:
                key = expect_identifier(i)
                _check_label_key(key)
                i += 1
                op = tokens[i] if i < len(tokens) else ","
                if op == ",":
                    reqs.append((key, "exists", []))
                elif op in ("=", "==", "!="):
                    value = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] != "," else ""
                    if value in ("(", ")", "!", "=", "==", "!="):
                        raise bad_request(f"unable to parse requirement: found '{value}', expected: identifier")
                    _check_label_value(value)
                    reqs.append((key, "!=" if op == "!=" else "=", [value]))
                    i += 2 if value else 1
                elif op.lower() in ("in", "notin"):
                    if i + 1 >= len(tokens) or tokens[i + 1] != "(":
                        raise bad_request("unable to parse requirement: found '', expected: '('")
                    j = i + 2
                    values: list[str] = []
                    while True:
                        if j >= len(tokens):
                            raise bad_request("unable to parse requirement: found '', expected: ',', ')' or identifier")
                        tok = tokens[j]
                        if tok == ")":
                            break
                        if tok == ",":
                            j += 1
                            continue
                        if tok in ("(", "!", "=", "==", "!="):
                            raise bad_request(f"unable to parse requirement: found '{tok}', expected: ',', ')' or identifier")
                        _check_label_value(tok)
                        values.append(tok)
                        j += 1
                    reqs.append((key, op.lower(), values))
                    i = j + 1
                else:
                    raise bad_request(f"unable to parse requirement: found '{op}', expected: in, notin, =, ==, !=, gt, lt")
            if i < len(tokens):
                if tokens[i] != ",":
                    raise bad_request(f"found '{tokens[i]}', expected: ',' or 'end of string'")
                i += 1
                if i >= len(tokens):
                    raise bad_request("found '', expected: !, identifier, or 'end of string'")
        return cls(reqs)

    @classmethod
    def from_label_selector(cls, selector: dict | None) -> "LabelSelector | None":
        """metav1.LabelSelector (matchLabels, matchExpressions) as used in workload specs.
        None for a nil selector (which matches nothing), an empty one matches everything."""
        if selector is None:
            return None
        reqs = [(k, "=", [str(v)]) for k, v in sorted((selector.get("matchLabels") or {}).items())]
        for expr in selector.get("matchExpressions") or []:
            op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(expr.get("operator"))
            if op is None:
                raise ValueError(f"{expr.get('operator')!r} is not a valid label selector operator")
            reqs.append((expr.get("key", ""), op, [str(v) for v in expr.get("values") or []]))
        return cls(reqs)

    def matches(self, labels: dict | None) -> bool:
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            value = labels.get(key)
            if op == "exists" and not present:
                return False
            if op == "!" and present:
                return False
            if op == "=" and value != values[0]:
                return False
            if op == "!=" and present and value == values[0]:
                return False
            if op == "in" and (not present or value not in values):
                return False
            if op == "notin" and present and value in values:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.requirements

    def text(self) -> str:
        """labels.Selector.String(): requirements sorted by key (`app=web,tier in (a,b),!x`)."""
        parts = []
        for key, op, values in sorted(self.requirements, key=lambda r: r[0]):
            if op == "exists":
                parts.append(key)
            elif op == "!":
                parts.append(f"!{key}")
            elif op in ("=", "!="):
                parts.append(f"{key}{op}{values[0]}")
            else:
                parts.append(f"{key} {op} ({','.join(sorted(values))})")
        return ",".join(parts)


def _tokenize(text: str) -> list[str]:
    tokens = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise bad_request(f"unable to parse requirement: unexpected character at {pos}")
        tokens.append(m.group(1))
        pos = m.end()
    return tokens


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _check_label_key(key: str) -> None:
    from labkit.apiserver.validation import qualified_name_problems
    problems = qualified_name_problems(key)
    if problems:
        raise bad_request(f"unable to parse requirement: invalid label key {key!r}: {'; '.join(problems)}")


def _check_label_value(value: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value: {value!r}: at key: a valid label "
                          "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                          "must start and end with an alphanumeric character")


class FieldSelector:
    """A parsed field selector: terms `field=value`, `field==value`, `field!=value`."""

    def __init__(self, terms: list[tuple[str, str, str]]):
        self.terms = terms

    @classmethod
    def parse(cls, text: str | None) -> "FieldSelector":
        if not text or not text.strip():
            return cls([])
        terms = []
        for part in _split_unescaped(text, ","):
            if not part:
                continue
            for op in ("!=", "==", "="):
                idx = _find_unescaped(part, op)
                if idx >= 0:
                    field, value = part[:idx], part[idx + len(op):]
                    terms.append((field.strip(), "!=" if op == "!=" else "=", _unescape(value)))
                    break
            else:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        return cls(terms)

    def check_supported(self, supported: set[str]) -> None:
        for field, _, _ in self.terms:
            if field not in supported:
                raise bad_request(f"field label not supported: {field}")

    def matches(self, fields: dict[str, str]) -> bool:
        for field, op, value in self.terms:
            actual = fields.get(field, "")
            if (actual == value) != (op == "="):
                return False
        return True

    def single_value(self, field: str) -> str | None:
        for f, op, value in self.terms:
            if f == field and op == "=":
                return value
        return None

    @property
    def empty(self) -> bool:
        return not self.terms


def _find_unescaped(text: str, needle: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(needle, i):
            return i
        i += 1
    return -1


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(text[i])
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            out.append(value[i + 1])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)

