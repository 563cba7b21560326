"""Go's encoding/base64 StdEncoding decoder, with its error: the JSON decoder kube-apiserver uses
(sigs.k8s.io/json, a fork of encoding/json: decode.go `literalStore`) turns a string into a
`[]byte` field (Secret data, ConfigMap binaryData, a CSR's request, a webhook's caBundle, an
AdmissionReview's patch) with `base64.StdEncoding.Decode`, and an invalid value fails with its
`CorruptInputError`: `illegal base64 data at input byte N`.

Go's decoder (encoding/base64/base64.go `Decode`, `decodeQuantum`) reads quanta of four
characters, skips `\\r` and `\\n` anywhere, requires the padding (StdEncoding pads with `=`), and
reports the byte offset in the input where it gave up: the offending character, the start of an
incomplete quantum at the end, or what follows the padding. StdEncoding is not strict: unused
bits of the last quantum are not checked.
"""

from __future__ import annotations

import base64

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DECODE = {c: i for i, c in enumerate(_ALPHABET)}
_PAD = ord("=")
_NEWLINES = (ord("\n"), ord("\r"))


class CorruptInputError(ValueError):
    def __init__(self, offset: int):
        super().__init__(f"illegal base64 data at input byte {offset}")
        self.offset = offset


def _quantum(src: bytes, si: int) -> tuple[int, list[int], bool]:
    """decodeQuantum: (next index, the 6-bit values read, done). Raises CorruptInputError."""
    values: list[int] = []
    j = 0
    while j < 4:
        if si == len(src):
            if j == 0:
                return si, values, True
            raise CorruptInputError(si - j)     # an incomplete quantum (StdEncoding pads)
        c = src[si]
        si += 1
        if c in _DECODE:
            values.append(_DECODE[c])
            j += 1
            continue
        if c in _NEWLINES:
            continue
        if c != _PAD:
            raise CorruptInputError(si - 1)
        if j in (0, 1):                         # padding too early
            raise CorruptInputError(si - 1)
        if j == 2:                              # "==" expected: the second one, newlines skipped
            while si < len(src) and src[si] in _NEWLINES:
                si += 1
            if si == len(src):
                raise CorruptInputError(len(src))
            if src[si] != _PAD:
                raise CorruptInputError(si - 1)
            si += 1
        while si < len(src) and src[si] in _NEWLINES:
            si += 1
        if si < len(src):                       # something after the padding
            raise CorruptInputError(si)
        return si, values, True
    return si, values, False


def decode(text: str | bytes) -> bytes:
    """base64.StdEncoding.DecodeString: the bytes, or CorruptInputError with Go's offset."""
    src = text.encode() if isinstance(text, str) else bytes(text)
    out = bytearray()
    si = 0
    while si < len(src):
        si, values, done = _quantum(src, si)
        if values:
            bits = 0
            for v in values + [0] * (4 - len(values)):
                bits = bits << 6 | v
            out += bits.to_bytes(3, "big")[:len(values) - 1]
        if done:
            break
    return bytes(out)


def canonical(text: str) -> str:
    """What the API server stores and returns for a valid `[]byte` value: Go re-encodes the
    decoded bytes (padded, without the newlines the input may have had)."""
    return base64.b64encode(decode(text)).decode()
