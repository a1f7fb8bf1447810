"""The config schema stops bad configs before any job starts, naming the key at fault.

Most cases call llmqueue.schema.fill_defaults, as the Snakefile does, on the shipped config with
one change (fast); two run
`snakemake -n` end to end to check the message reaches the user.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.schema import fill_defaults
from llmqueue.studies import rule_files

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")
SNAKEMAKE = ROOT / ".venv" / "bin" / "snakemake"


def base_config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def changed(path: str, value: Any) -> dict[str, Any]:
    """The shipped config with `value` at the dotted `path` (created if missing)."""
    cfg = copy.deepcopy(base_config())
    node = cfg
    keys = path.split(".")
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return cfg


def test_shipped_config_is_valid() -> None:
    fill_defaults(copy.deepcopy(base_config()), SCHEMA)


UNKNOWN_KEYS = [
    "seeed",  # top-level typo
    "token_limit.limitz",
    "token_limit.patient.rate",
    "token_limit.simulation.request",
    "token_limit.tradeoff.alpha",
    "claims.tolerence",
    "data.trace",
    "batching.bogus_key",
    "profiling.bogus_key",
]


@pytest.mark.parametrize("path", UNKNOWN_KEYS)
def test_unknown_key_is_rejected_by_name(path: str) -> None:
    with pytest.raises(Exception) as err:
        fill_defaults(changed(path, 1), SCHEMA)
    assert path.rsplit(".", 1)[-1] in str(err.value), str(err.value)


BAD_VALUES = [
    ("seed", -1),
    ("seed", "twenty"),
    ("token_limit.patient.rate_per_s", 0),
    ("token_limit.patient.rate_per_s", -0.5),
    ("token_limit.patient.rate_per_s", "fast"),
    ("token_limit.impatient.patience_s", 0),
    ("token_limit.limits.step", 0),
    ("token_limit.simulation.requests", 10),
    ("token_limit.simulation.requests", 1500000.5),
    ("token_limit.tradeoff.alpha_patient", 1.5),
    ("token_limit.tokens", 7),
    ("latency_profiles.table1_fit.kind", "guess"),
    ("latency_profiles.back_solved.b0_s", -1),
    ("batch_profiles.paper_k8.k3", -1e-4),
    ("claims.tolerances.time.kind", "approx"),
]


@pytest.mark.parametrize(("path", "value"), BAD_VALUES)
def test_bad_value_is_rejected_naming_the_key(path: str, value: Any) -> None:
    with pytest.raises(Exception) as err:
        fill_defaults(changed(path, value), SCHEMA)
    message = str(err.value)
    assert isinstance(err.value, InputError), message
    # The message names the key at fault, dotted (jsonschema's instance path).
    assert message.startswith(f"{path}: "), message


def run_dry(tmp_path: Path, cfg: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    configfile = tmp_path / "config.yaml"
    configfile.write_text(yaml.safe_dump(cfg))
    return subprocess.run(
        [str(SNAKEMAKE), "-n", "--quiet", "all", "--configfile", str(configfile)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_snakemake_stops_on_mistyped_key(tmp_path: Path) -> None:
    done = run_dry(tmp_path, changed("token_limit.patient.rate_per_sec", 0.025))
    assert done.returncode != 0
    assert "rate_per_sec" in done.stdout + done.stderr


def test_snakemake_stops_on_bad_value(tmp_path: Path) -> None:
    done = run_dry(tmp_path, changed("token_limit.impatient.rate_per_s", -1))
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "rate_per_s" in out and "impatient" in out


def test_snakemake_config_override_is_validated() -> None:
    done = subprocess.run(
        [str(SNAKEMAKE), "-n", "--quiet", "all", "--config", "seed=-3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "seed" in done.stdout + done.stderr


# ---- the schema as the one declaration of the defaults (llmqueue.schema) ----------------
def test_every_declared_default_is_filled_in_every_section() -> None:
    """fill_defaults fills the defaults of every section file (serving, ssjf, plan, ...; Snakemake's
    validate would fill only the top file's, and it does not see the study sections the root
    gains from the catalogue), and a default kept with a shared definition ($ref) as well."""
    from llmqueue.schema import declared_defaults, fill_defaults

    declared = declared_defaults(SCHEMA)
    cfg = base_config()
    del cfg["serving"]["kv_memory_fraction"], cfg["ssjf"]["claim_load"]
    del cfg["multibin"]["llm"]["capacity"], cfg["latency_profiles"][cfg["token_limit"]["profile"]]
    fill_defaults(cfg, SCHEMA)
    assert cfg["serving"]["kv_memory_fraction"] == declared["serving.kv_memory_fraction"]
    assert cfg["ssjf"]["claim_load"] == declared["ssjf.claim_load"]
    assert cfg["multibin"]["llm"]["capacity"] == declared["multibin.llm.capacity"]
    assert cfg["serving"]["kv_tokens"] is None and "serving.kv_tokens" in declared
    # every declared default of a fixed key path reaches the shipped config
    full = base_config()
    fill_defaults(full, SCHEMA)
    for key in declared:
        if "<name>" in key or "[]" in key:
            continue
        node: Any = full
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):  # a section the config has
            assert parts[-1] in node, key


def test_fill_defaults_names_the_key_of_a_bad_value() -> None:
    from llmqueue.errors import InputError
    from llmqueue.schema import fill_defaults

    with pytest.raises(InputError, match=r"^serving\.max_load: "):
        fill_defaults(changed("serving.max_load", 1.5), SCHEMA)


def test_no_rule_repeats_a_default_the_schema_declares() -> None:
    """A rule reads a filled setting as config[...]; `.get(key, default)` on a key the schema gives
    a default would be its second declaration (and could drift from the schema's)."""
    import re

    from llmqueue.schema import declared_defaults

    names = {key.rsplit(".", 1)[-1] for key in declared_defaults(SCHEMA)}
    sources = [ROOT / "Snakefile", *(ROOT / f for f in rule_files())]
    found = [
        f"{path.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}: .get({m.group(1)!r})"
        for path in sources
        for text in [path.read_text()]
        for m in re.finditer(r"""\.get\(\s*["'](\w+)["']""", text)
        if m.group(1) in names
    ]
    assert not found, found
    # the check sees such a call
    assert re.search(r"""\.get\(\s*["'](\w+)["']""", 'SERV.get("max_load", 0.97)')


def _readme_keys() -> dict[str, str]:
    """{dotted key: its section} of every key config/README.md's tables name (a row's first cell,
    each backticked key taken relative to the section heading it sits under)."""
    import re

    keys: dict[str, str] = {}
    section = None
    for line in (ROOT / "config" / "README.md").read_text().splitlines():
        head = re.match(r"^## `(\w+)`", line)
        if head:
            section = head.group(1)
        elif section and line.startswith("| `"):
            for key in re.findall(r"`([^`]+)`", line.split("|")[1]):
                keys[key if key == section else f"{section}.{key}"] = section
    return keys


def _segments(key: str) -> list[str]:
    import re

    return [s for s in re.split(r"\.|\[\]", key) if s]


def _free_map(node: dict[str, Any]) -> bool:
    """A schema object that declares no keys of its own (free-form: overrides, shapes)."""
    return node.get("type") == "object" and not node.get("properties")


def _documents(doc: str, key: str, node: dict[str, Any], *, exact: bool = False) -> bool:
    """Whether README key `doc` names schema key `key` (or, unless `exact`, a key above it: a row
    may describe a whole object or list of objects; or its entries, `key.<name>`, when `key` is a
    free-form object); a <placeholder> stands for any name."""
    d, k = _segments(doc), _segments(key)
    if len(d) > len(k) and not (_free_map(node) and len(d) == len(k) + 1):
        return False
    if exact and len(d) < len(k):
        return False
    return all(
        a == b or (a.startswith("<") and a.endswith(">")) for a, b in zip(d, k, strict=False)
    )


def test_config_readme_documents_every_key_the_schema_declares_and_no_other() -> None:
    """The schema declares the keys; config/README.md's tables must name each one (a row may
    cover an object or a list of objects whole) and name no key the schema lacks."""
    from llmqueue.schema import declared_keys

    keys = declared_keys(SCHEMA)
    docs = _readme_keys()

    def leaf(node: dict[str, Any]) -> bool:
        items = node.get("items")
        return not (
            node.get("properties")
            or isinstance(node.get("additionalProperties"), dict)
            or (isinstance(items, dict) and items.get("properties"))
        )

    undocumented = sorted(k for k, n in keys.items() if leaf(n) and not any(
        _documents(d, k, n) for d in docs))  # fmt: skip
    assert not undocumented, f"keys of the schema missing from config/README.md: {undocumented}"
    unknown = sorted(d for d in docs if not any(
        _documents(d, k, n, exact=True) for k, n in keys.items()))  # fmt: skip
    assert not unknown, f"config/README.md names keys the schema does not declare: {unknown}"
    # the check sees a gap and a stale row
    num: dict[str, Any] = {"type": "number"}
    assert not _documents("serving.kv_tokens", "serving.kv_memory_fraction", num)
    assert _documents("ssjf.official.predictions", "ssjf.official.predictions[].edges", num)
    assert not _documents("ssjf.official.predictions", "ssjf.official", num, exact=True)
    assert not _documents("serving.max_load.x", "serving.max_load", num, exact=True)
    assert _documents("a.engine.<name>", "a.engine", {"type": "object"}, exact=True)
