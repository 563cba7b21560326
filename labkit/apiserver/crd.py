"""Custom resources under their CRD's structural schema, as apiextensions-apiserver treats them:

- pruning (pkg/apiserver/schema/pruning): fields the schema does not declare are dropped —
  reported as unknown fields for fieldValidation — unless x-kubernetes-preserve-unknown-fields;
  nulls are dropped from fields that are not nullable;
- defaulting (pkg/apiserver/schema/defaulting): `default` values fill absent fields, top-down;
- validation (pkg/apiserver/validation, kube-openapi's validator): type, format, enum, required,
  numeric and length bounds, pattern, items, properties, uniqueness, set and map list keys,
  allOf/anyOf/oneOf/not, with kube-openapi's messages turned into field errors;
- the CRD's own schema must be structural enough to be served (a schema per version, a type for
  every specified field).

Not reconstructed: CEL rules (x-kubernetes-validations), ratcheting of unchanged invalid values,
and conversion webhooks (versions convert with the None strategy).
"""

from __future__ import annotations

import json
import re

from labkit.apiserver.errors import FieldError, field_invalid, field_required, field_unsupported
from labkit.jsondata import json_copy

ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(value, schema: dict, path: str, unknown: list[str], root: bool = False):
    """The value with what the schema does not allow removed; unknown paths appended to `unknown`."""
    schema = schema or {}
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out = {}
        for key, child in value.items():
            child_path = _join(path, key)
            if child is None and not (props.get(key) or {}).get("nullable"):
                continue
            if root and key in ROOT_FIELDS:
                out[key] = child
            elif key in props:
                out[key] = prune(child, props[key], child_path, unknown)
            elif isinstance(extra, dict):
                out[key] = prune(child, extra, child_path, unknown)
            elif extra is True or preserve or (schema.get("x-kubernetes-embedded-resource") and key in ROOT_FIELDS):
                out[key] = child
            else:
                unknown.append(child_path)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(item, schema["items"], f"{path}[{i}]", unknown) for i, item in enumerate(value)]
    return value


def default(value, schema: dict):
    """Fill absent fields with their schema defaults (in place; returns the value)."""
    schema = schema or {}
    if isinstance(value, dict):
        for key, prop in (schema.get("properties") or {}).items():
            if key not in value and isinstance(prop, dict) and "default" in prop:
                value[key] = json_copy(prop["default"])
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            prop = (schema.get("properties") or {}).get(key)
            if isinstance(prop, dict):
                default(child, prop)
            elif isinstance(extra, dict):
                default(child, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(item, schema["items"])
    return value


# -- validation ---------------------------------------------------------------------------------

def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(value, wanted: str) -> bool:
    actual = _json_type(value)
    return actual == wanted or (wanted == "number" and actual == "integer")


_FORMATS = {
    "date-time": re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "uuid": re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"),
    "byte": re.compile(r"^[A-Za-z0-9+/]*={0,2}$"),
    "ipv4": re.compile(r"^((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)$"),
    "hostname": re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
}


def _shown(value) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def validate(value, schema: dict, path: str = "") -> list[FieldError]:
    """kube-openapi's validation of `value` against `schema`, as apiextensions reports it."""
    schema = schema or {}
    errors: list[FieldError] = []
    name = path
    if value is None:
        if schema.get("nullable"):
            return []
        if schema.get("type"):
            return [field_invalid(path, "null", f'{name} in body must be of type {schema["type"]}: "null"')]
        return []
    wanted = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if _json_type(value) not in ("integer", "string"):
            return [field_invalid(path, _json_type(value),
                                  f'{name} in body must be of type integer,string: "{_json_type(value)}"')]
    elif wanted and not _type_ok(value, wanted):
        return [field_invalid(path, _json_type(value),
                              f'{name} in body must be of type {wanted}: "{_json_type(value)}"')]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(field_unsupported(path, value, [v if isinstance(v, str) else json.dumps(v)
                                                      for v in schema["enum"]]))
    fmt = schema.get("format")
    if isinstance(value, str) and fmt in _FORMATS and not _FORMATS[fmt].match(value):
        errors.append(field_invalid(path, value, f'{name} in body must be of type {fmt}: "{value}"'))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        errors += _numeric(value, schema, path, name)
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            limit = schema["maxLength"]
            errors.append(FieldError("Too long", path, f"may not be more than {limit} byte{'s' if limit != 1 else ''}"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(field_invalid(path, value, f"{name} in body should be at least {schema['minLength']} chars "
                                                     "long"))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(field_invalid(path, value, f"{name} in body should match '{schema['pattern']}'"))
    if isinstance(value, list):
        errors += _array(value, schema, path, name)
    if isinstance(value, dict):
        errors += _object(value, schema, path, name)
    errors += _combinators(value, schema, path, name)
    return errors


def _numeric(value, schema: dict, path: str, name: str) -> list[FieldError]:
    errors = []
    if "maximum" in schema:
        if schema.get("exclusiveMaximum") and value >= schema["maximum"]:
            errors.append(field_invalid(path, value, f"{name} in body should be less than {schema['maximum']}"))
        elif value > schema["maximum"]:
            errors.append(field_invalid(path, value, f"{name} in body should be less than or equal to "
                                                     f"{schema['maximum']}"))
    if "minimum" in schema:
        if schema.get("exclusiveMinimum") and value <= schema["minimum"]:
            errors.append(field_invalid(path, value, f"{name} in body should be greater than {schema['minimum']}"))
        elif value < schema["minimum"]:
            errors.append(field_invalid(path, value, f"{name} in body should be greater than or equal to "
                                                     f"{schema['minimum']}"))
    if schema.get("multipleOf") and (value / schema["multipleOf"]) % 1:
        errors.append(field_invalid(path, value, f"{name} in body should be a multiple of {schema['multipleOf']}"))
    return errors


def _array(value: list, schema: dict, path: str, name: str) -> list[FieldError]:
    errors = []
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        limit = schema["maxItems"]
        errors.append(FieldError("Too many", path, f"must have at most {limit} item{'s' if limit != 1 else ''}",
                                 len(value), True))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(field_invalid(path, value, f"{name} in body should have at least {schema['minItems']} items"))
    if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
        errors.append(field_invalid(path, value, f"{name} in body shouldn't contain duplicates"))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen = set()
        for i, item in enumerate(value):
            identity = json.dumps(item, sort_keys=True) if list_type == "set" else \
                json.dumps([(item or {}).get(k) for k in keys]) if isinstance(item, dict) else json.dumps(item)
            if identity in seen:
                shown = item if list_type == "set" else {k: (item or {}).get(k) for k in keys}
                errors.append(FieldError("Duplicate value", f"{path}[{i}]", "", shown, True))
            seen.add(identity)
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            errors += validate(item, items, f"{path}[{i}]")
    return errors


def _object(value: dict, schema: dict, path: str, name: str) -> list[FieldError]:
    errors = []
    for key in schema.get("required") or []:
        if key not in value:
            errors.append(field_required(_join(path, key)))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        limit = schema["maxProperties"]
        errors.append(FieldError("Too many", path, f"must have at most {limit} item{'s' if limit != 1 else ''}"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(field_invalid(path, value, f"{name} in body should have at least {schema['minProperties']} "
                                                 "properties"))
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    for key, child in value.items():
        if key in props:
            errors += validate(child, props[key], _join(path, key))
        elif isinstance(extra, dict):
            errors += validate(child, extra, _join(path, key))
    if schema.get("x-kubernetes-embedded-resource"):
        for key in ("apiVersion", "kind"):
            if not value.get(key):
                errors.append(field_required(_join(path, key), "must not be empty"))
    return errors


def _combinators(value, schema: dict, path: str, name: str) -> list[FieldError]:
    errors = []
    for sub in schema.get("allOf") or []:
        if validate(value, sub, path):
            errors.append(field_invalid(path, value, f"{name} in body must validate all the schemas (allOf)"))
            break
    if schema.get("anyOf") and all(validate(value, sub, path) for sub in schema["anyOf"]):
        errors.append(field_invalid(path, value, f"{name} in body must validate at least one schema (anyOf)"))
    if schema.get("oneOf") and sum(1 for sub in schema["oneOf"] if not validate(value, sub, path)) != 1:
        errors.append(field_invalid(path, value, f"{name} in body must validate one and only one schema (oneOf)"))
    if isinstance(schema.get("not"), dict) and not validate(value, schema["not"], path):
        errors.append(field_invalid(path, value, f"{name} in body should not validate the schema provided"))
    return errors


def validate_resource(obj: dict, schema: dict) -> list[FieldError]:
    """A custom resource against its version's schema (the metadata is validated elsewhere)."""
    body = {k: v for k, v in obj.items() if k not in ROOT_FIELDS}
    top = dict(schema or {}, properties={k: v for k, v in ((schema or {}).get("properties") or {}).items()
                                         if k not in ROOT_FIELDS})
    top["required"] = [r for r in top.get("required") or [] if r not in ROOT_FIELDS]
    return validate(body, top)


# -- the CRD's own schemas ------------------------------------------------------------------------

def schema_problems(schema, path: str) -> list[FieldError]:
    """What keeps a version's schema from being structural enough to serve."""
    if not isinstance(schema, dict):
        return [field_required(path, "schemas are required")]
    errors = []
    if schema.get("type") != "object":
        errors.append(field_unsupported(f"{path}.type", schema.get("type", ""), ["object"]) if schema.get("type")
                      else field_required(f"{path}.type", "must be object at the root"))
    errors += _structural(schema, path, root=True)
    return errors


def _structural(schema: dict, path: str, root: bool = False) -> list[FieldError]:
    errors = []
    special = schema.get("x-kubernetes-int-or-string") or schema.get("x-kubernetes-preserve-unknown-fields")
    if not root and not schema.get("type") and not special:
        errors.append(field_required(f"{path}.type", "must not be empty for specified object fields"))
    for key, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict):
            errors += _structural(prop, f"{path}.properties[{key}]")
    if isinstance(schema.get("items"), dict):
        errors += _structural(schema["items"], f"{path}.items")
    if isinstance(schema.get("additionalProperties"), dict):
        errors += _structural(schema["additionalProperties"], f"{path}.additionalProperties")
    if schema.get("properties") and isinstance(schema.get("additionalProperties"), dict):
        errors.append(FieldError("Forbidden", f"{path}.additionalProperties",
                                 "additionalProperties and properties are mutual exclusive"))
    return errors


def version_problems(crd: dict) -> list[FieldError]:
    errors = []
    for i, version in enumerate((crd.get("spec") or {}).get("versions") or []):
        if not isinstance(version, dict):
            continue
        base = f"spec.versions[{i}]"
        errors += schema_problems((version.get("schema") or {}).get("openAPIV3Schema"),
                                  f"{base}.schema.openAPIV3Schema")
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            if column.get("type") not in ("integer", "number", "string", "boolean", "date"):
                errors.append(field_unsupported(f"{base}.additionalPrinterColumns[{j}].type", column.get("type", ""),
                                                ["integer", "number", "string", "boolean", "date"]))
            if not column.get("jsonPath"):
                errors.append(field_required(f"{base}.additionalPrinterColumns[{j}].jsonPath"))
        scale = (version.get("subresources") or {}).get("scale")
        if scale is not None:
            for key in ("specReplicasPath", "statusReplicasPath"):
                if not str(scale.get(key, "")).startswith(".spec." if key == "specReplicasPath" else ".status."):
                    errors.append(field_invalid(f"{base}.subresources.scale.{key}", scale.get(key, ""),
                                                "should be a json path under ." +
                                                ("spec" if key == "specReplicasPath" else "status")))
    return errors

