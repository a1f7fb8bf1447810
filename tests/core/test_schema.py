"""The config schema as the one declaration of every key (llmqueue.schema): its defaults filled
into a partial section, its keys each with a meaning and read by code, config/README.md's tables
rendered from it, and no config reader repeating a default it declares."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmqueue import docgen, schema
from llmqueue.errors import InputError
from llmqueue.studies import rule_files

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "config" / "README.md"


def write_schema(tmp_path: Path, section: dict[str, Any]) -> Path:
    """A root schema with one section `s` kept in its own file (as the study sections are)."""
    (tmp_path / "s.schema.yaml").write_text(
        yaml.safe_dump(
            {"$schema": "https://json-schema.org/draft/2020-12/schema", **section}, sort_keys=False
        )
    )
    root = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"seed": {"type": "integer", "minimum": 0}, "s": {"$ref": "s.schema.yaml"}},
    }
    path = tmp_path / "config.schema.yaml"
    path.write_text(yaml.safe_dump(root, sort_keys=False))
    return path


SECTION: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "$defs": {"positive": {"type": "number", "exclusiveMinimum": 0}},
    "properties": {
        "rate_per_s": {
            "$ref": "#/$defs/positive",
            "description": "the arrival rate",
            "x-unit": "requests/s",
        },
        "mode": {"enum": ["a", "b"], "default": "a", "description": "the mode"},
        "run": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "requests": {"type": "integer", "minimum": 10, "description": "measured"},
                "batches": {"type": "integer", "minimum": 5, "maximum": 100, "default": 20},
            },
            "default": {"requests": 1000},
        },
        "loads": {
            "type": "array",
            "items": {"$ref": "#/$defs/positive"},
            "minItems": 1,
            "uniqueItems": True,
            "description": "loads",
            "x-allowed": "each below the capacity",
        },
        "named": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"tag": {"type": "string", "default": "x", "description": "a tag"}},
            },
        },
    },
}


# ---- defaults ----------------------------------------------------------------------------------
def test_with_defaults_fills_a_partial_section_through_refs(tmp_path: Path) -> None:
    path = write_schema(tmp_path, SECTION)
    given = {"run": {"requests": 50}, "named": {"one": {}}}
    got = schema.with_defaults(given, "s", path)
    assert got == {
        "run": {"requests": 50, "batches": 20},
        "named": {"one": {"tag": "x"}},
        "mode": "a",
    }
    assert given == {"run": {"requests": 50}, "named": {"one": {}}}  # the input is not changed
    # an absent object takes its own default, and the defaults inside it
    assert schema.with_defaults({}, "s", path)["run"] == {"requests": 1000, "batches": 20}
    # one entry of a free-named map
    assert schema.with_defaults({}, "s.named.<name>", path) == {"tag": "x"}
    # a given value stays, even one the schema refuses (the config checks name it)
    assert schema.with_defaults({"mode": "c"}, "s", path)["mode"] == "c"


def test_with_defaults_refuses_an_undeclared_key(tmp_path: Path) -> None:
    path = write_schema(tmp_path, SECTION)
    with pytest.raises(InputError, match=r"^s\.run: .*'reqests'"):
        schema.with_defaults({"run": {"reqests": 5}}, "s", path)
    with pytest.raises(InputError, match="'s.nothing' is not declared"):
        schema.with_defaults({}, "s.nothing", path)


def test_the_shipped_sections_fill_as_the_snakefile_fills_them() -> None:
    """Every section of the shipped config: the library's with_defaults of the raw section gives
    what the Snakefile's one pass (fill_defaults of the whole config) gives."""
    raw = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    full = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    schema.fill_defaults(full)
    for name, value in raw.items():
        if isinstance(value, dict):
            assert schema.with_defaults(value, name) == full[name], name


# ---- the README's tables -----------------------------------------------------------------------
def test_allowed_text_states_type_range_list_and_condition(tmp_path: Path) -> None:
    path = write_schema(tmp_path, SECTION)
    rows = {r[0]: r for r in schema.config_rows("s", path)}
    assert list(rows) == [
        "`rate_per_s`",
        "`mode`",
        "`run.requests`",
        "`run.batches`",
        "`loads`",
        "`named.<name>.tag`",
    ]
    # the range narrowed by the check's bound on a rate (llmqueue.limits: 1e9 requests/s)
    assert schema.key_bounds()["rate_per_s"][1] == 1e9
    assert rows["`rate_per_s`"][1:4] == ["the arrival rate", "requests/s", "(0, 1e9]"]
    assert rows["`mode`"][3:] == ["`a`, `b`", "`a`"]
    # requests: its own range, narrowed by the run-length bound; its default from the object's
    assert rows["`run.requests`"][3].startswith("integer [10, ")
    assert rows["`run.requests`"][4] == "`1000`"
    assert rows["`run.batches`"][3:] == ["integer [5, 100]", "`20`"]
    assert rows["`loads`"][3] == "list, at least 1, each > 0, distinct; each below the capacity"
    assert rows["`named.<name>.tag`"][4] == "`x`"
    table = schema.render_config_table("s", path)
    assert table.splitlines()[0] == "| key | meaning | unit | allowed | default |"


def test_a_unit_stated_where_a_shared_object_is_used_reaches_its_keys() -> None:
    rows = {r[0]: r for r in schema.config_rows("token_limit")}
    assert rows["`limits.start`"][2] == "tokens"
    assert rows["`tradeoff.gamma_sweep.start`"][2] == ""


def test_every_key_of_the_schema_has_a_meaning() -> None:
    """A key declared without its meaning would leave an empty cell in config/README.md."""
    keys = schema.declared_keys()
    bare = [k for k, n in keys.items() if schema.is_leaf(n) and not n.get("description")]
    assert not bare, f"schema keys without a description: {bare}"


def test_config_readme_tables_are_the_schemas() -> None:
    """Each section of config/README.md holds its table as a generated block rendered from the
    schema (the docs job of make reproduce rewrites them); no hand-written key table is left."""
    text = README.read_text()
    blocks = {b.name: b for b in docgen.find_blocks(text, "config/README.md")}
    sections = schema.sections()
    assert set(blocks) == {f"config-{s}" for s in sections}
    for section in sections:
        block = blocks[f"config-{section}"]
        files = [str(p.relative_to(ROOT)) for p in schema.section_files(section)]
        assert list(block.sources) == files, section
        assert block.body == schema.render_config_table(section), (
            f"config/README.md's {section} table differs from the schema's (run make reproduce)"
        )
    prose = docgen.strip_blocks(text, "config/README.md")
    assert "| key |" not in prose, "a key table written by hand in config/README.md"


# ---- one declaration ---------------------------------------------------------------------------
def _code_names() -> set[str]:
    """Every quoted word, attribute and keyword name in the library and the workflow's code."""
    files = [
        *ROOT.glob("src/llmqueue/**/*.py"),
        *ROOT.glob("workflow/scripts/*.py"),
        *(ROOT / f for f in rule_files()),
        ROOT / "Snakefile",
    ]
    code = "\n".join(p.read_text() for p in files)
    return {
        *re.findall(r"""["'](\w+)["']""", code),
        *re.findall(r"\.(\w+)\b", code),
        *re.findall(r"\b(\w+)=", code),
    }


def unread_keys(keys: dict[str, dict[str, Any]], names: set[str]) -> list[str]:
    out = []
    for key in keys:
        last = key.rsplit(".", 1)[-1].removesuffix("[]")
        if not last.startswith("<") and last not in names:
            out.append(key)
    return out


def test_every_declared_key_is_read_by_the_code() -> None:
    """A key the schema declares and no code reads by name is declared in one place only."""
    names = _code_names()
    assert not unread_keys(schema.declared_keys(), names)
    assert unread_keys({"serving.kv_memory_fractoin": {}}, names) == ["serving.kv_memory_fractoin"]


# Config readers: the typed specs, the profile resolvers, the checks and the claim book.
READERS = [
    *sorted((ROOT / "src/llmqueue/studies").glob("*/spec.py")),
    *sorted((ROOT / "src/llmqueue/studies").glob("*/*_spec.py")),
    ROOT / "src/llmqueue/plan/spec.py",
    ROOT / "src/llmqueue/profiles.py",
    ROOT / "src/llmqueue/claims.py",
    *sorted((ROOT / "src/llmqueue/studies").glob("*/checks.py")),
    ROOT / "src/llmqueue/plan/checks.py",
]
# (file, key): a fallback that is not the schema's default, with why
NOT_A_SCHEMA_DEFAULT = {
    # a step profile without a verdict takes its fit.json's; the schema declares none
    ("profiles.py", "verdict"),
    # the description of a fit.json's step law (a result file, not the config)
    ("profiles.py", "description"),
}


def repeated_defaults(path: Path, defaults: dict[str, set[str]]) -> list[str]:
    """`.get("key", literal)` calls in `path` whose literal equals a default the schema declares
    for a key of that name (`defaults`: {key name: {repr of each declared default}})."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
        ):
            continue
        name = node.args[0].value
        try:
            value = ast.literal_eval(node.args[1])
        except ValueError:
            continue
        if name in defaults and repr(value) in defaults[name]:
            if (path.name, name) not in NOT_A_SCHEMA_DEFAULT:
                found.append(f"{path.name}:{node.lineno}: .get({name!r}, {value!r})")
    return found


def test_no_config_reader_repeats_a_default_of_the_schema(tmp_path: Path) -> None:
    """The specs, resolvers and checks read a section the schema's defaults filled
    (schema.with_defaults, or the Snakefile's fill_defaults), never `.get(key, default)` with the
    schema's own value: that would be the default's second declaration."""
    defaults: dict[str, set[str]] = {}
    for key, value in schema.declared_defaults().items():
        defaults.setdefault(key.rsplit(".", 1)[-1], set()).add(repr(value))
    found = [hit for path in READERS for hit in repeated_defaults(path, defaults)]
    assert not found, found
    # the check sees such a call
    probe = tmp_path / "spec.py"
    probe.write_text('x = section.get("kv_memory_fraction", 0.9)\n')
    assert repeated_defaults(probe, {"kv_memory_fraction": {repr(0.9)}}) == [
        "spec.py:1: .get('kv_memory_fraction', 0.9)"
    ]
