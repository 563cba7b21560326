"""What Go's encoding/json says of a decoded JSON value in its errors."""

from __future__ import annotations


def value_type(value) -> str:
    """The JSON type's name as encoding/json's UnmarshalTypeError.Value gives it (decode.go
    literalStore and d.object/d.array: "bool", "number", "string", "array", "object"). A JSON null
    decodes into any Go type without an error; "null" is said of it here only for completeness."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"
