"""The config's JSON schema as the one declaration of its defaults: fill them in every section.

Snakemake's ``validate(config, schema, set_default=True)`` fills a ``default`` only in the schema
file it is given: a section kept in its own file (``serving: {$ref: serving.schema.yaml}``) is
validated by jsonschema's plain Draft 2020-12 validator, because the referenced file declares its
``$schema`` and jsonschema picks the validator class from it, so that section's defaults were
never filled and the rules repeated them as ``.get(key, default)``. :func:`fill_defaults` walks
the same schema with the default-filling validator through every ``$ref`` (the referenced files
are read as Draft 2020-12 resources with their ``$schema`` set aside, so the class is kept), and
:func:`declared_defaults` lists every default the schema declares, for the tests and the docs.

Defaults fill an object's missing property, recursively, as JSON Schema's FAQ recipe does; an
object absent from the config stays absent unless its own property declares a default.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from llmqueue.errors import InputError


def _load(path: Path) -> dict[str, Any]:
    with path.open() as fh:
        doc = yaml.safe_load(fh)
    if not isinstance(doc, dict):
        raise InputError(f"config schema {path}: not a YAML mapping")
    return doc


def _validator(schema_path: Path) -> Any:
    """A Draft 2020-12 validator of `schema_path` that fills defaults, through file $refs."""
    from jsonschema import Draft202012Validator, validators
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    root = schema_path.resolve()

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
    return filling(schema, registry=registry)


def fill_defaults(config: MutableMapping[str, Any], schema_path: str | Path) -> None:
    """Validate `config` against the schema at `schema_path` and set every default it declares,
    in place, in every section (module docstring): the Snakefile's one schema pass. InputError
    naming the key when the config breaks the schema."""
    validator = _validator(Path(schema_path))
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        key = ".".join(str(k) for k in e.absolute_path) or "(top level)"
        raise InputError(f"{key}: {e.message}")


def declared_keys(schema_path: str | Path) -> dict[str, dict[str, Any]]:
    """{dotted key: its schema node, $refs resolved} of every property the schema at
    `schema_path` and the files it references declare. A free-named mapping entry is spelled
    ``<name>`` (or, when ``propertyNames`` lists them, each allowed name), an array item ``[]``;
    the branches of ``anyOf``/``oneOf``/``allOf`` and ``then``/``else`` add their keys."""
    root = Path(schema_path).resolve()
    out: dict[str, dict[str, Any]] = {}
    loaded: dict[Path, dict[str, Any]] = {}  # each schema file read once per walk

    def resolve(node: dict[str, Any], doc: dict[str, Any], here: Path) -> tuple[dict, dict, Path]:
        extra: dict[str, Any] = {}
        while "$ref" in node:
            extra = {**{k: v for k, v in node.items() if k != "$ref"}, **extra}
            target, _, pointer = node["$ref"].partition("#")
            if target:
                here = (here.parent / target).resolve()
                doc = loaded[here] if here in loaded else loaded.setdefault(here, _load(here))
            found: Any = doc
            for part in [p for p in pointer.split("/") if p]:
                found = found[part]
            node = found
        return {**node, **extra}, doc, here

    def walk(node: Any, doc: dict[str, Any], here: Path, prefix: str) -> None:
        if not isinstance(node, dict):
            return
        node, doc, here = resolve(node, doc, here)

        def child(name: str, sub: Any) -> None:
            key = f"{prefix}.{name}" if prefix else name
            if isinstance(sub, dict):
                sub, sub_doc, sub_here = resolve(sub, doc, here)
                out.setdefault(key, sub)  # a branch's narrower node never hides the declaration
                walk(sub, sub_doc, sub_here, key)

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

    top = _load(root)
    walk(top, top, root, "")
    return out


def declared_defaults(schema_path: str | Path) -> dict[str, Any]:
    """{dotted key: default} of every property with a ``default`` (:func:`declared_keys`'s
    spelling; a default kept with a shared definition counts)."""
    return {
        k: node["default"] for k, node in declared_keys(schema_path).items() if "default" in node
    }
