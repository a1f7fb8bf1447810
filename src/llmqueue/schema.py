"""The config's JSON schema as the one declaration of every key: its type, range, default,
meaning and unit; the defaults filled, the keys listed and ``config/README.md``'s tables rendered
from it.

The schema lives in ``workflow/schemas/`` (``config.schema.yaml``, the sections shared by the
studies) and in each study's folder (``src/llmqueue/studies/<study>/schema.yaml``, its section):
a root that says ``x-study-sections: true`` names no study, and every catalogued study's section
(:mod:`llmqueue.catalog`) is added to it as a ``$ref`` to that file when the root is read. Each key's node carries the JSON Schema keywords that validate it
and three annotations the validators ignore: ``description`` (what the key means), ``x-unit``
(its unit) and ``x-allowed`` (what its values must satisfy beyond what the schema's own keywords
say: a profile name that exists, a file with those columns, stop > start). Everything else is
derived: the Snakefile's validation and default filling (:func:`fill_defaults`), the defaults a
library spec fills into a partial section (:func:`with_defaults`), the list of keys
(:func:`declared_keys`), and the README's tables (:func:`render_config_table`), whose "allowed"
column joins the schema's range with :func:`key_bounds` (the limits a check applies to a key by
its name, :mod:`llmqueue.limits`).

Snakemake's ``validate(config, schema, set_default=True)`` fills a ``default`` only in the schema
file it is given: a section kept in its own file is validated by jsonschema's plain Draft 2020-12
validator, because the referenced file declares its ``$schema`` and jsonschema picks the
validator class from it. :func:`fill_defaults` walks the same schema with the default-filling
validator through every ``$ref`` (the referenced files are read as Draft 2020-12 resources with
their ``$schema`` set aside, so the class is kept). Defaults fill an object's missing property,
recursively, as JSON Schema's FAQ recipe does; an object absent from the config stays absent
unless its own property declares a default.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from llmqueue.errors import InputError

__all__ = [
    "SCHEMA",
    "fill_defaults",
    "with_defaults",
    "declared_keys",
    "declared_defaults",
    "key_bounds",
    "sections",
    "section_files",
    "section_heading",
    "config_rows",
    "render_config_table",
    "section",
    "check_numbers",
]

# the root schema file (the project's own folder; the study sections sit beside it)
SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
# the annotations of a key's node beyond JSON Schema's validation keywords (module docstring)
UNIT, ALLOWED = "x-unit", "x-allowed"


# the root's flag: add a property per catalogued study section (module docstring)
STUDY_SECTIONS = "x-study-sections"


def _with_study_sections(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` (the schema file `path`, parsed) with a ``$ref`` property for each catalogued
    study's ``schema.yaml`` when it asks for them (:data:`STUDY_SECTIONS`), in the catalogue's
    order after its own; InputError for a section declared both ways."""
    if not doc.get(STUDY_SECTIONS):
        return doc
    import os

    from llmqueue.catalog import studies

    props = doc.setdefault("properties", {})
    for s in studies():
        if s.schema is None:
            continue
        if s.name in props:
            raise InputError(
                f"{path}: config section {s.name!r} is declared here and by {s.schema}"
            )
        props[s.name] = {"$ref": Path(os.path.relpath(s.schema, path.parent)).as_posix()}
    return doc


@functools.lru_cache(maxsize=64)
def _parsed(path: Path) -> dict[str, Any]:
    """A schema file, parsed once per process (YAML parsing is the slow part of a fill), a root's
    study sections added."""
    with path.open() as fh:
        doc = yaml.safe_load(fh)
    if not isinstance(doc, dict):
        raise InputError(f"config schema {path}: not a YAML mapping")
    return _with_study_sections(path, doc)


def _load(path: Path) -> dict[str, Any]:
    """A schema file's contents, a copy of its one parse (callers may change it)."""
    return copy.deepcopy(_parsed(Path(path).resolve()))


@functools.lru_cache(maxsize=8)
def _machinery(root: Path) -> tuple[Any, Any, dict[str, Any]]:
    """(default-filling validator class, registry, root schema) of the schema at `root`."""
    from jsonschema import Draft202012Validator, validators
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    def retrieve(uri: str) -> Any:
        from urllib.parse import urlparse
        from urllib.request import url2pathname

        doc = _load(Path(url2pathname(urlparse(uri).path)))
        doc.pop("$schema", None)  # keep the default-filling class below this $ref
        return DRAFT202012.create_resource(doc)

    base = validators.validator_for({"$schema": Draft202012Validator.META_SCHEMA["$schema"]})
    plain_properties = base.VALIDATORS["properties"]

    def default(validator: Any, sub: Any) -> tuple[bool, Any]:
        """(declared, value): the default of property schema `sub`, or of the schema its $ref
        names (a default kept with a shared definition)."""
        while isinstance(sub, dict):
            if "default" in sub:
                return True, sub["default"]
            if "$ref" not in sub:
                break
            # jsonschema keeps the resolver of the schema being walked (its base URI) here
            sub = validator._resolver.lookup(sub["$ref"]).contents
        return False, None

    def properties(validator: Any, props: dict, instance: Any, schema: dict) -> Iterator[Any]:
        if validator.is_type(instance, "object"):
            for name, sub in props.items():
                declared, value = default(validator, sub)
                if declared and name not in instance:
                    instance[name] = copy.deepcopy(value)
        yield from plain_properties(validator, props, instance, schema)

    filling = validators.extend(base, {"properties": properties})
    schema = _load(root)
    schema["$id"] = root.as_uri()
    registry: Registry = Registry(retrieve=retrieve).with_resource(  # type: ignore[call-arg]
        root.as_uri(), DRAFT202012.create_resource(schema)
    )
    # the section files the root names (beside it, or in a study's package), registered up
    # front: a $ref to them is then a lookup, not a retrieval (which the immutable registry would
    # repeat on every validation)
    for path in _section_paths(root):
        registry = registry.with_resource(path.as_uri(), retrieve(path.as_uri()))
    return filling, registry, schema


def _section_paths(root: Path) -> list[Path]:
    """Every schema file the root's ``$ref``s name, at any depth (resolved, sorted; the root
    itself left out)."""
    seen: set[Path] = set()
    todo = [root]
    while todo:
        here = todo.pop()
        stack: list[Any] = [_parsed(here)]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                target = str(node.get("$ref", "")).partition("#")[0]
                if target:
                    path = (here.parent / target).resolve()
                    if path not in seen and path != root:
                        seen.add(path)
                        todo.append(path)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return sorted(seen)


def fill_defaults(config: MutableMapping[str, Any], schema_path: str | Path = SCHEMA) -> None:
    """Validate `config` against the schema at `schema_path` and set every default it declares,
    in place, in every section (module docstring): the Snakefile's one schema pass. InputError
    naming the key when the config breaks the schema."""
    filling, registry, schema = _machinery(Path(schema_path).resolve())
    validator = filling(schema, registry=registry)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        key = ".".join(str(k) for k in e.absolute_path) or "(top level)"
        raise InputError(f"{key}: {e.message}")


def _deref(
    node: Any, doc: dict[str, Any], here: Path, pointer: str, load: Callable[[Path], dict]
) -> tuple[Any, dict[str, Any], Path, str]:
    """Follow `node`'s chain of ``$ref``s (`doc`: the parsed file `here` it sits in; `load`
    reads another file): (the node it names, with the annotations written beside each ``$ref``
    laid over it, the nearest winning; that node's file, parsed; the file; its JSON pointer)."""
    extra: dict[str, Any] = {}
    while isinstance(node, dict) and "$ref" in node:
        extra = {**{k: v for k, v in node.items() if k != "$ref"}, **extra}
        target, _, pointer = node["$ref"].partition("#")
        if target:
            here = (here.parent / target).resolve()
            doc = load(here)
        node = doc
        for part in [p for p in pointer.split("/") if p]:
            node = node[part]
    return ({**node, **extra} if isinstance(node, dict) else node), doc, here, pointer


@functools.lru_cache(maxsize=256)
def _location(key: str, root: Path) -> str:
    """The URI (file and JSON pointer) of the schema node of dotted `key` (``<name>``: an entry
    of a free-named map), following ``$ref``s; InputError for a key the schema does not declare."""
    here, pointer = root, ""
    doc = node = _parsed(root)
    for part in [p for p in key.split(".") if p]:
        node, doc, here, pointer = _deref(node, doc, here, pointer, _parsed)
        props = node.get("properties") or {} if isinstance(node, dict) else {}
        if part in props:
            pointer, node = f"{pointer}/properties/{part}", props[part]
        elif isinstance(node, dict) and isinstance(node.get("additionalProperties"), dict):
            pointer, node = f"{pointer}/additionalProperties", node["additionalProperties"]
        else:
            raise InputError(f"config key {key!r} is not declared by the schema {root.name}")
    return f"{here.as_uri()}#{pointer}"


@functools.lru_cache(maxsize=256)
def _filler(key: str, root: Path) -> Any:
    """The default-filling validator of the schema node of dotted `key` (one per key: it keeps
    the files its $refs retrieved)."""
    filling, registry, _ = _machinery(root)
    return filling({"$ref": _location(key, root)}, registry=registry)


def with_defaults(
    section: Mapping[str, Any], key: str, schema_path: str | Path = SCHEMA
) -> dict[str, Any]:
    """A deep copy of `section`, the config's value at dotted `key` (``serving``,
    ``latency_profiles.<name>``), with every default the schema declares below that key filled
    in: how a library spec reads a section a caller may have left partial, without a second
    default. Not a validation: a missing required key or a value out of range is left for the
    config checks; a key the schema does not declare is an InputError naming it."""
    out = copy.deepcopy(dict(section))
    for err in _filler(key, Path(schema_path).resolve()).iter_errors(out):  # walking fills it
        if err.validator == "additionalProperties":
            where = ".".join([key, *(str(k) for k in err.absolute_path)])
            raise InputError(f"{where}: {err.message}")
    return out


def declared_keys(
    schema_path: str | Path = SCHEMA, docs: Mapping[Path, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """{dotted key: its schema node, $refs resolved} of every property the schema at
    `schema_path` and the files it references declare, in declaration order. A free-named
    mapping entry is spelled ``<name>`` (or, when ``propertyNames`` lists them, each allowed
    name), an array item ``[]``; the branches of ``anyOf``/``oneOf``/``allOf`` and
    ``then``/``else`` add their keys. A node that is a ``$ref`` with annotations beside it keeps
    them (they win over the target's). `docs`: the schema files already read ({resolved path:
    parsed YAML}); a file it lacks is read from disk."""
    root = Path(schema_path).resolve()
    out: dict[str, dict[str, Any]] = {}
    # each schema file read once per walk
    loaded: dict[Path, dict[str, Any]] = {
        Path(k).resolve(): _with_study_sections(Path(k).resolve(), copy.deepcopy(v))
        for k, v in (docs or {}).items()
    }

    def load(path: Path) -> dict[str, Any]:
        return loaded[path] if path in loaded else loaded.setdefault(path, _load(path))

    def resolve(node: dict[str, Any], doc: dict[str, Any], here: Path) -> tuple[dict, dict, Path]:
        node, doc, here, _ = _deref(node, doc, here, "", load)
        return node, doc, here

    def walk(node: Any, doc: dict[str, Any], here: Path, prefix: str) -> None:
        if not isinstance(node, dict):
            return
        node, doc, here = resolve(node, doc, here)

        def child(name: str, sub: Any) -> None:
            key = f"{prefix}.{name}" if prefix else name
            if isinstance(sub, dict):
                sub, sub_doc, sub_here = resolve(sub, doc, here)
                # a branch's narrower node never hides the declaration
                out.setdefault(key, inline(sub, sub_doc, sub_here))
                walk(sub, sub_doc, sub_here, key)

        def inline(node: dict[str, Any], doc: dict[str, Any], here: Path) -> dict[str, Any]:
            """`node` with the $refs of its list items and alternatives resolved (a value's
            whole type, for the README's allowed column); its properties are keys of their own."""
            extra: dict[str, Any] = {}
            if isinstance(node.get("items"), dict):
                extra["items"] = inline(*resolve(node["items"], doc, here))
            for word in ("anyOf", "oneOf"):
                if node.get(word):
                    extra[word] = [
                        inline(*resolve(o, doc, here)) if isinstance(o, dict) else o
                        for o in node[word]
                    ]
            return {**node, **extra} if extra else node

        for name, sub in (node.get("properties") or {}).items():
            child(name, sub)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            names = (node.get("propertyNames") or {}).get("enum") or ["<name>"]
            for name in names:
                child(str(name), extra)
        if isinstance(node.get("items"), dict):
            walk(node["items"], doc, here, f"{prefix}[]")
        for word in ("anyOf", "oneOf", "allOf"):
            for option in node.get(word) or []:
                walk(option, doc, here, prefix)
        for word in ("then", "else"):  # `if` tests a key, it declares none
            walk(node.get(word), doc, here, prefix)

    top = load(root)
    walk(top, top, root, "")
    return out


def declared_defaults(schema_path: str | Path = SCHEMA) -> dict[str, Any]:
    """{dotted key: default} of every property with a ``default`` (:func:`declared_keys`'s
    spelling; a default kept with a shared definition counts)."""
    return {
        k: node["default"] for k, node in declared_keys(schema_path).items() if "default" in node
    }


def key_bounds() -> dict[str, tuple[float, float]]:
    """{key name: (lowest, highest)}: the bounds the config checks apply to a key by its name
    wherever it appears (:mod:`llmqueue.limits`; the run lengths and rates of every study, which
    the schema states without an upper end)."""
    from llmqueue import limits as L

    return {
        "requests": (1, L.MAX_REQUESTS),
        "warmup": (0, L.MAX_REQUESTS),
        "capacity_requests": (1, L.MAX_REQUESTS),
        "claim_requests": (1, L.MAX_REQUESTS),
        "rate_per_s": (0, L.MAX_RATE_PER_S),
        "servers": (1, L.MAX_SERVERS),
        "seed": (0, L.MAX_SEED),
    }


# ---- config/README.md's tables --------------------------------------------------------------------
def is_leaf(node: Mapping[str, Any]) -> bool:
    """Whether a key's node holds a value rather than named keys of its own (no properties, no
    free-named map of mappings, no list of mappings): one row of the README's tables."""
    items = node.get("items")
    return not (
        node.get("properties")
        or isinstance(node.get("additionalProperties"), dict)
        or (isinstance(items, dict) and bool(items.get("properties")))
    )


def _value(v: Any) -> str:
    """A YAML value as the config would spell it, in backticks."""
    text = yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()
    text = text.removesuffix("...").strip()
    return f"`{text}`"


def _number(v: float) -> str:
    """A bound as the README spells it: integers exact (``2e8`` when they have few digits)."""
    if isinstance(v, int) or float(v).is_integer():
        n = int(v)
        if n >= 2**31 and (n + 1) & n == 0:  # 2^k - 1: the largest seed
            return f"2^{(n + 1).bit_length() - 1} - 1"
        digits = str(abs(n)).rstrip("0")
        if abs(n) >= 10**6 and len(digits) <= 2:
            return f"{'-' if n < 0 else ''}{digits}e{len(str(abs(n))) - len(digits)}"
        return f"{n:,}" if abs(n) >= 10**6 else str(n)
    return repr(float(v))


def _range(node: Mapping[str, Any], bound: tuple[float, float] | None) -> str:
    """The schema's numeric range of `node`, narrowed by a check's `bound` (both inclusive)."""
    lo, lo_open = node.get("minimum"), False
    if node.get("exclusiveMinimum") is not None:
        lo, lo_open = node["exclusiveMinimum"], True
    hi, hi_open = node.get("maximum"), False
    if node.get("exclusiveMaximum") is not None:
        hi, hi_open = node["exclusiveMaximum"], True
    if bound is not None:
        if lo is None or bound[0] > lo:
            lo, lo_open = bound[0], False
        if hi is None or bound[1] < hi:
            hi, hi_open = bound[1], False
    if lo is not None and hi is not None:
        return f"{'(' if lo_open else '['}{_number(lo)}, {_number(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {_number(lo)}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {_number(hi)}"
    return ""


def _list_text(node: Mapping[str, Any]) -> str:
    """A list's allowed values: its length, then what each item may be."""
    items = node.get("items")
    what = allowed_text(items) if isinstance(items, dict) else ""
    lo, hi = node.get("minItems"), node.get("maxItems")
    if lo is not None and lo == hi:
        length = [f"{lo} items"]
    else:
        length = [f"at least {lo}"] if lo else []
        length += [f"at most {hi}"] if hi is not None else []
    if isinstance(items, dict) and items.get("properties"):
        each = "mappings"
    elif isinstance(items, dict) and items.get("type") == "array":
        each = f"lists ({what.removeprefix('list, ')})"
    elif what.startswith(("(", "[")):
        each = f"each in {what}"
    elif what:
        each = f"each {what}" if what.startswith(("<", ">", "integer", "text")) else what
    else:
        each = ""
    head = "list of " + each if each.startswith(("mappings", "lists", "`")) else "list"
    parts = [head, *length, *([each] if each and not head.endswith(each) else [])]
    if node.get("uniqueItems"):
        parts.append("distinct")
    return ", ".join(parts)


def allowed_text(node: Mapping[str, Any], name: str = "") -> str:
    """What a value of the key `name` with schema `node` may be, in words: its enum or type and
    range (narrowed by :func:`key_bounds`), list length, then its ``x-allowed`` condition."""
    parts: list[str] = []
    if "enum" in node:
        parts.append(", ".join(_value(v) for v in node["enum"]))
    elif "const" in node:
        parts.append(_value(node["const"]))
    else:
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else list(types)
        words: list[str] = []
        for t in types:
            if t in ("integer", "number"):
                span = _range(node, key_bounds().get(name))
                words.append(" ".join(w for w in ("integer" if t == "integer" else "", span) if w))
            elif t == "boolean":
                words.append("`true`, `false`")
            elif t == "array":
                words.append(_list_text(node))
            elif t == "null":
                words.append("`null`")
            elif t == "string" and node.get("pattern"):
                words.append(f"text matching `{node['pattern']}`")
        if not types and ("minimum" in node or "exclusiveMinimum" in node):
            words.append(_range(node, key_bounds().get(name)))
        options = node.get("anyOf") or node.get("oneOf") or []
        words += [w for w in (allowed_text(o, name) for o in options) if w]
        parts.append(" or ".join(w for w in words if w))
    if node.get(ALLOWED):
        parts.append(str(node[ALLOWED]))
    return "; ".join(p for p in parts if p)


def _default_of(key: str, keys: Mapping[str, Mapping[str, Any]]) -> tuple[bool, Any]:
    """(declared, value): `key`'s own default, or its entry in the nearest enclosing object's."""
    node = keys[key]
    if "default" in node:
        return True, node["default"]
    head, _, tail = key.rpartition(".")
    path = [tail]
    while head:
        above = keys.get(head, {}).get("default")
        if isinstance(above, Mapping):
            value: Any = above
            for part in path:
                if not (isinstance(value, Mapping) and part in value):
                    return False, None
                value = value[part]
            return True, value
        head, _, tail = head.rpartition(".")
        path.insert(0, tail)
    return False, None


def sections(schema_path: str | Path = SCHEMA) -> list[str]:
    """The config's sections (the root schema's properties), in declaration order."""
    return [str(k) for k in (_parsed(Path(schema_path).resolve()).get("properties") or {})]


def section_heading(section: str, schema_path: str | Path = SCHEMA) -> str:
    """The heading and introduction ``config/README.md`` gives config section `section` when it
    has none yet: ``## `<section>` `` and the description of the section's schema node."""
    text = " ".join(str(declared_keys(schema_path)[section].get("description", "")).split())
    return f"## `{section}`\n\n{text}" if text else f"## `{section}`"


def _unit_of(key: str, keys: Mapping[str, Mapping[str, Any]]) -> str:
    """`key`'s ``x-unit``, or that of the object holding it (a shared definition, such as a grid
    of start, stop and step, whose unit its use states)."""
    unit = keys[key].get(UNIT)
    head = key.rpartition(".")[0]
    if unit is None and head in keys and not is_leaf(keys[head]):
        unit = keys[head].get(UNIT)
    return "" if unit is None else str(unit)


def section_files(section: str, schema_path: str | Path = SCHEMA) -> list[Path]:
    """The schema files that declare config section `section`: the root, and the file its
    ``$ref`` names when the section is kept apart."""
    root = Path(schema_path).resolve()
    node = (_parsed(root).get("properties") or {}).get(section)
    if not isinstance(node, dict):
        raise InputError(f"config section {section!r} is not declared by {root.name}")
    target = str(node.get("$ref", "")).partition("#")[0]
    return [root, *([(root.parent / target).resolve()] if target else [])]


def config_rows(
    section: str,
    schema_path: str | Path = SCHEMA,
    docs: Mapping[Path, dict[str, Any]] | None = None,
) -> list[list[str]]:
    """The rows (key, meaning, unit, allowed, default) of config section `section`: one per key
    that holds a value (:func:`is_leaf`), keys relative to the section, in declaration order.
    `docs`: as :func:`declared_keys`."""
    keys = declared_keys(schema_path, docs)
    rows = []
    for key, node in keys.items():
        top = key.split(".")[0].split("[")[0]
        if top != section or not is_leaf(node):
            continue
        rel = key if key == section else key.removeprefix(f"{section}.")
        name = key.rsplit(".", 1)[-1].removesuffix("[]")
        declared, default = _default_of(key, keys)
        rows.append(
            [
                f"`{rel}`",
                str(node.get("description", "")),
                _unit_of(key, keys),
                allowed_text(node, name),
                _value(default) if declared else "",
            ]
        )
    return rows


def render_config_table(
    section: str,
    schema_path: str | Path = SCHEMA,
    docs: Mapping[Path, dict[str, Any]] | None = None,
) -> str:
    """``config/README.md``'s table of config section `section` (:func:`config_rows`)."""
    from llmqueue.markdown import md_table, md_text

    rows = config_rows(section, schema_path, docs)
    if not rows:
        raise InputError(f"config section {section!r} declares no keys in {schema_path}")
    cells = [[md_text(c) for c in row] for row in rows]
    return md_table(["key", "meaning", "unit", "allowed", "default"], cells)


def section(config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """Config section `name` with every default its schema declares filled in (as the Snakefile
    fills it; a caller may pass a config it did not fill), or None when the config has none."""
    value = config.get(name)
    return None if value is None else with_defaults(value, name)


def check_numbers(node: Any, where: str = "") -> None:
    """Every number of the config is finite (YAML reads .inf and .nan), and the run lengths and
    rates lie within :mod:`llmqueue.limits` (:func:`llmqueue.schema.key_bounds`); InputError
    names the dotted key."""

    bounds = key_bounds()
    if isinstance(node, Mapping):
        for k, v in node.items():
            check_numbers(v, f"{where}.{k}" if where else str(k))
        return
    if isinstance(node, list | tuple):
        for i, v in enumerate(node):
            check_numbers(v, f"{where}[{i}]")
        return
    if isinstance(node, bool) or not isinstance(node, int | float):
        return
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError(f"{where} must be a finite number, got {node}")
    key = where.rsplit(".", 1)[-1]
    if key in bounds:
        lo, hi = bounds[key]
        if not lo <= node <= hi:
            raise InputError(f"{where} must lie in [{lo:g}, {hi:g}], got {node}")
