"""Named profiles: a time law by name, from config values or from the fit.json the profiling part
of the pipeline wrote.

Three config sections name laws (``config/config.yaml``; ``config/README.md`` describes them):

- ``latency_profiles``: one request at a time, S = a N + b0 (:class:`~llmqueue.latency.LinearLatency`,
  Eq. 3), :func:`resolve_linear_profile`;
- ``batch_profiles``: a batch, Eq. (18) (:class:`~llmqueue.latency.BatchLatency`),
  :func:`resolve_batch_profile`;
- ``step_profiles``: one iteration of continuous batching (:class:`~llmqueue.latency.StepLaw`),
  :func:`resolve_step_profile`.

A profile is ``kind: fixed`` (its numbers in config) or ``kind: fit`` (``source`` and ``model``
name ``results/profiling/<source>/<model>/fit.json``, :func:`fit_json_path`; ``depth: full``
takes a CPU sweep's full-depth extrapolation, :func:`fit_section`). :func:`named_latency` finds
a name in the sections a batch former reads (the operator CLI's ``--profile``),
:func:`law_of_setting` resolves a study setting that is either a profile name or an inline
dict of numbers, and :func:`kv_tokens_of_fit` gives the KV-cache budget (tokens) of the model
and GPU a fit.json describes (:func:`llmqueue.hardware.kvcache.kv_tokens`). Units: s, s/token.

Every read checks what it reads, from config or fit.json alike: a profile is a mapping, its keys
are there, its numbers are finite and in [0, :data:`~llmqueue.limits.MAX_TIME_S`] (numeric text
such as YAML's ``1e-3`` counts as a number); else one :class:`~llmqueue.errors.InputError` naming
the profile and the key (``latency_profiles.fast.a_s_per_token must be a number in ...``) and,
for a fit.json, the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw
from llmqueue.limits import MAX_MEMORY_GIB, MAX_TIME_S, number
from llmqueue.schema import with_defaults

__all__ = [
    "Latency",
    "SECTIONS",
    "FIT_DEPTHS",
    "STEP_VARIANTS",
    "fit_section",
    "fit_json_path",
    "read_fit",
    "resolve_linear_profile",
    "resolve_batch_profile",
    "resolve_step_profile",
    "named_latency",
    "law_of_setting",
    "check_setting",
    "setting_fit_paths",
    "kv_tokens_of_fit",
]

Latency = BatchLatency | LinearLatency | StepLaw
SECTIONS = ("step_profiles", "batch_profiles", "latency_profiles")


FIT_DEPTHS = ("measured", "full")


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """`value` when it is a mapping (a profile, a fit.json entry); else an InputError at `where`."""
    if not isinstance(value, Mapping):
        raise InputError(f"{where} must be a mapping of keys, got {_shown(value)}")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _coefficient(m: Mapping[str, Any], key: str, where: str, unit: str) -> float:
    """``m[key]``, a law's coefficient: a finite number in [0, MAX_TIME_S] (the range the laws
    accept); else an InputError naming ``where.key``, the range and what was given."""
    if key not in m:
        raise InputError(f"{where}: missing key {key!r} (a number in [0, {MAX_TIME_S:g}] {unit})")
    return number(m[key], f"{where}.{key}", lo=0, hi=MAX_TIME_S, unit=unit)


def _solved_from(profile: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The claim ids of ``solved_from`` (a list) of a profile its schema's defaults filled."""
    ids = profile["solved_from"]
    if not isinstance(ids, list | tuple):
        raise InputError(f"{where}.solved_from must be a list of claim ids, got {_shown(ids)}")
    return tuple(str(c) for c in ids)


def _filled(profile: Any, section: str, where: str) -> dict[str, Any]:
    """A profile of config `section` (``latency_profiles``, ``batch_profiles``,
    ``step_profiles``) with the defaults its schema declares filled in (:mod:`llmqueue.schema`);
    InputError at `where` for a value that is not a mapping or a key the schema lacks."""
    _mapping(profile, where)
    try:
        return with_defaults(profile, f"{section}.<name>")
    except InputError as err:
        raise InputError(f"{where}: {err}") from None


def _fit_file(profile: Mapping[str, Any]) -> str:
    return f"results/profiling/{profile.get('source')}/{profile.get('model')}/fit.json"


def fit_section(
    fit: Mapping[str, Any], key: str, depth: str, where: str
) -> tuple[Mapping[str, Any], str]:
    """The ``key`` entry (``linear`` or ``batch``) of a parsed fit.json and the label to show.

    ``depth: measured`` (default) takes the law at the depth that was timed; ``depth: full`` takes
    the full-depth extrapolation of a fewer-layer (CPU) measurement, ``fit["full_depth"][key]``,
    which exists only when the sweep ran fewer layers and is usable only when the 1/2/4-layer
    depth check found time linear in layers (``full_depth.valid``). A full-depth source (a GPU,
    the roofline, the paper) is its own full depth. `where` names the config key in errors.
    """
    if depth not in FIT_DEPTHS:
        raise InputError(f"{where}.depth: must be one of {list(FIT_DEPTHS)}, got {depth!r}")
    label = str(fit.get("label", fit.get("source", "")))
    if depth == "full" and "full_depth" in fit:
        fd = _mapping(fit["full_depth"], f"{where}: its fit.json's full_depth")
        if not fd.get("valid"):
            raise InputError(
                f"{where}: depth full asked for, but {fit.get('source')}/{fit.get('model')} failed its "
                "depth check (time not linear in layers), so it has no full-depth extrapolation"
            )
        if key not in fd:
            raise InputError(f"{where}: its fit.json's full_depth has no {key!r} entry")
        entry = _mapping(fd[key], f"{where}: its fit.json's full_depth.{key}")
        return entry, str(fd.get("label", label))
    if key not in fit:
        raise InputError(f"{where}: its fit.json has no {key!r} entry")
    return _mapping(fit[key], f"{where}: its fit.json's {key!r} entry"), label


def fit_json_path(profile: Mapping[str, Any], where: str = "profile") -> str | None:
    """``results/profiling/<source>/<model>/fit.json``, the file a ``kind: fit`` profile (latency
    or batch) is read from; None for a fixed profile. InputError (at `where`, the profile's
    config key) for a fit profile without ``source`` or ``model`` (names, not empty)."""
    _mapping(profile, where)
    if profile.get("kind") != "fit":  # a batch profile without a kind is fixed
        return None
    for key in ("source", "model"):
        value = profile.get(key)
        if not isinstance(value, str) or not value.strip():
            raise InputError(
                f"{where}: kind fit needs {key} (a name: results/profiling/<source>/<model>/"
                f"fit.json), got {_shown(value) if key in profile else 'none'}"
            )
    return _fit_file(profile)


def read_fit(
    profile_cfg: Mapping[str, Any], base_dir: str | Path = ".", where: str = "profile"
) -> dict[str, Any] | None:
    """The parsed fit.json a config profile of kind ``fit`` reads (None for ``kind: fixed``);
    InputError when it has not been built yet or is not a JSON object."""
    rel = fit_json_path(profile_cfg, where)
    if rel is None:
        return None
    path = Path(base_dir) / rel
    if not path.is_file():
        raise InputError(
            f"{where}: {rel} does not exist: the profiling part of the pipeline builds it "
            f"(`make reproduce`, or `.venv/bin/snakemake --cores all {rel}`)"
        )
    try:
        data = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise InputError(f"{where}: {rel} is not UTF-8 text (expected JSON)") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: {rel} is not JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: {rel} must hold a JSON object, got {type(data).__name__}")
    return data


def named_latency(
    config: Mapping[str, Any],
    name: str,
    kind: str,
    base_dir: str | Path = ".",
    *,
    where: str | None = None,
) -> tuple[Latency, dict[str, Any] | None]:
    """The time law config profile `name` gives a batch former of `kind` (a Policy kind):
    ``continuous`` -> ``step_profiles``; others -> ``batch_profiles``, else ``latency_profiles``.
    Returns (law, its fit.json or None). `where` (the CLI's ``--config FILE``) starts the message
    of an InputError about the profile (a missing key, a number out of range, a bad fit.json)."""
    want = ("step_profiles",) if kind == "continuous" else ("batch_profiles", "latency_profiles")
    sections: dict[str, Mapping[str, Any]] = {}
    try:
        for section in want:
            sections[section] = _mapping(config.get(section) or {}, section)
        for section in want:
            if name not in sections[section]:
                continue
            prof = _mapping(sections[section][name], f"{section}.{name}")
            fit = read_fit(prof, base_dir, f"{section}.{name}")
            if section == "step_profiles":
                return resolve_step_profile(name, prof, fit), fit
            if section == "batch_profiles":
                return resolve_batch_profile(name, dict(prof), fit), fit
            return resolve_linear_profile(name, prof, fit), fit
    except InputError as err:
        raise InputError(f"{where}: {err}" if where else str(err)) from None
    known = sorted({str(n) for s in want for n in sections[s]})
    looked = " or ".join(f"config {s}" for s in want)
    raise InputError(
        f"--profile {name!r}: no such profile for {kind} batching in {looked}; known: {known}"
    )


def kv_tokens_of_fit(fit: Mapping[str, Any] | None, *, memory_fraction: float = 1.0) -> int:
    """KV-cache budget (tokens) of the model and GPU a fit.json describes: the GPU's memory (a
    named spec, or the memory a measured GPU reported) after the fp16 weights, over the model's
    KV bytes per token (:func:`llmqueue.hardware.kvcache.kv_tokens`)."""
    from llmqueue.hardware.kvcache import kv_tokens

    if not fit or "model" not in fit:
        raise InputError("--kv-tokens auto needs --profile NAME of a source with a model and GPU")
    gpu = fit.get("gpu")
    at = f"--kv-tokens auto: the profile's fit.json ({fit.get('source')!r})"
    hardware = fit.get("hardware")
    if isinstance(gpu, Mapping) and "memory_gib" in gpu:
        mem = number(
            gpu["memory_gib"], f"{at} gpu.memory_gib", lo=0, hi=MAX_MEMORY_GIB, lo_open=True
        )
    elif isinstance(hardware, Mapping) and "gpu_memory_gib" in hardware:
        mem = number(
            hardware["gpu_memory_gib"],
            f"{at} hardware.gpu_memory_gib",
            lo=0,
            hi=MAX_MEMORY_GIB,
            lo_open=True,
        )
    else:
        raise InputError(
            f"--kv-tokens auto: the profile's source {fit.get('source')!r} names no GPU memory "
            "(a CPU source); give --kv-tokens N"
        )
    return kv_tokens(str(fit["model"]), memory_gib=mem, memory_fraction=memory_fraction)


def resolve_linear_profile(
    name: str,
    profile: Mapping[str, Any],
    fit: Mapping[str, Any] | None = None,
    *,
    where: str | None = None,
) -> LinearLatency:
    """Build the LinearLatency a config profile names.

    A profile is either ``{kind: fixed, a_s_per_token, b0_s, verdict[, solved_from]}`` or
    ``{kind: fit, source, model[, depth]}``, in which case `fit` is the parsed
    ``results/profiling/<source>/<model>/fit.json`` whose ``linear`` entry holds slope and
    intercept of S on N (``depth: full``: its full-depth extrapolation, see :func:`fit_section`).
    """
    where = where or f"latency_profiles.{name}"
    profile = _filled(profile, "latency_profiles", where)
    kind = profile.get("kind")
    verdict = str(profile["verdict"])
    solved = _solved_from(profile, where)
    if kind == "fixed":
        return LinearLatency(
            _coefficient(profile, "a_s_per_token", where, "s/token"),
            _coefficient(profile, "b0_s", where, "s"),
            name,
            "config (fixed values)",
            verdict,
            solved,
        )
    if kind == "fit":
        if fit is None or "linear" not in fit:
            raise InputError(f"latency profile {name!r} needs its fit.json with a 'linear' entry")
        depth = str(profile["depth"])
        lin, label = fit_section(fit, "linear", depth, where)
        described = fit.get("description", profile.get("source"))
        if depth == "full" and "full_depth" in fit:
            described = f"{label}; {fit['full_depth'].get('method', '')}; {described}"
        source = f"least-squares fit: {described}"
        at = f"{where}: {_fit_file(profile)}: linear"
        return LinearLatency(
            _coefficient(lin, "slope", at, "s/token"),
            _coefficient(lin, "intercept", at, "s"),
            name,
            source,
            verdict,
            solved,
        )
    raise InputError(f"latency profile {name!r}: kind must be 'fixed' or 'fit', got {kind!r}")


def resolve_batch_profile(
    name: str, cfg: dict, fit: dict | None = None, *, where: str | None = None
) -> BatchLatency:
    """The BatchLatency a config ``batch_profiles`` entry names.

    ``kind: fixed`` holds k1..k4 (s, s/token) and optionally ``solved_from`` (the claim ids a
    back-solved profile was solved from); ``kind: fit`` names ``source`` and ``model`` and
    takes k1..k4 from ``results/profiling/<source>/<model>/fit.json`` (its ``batch`` entry, or
    with ``depth: full`` the full-depth extrapolation of a fewer-layer CPU sweep), with the fit's
    own label and verdict ("predicted" or "measured")."""
    where = where or f"batch_profiles.{name}"
    cfg = _filled(cfg, "batch_profiles", where)
    kind = cfg["kind"]
    units = {"k1": "s", "k2": "s", "k3": "s/token", "k4": "s/token"}
    if kind == "fixed":
        missing = [key for key in units if key not in cfg]
        if missing:
            raise InputError(
                f"{where}: kind fixed needs k1, k2, k3, k4 ({', '.join(map(repr, missing))} "
                f"missing; each a number in [0, {MAX_TIME_S:g}])"
            )
        k1, k2, k3, k4 = (_coefficient(cfg, key, where, unit) for key, unit in units.items())
        return BatchLatency(
            k1,
            k2,
            k3,
            k4,
            name=name,
            source=str(cfg["description"]),
            verdict=str(cfg["verdict"]),
            solved_from=_solved_from(cfg, where),
        )
    if kind == "fit":
        if fit is None or "batch" not in fit:
            raise InputError(f"{where}: needs its fit.json with a 'batch' entry ({_fit_file(cfg)})")
        bb, label = fit_section(fit, "batch", str(cfg["depth"]), where)
        at = f"{where}: {_fit_file(cfg)}: batch"
        k1, k2, k3, k4 = (_coefficient(bb, key, at, unit) for key, unit in units.items())
        return BatchLatency(
            k1,
            k2,
            k3,
            k4,
            name=name,
            source=label or str(cfg.get("source")),
            verdict=str(fit.get("verdict", cfg["verdict"])),
            solved_from=_solved_from(cfg, where),
        )
    raise InputError(f"batch_profiles.{name}: kind must be 'fixed' or 'fit', got {kind!r}")


STEP_VARIANTS = ("step", "step_graph")


def resolve_step_profile(
    name: str,
    profile: Mapping[str, Any],
    fit: Mapping[str, Any] | None = None,
    *,
    where: str | None = None,
) -> StepLaw:
    """Build the StepLaw a config ``step_profiles`` entry names.

    A profile is either ``{kind: fixed, c0_s, c_tok_s, c_ctx_s, verdict}`` or
    ``{kind: fit, source, model[, variant][, verdict]}``, in which case `fit` is the parsed
    ``results/profiling/<source>/<model>/fit.json`` and ``variant`` (default ``step``) names its
    entry: ``step`` (eager iterations, or a model source's own t1/t2 on the step-law grid) or
    ``step_graph`` (decode steps replayed from a CUDA graph). The verdict is the profile's, else
    the fit's (predicted, measured, measured-kernels).
    """
    where = where or f"step_profiles.{name}"
    profile = _filled(profile, "step_profiles", where)
    kind = profile.get("kind")
    units = {"c0_s": "s", "c_tok_s": "s/token", "c_ctx_s": "s/token"}
    if kind == "fixed":
        missing = [key for key in units if key not in profile]
        if missing:
            raise InputError(
                f"{where}: kind fixed needs c0_s, c_tok_s, c_ctx_s "
                f"({', '.join(map(repr, missing))} missing; each a number in [0, {MAX_TIME_S:g}])"
            )
        c0, ct, cc = (_coefficient(profile, key, where, unit) for key, unit in units.items())
        return StepLaw(
            c0, ct, cc, name, "config (fixed values)", str(profile.get("verdict", "independent"))
        )
    if kind == "fit":
        variant = str(profile["variant"])
        if variant not in STEP_VARIANTS:
            raise InputError(
                f"step_profiles.{name}.variant: must be one of {list(STEP_VARIANTS)}, got {variant!r}"
            )
        file = _fit_file(profile)
        if fit is None:
            raise InputError(f"step profile {name!r} needs its fit.json ({file})")
        if variant not in fit:
            have = [v for v in STEP_VARIANTS if v in fit]
            why = fit.get("step_missing", "")
            raise InputError(
                f"step profile {name!r}: {file} has no {variant!r} step law (has {have})"
                + (f": {why}" if why else "")
            )
        at = f"{where}: {file}: {variant}"
        st = _mapping(fit[variant], at)
        verdict = str(profile.get("verdict", fit.get("verdict", "independent")))
        label = str(fit.get("label", profile.get("source")))
        c0, ct, cc = (_coefficient(st, key, at, unit) for key, unit in units.items())
        source = (
            f"{label}: {variant} fit (R^2 {_r2(st.get('r2')):.3f}, "
            f"n {st.get('n', '?')}); {st.get('description', '')}"
        )
        return StepLaw(c0, ct, cc, name, source, verdict)
    raise InputError(f"step profile {name!r}: kind must be 'fixed' or 'fit', got {kind!r}")


def _r2(value: Any) -> float:
    """A fit's R^2 as its label shows it (NaN when absent or not a number)."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


# ---- a study setting: a profile name or an inline dict of numbers ----------------------------------
_SETTING_SECTIONS = {
    "batch": "batch_profiles",
    "step": "step_profiles",
    "latency": "latency_profiles",
}
_INLINE_KEYS = {
    "batch": ("k1", "k2", "k3", "k4"),
    "step": ("c0_s", "c_tok_s", "c_ctx_s"),
    "latency": ("a_s_per_token", "b0_s"),
}


def _section_of(kind: str) -> str:
    if kind not in _SETTING_SECTIONS:
        raise InputError(f"a setting's law is one of {sorted(_SETTING_SECTIONS)}, got {kind!r}")
    return _SETTING_SECTIONS[kind]


def setting_fit_paths(value: Any, kind: str, config: Mapping[str, Any]) -> list[str]:
    """The fit.json a setting's law is read from (a profile name of kind ``fit``), else none: the
    input files of a workflow job that resolves it."""
    if not isinstance(value, str):
        return []
    section = _section_of(kind)
    prof = (config.get(section) or {}).get(value)
    path = fit_json_path(prof, f"{section}.{value}") if isinstance(prof, Mapping) else None
    return [path] if path else []


def law_of_setting(
    value: Any,
    kind: str,
    config: Mapping[str, Any],
    *,
    where: str,
    name: str,
    fits: Mapping[str, Any] | None = None,
) -> Latency:
    """The law a study setting gives for `kind` (``batch``, ``step`` or ``latency``): `value` is
    either the name of a config profile of that kind's section, resolved with its fit.json from
    `fits` (path -> parsed contents; None checks the name only and needs a ``kind: fixed``
    profile or an inline dict), or an inline dict of the law's numbers (named `name`). `where`
    names the config key in errors, which list the allowed names."""
    section = _section_of(kind)
    if isinstance(value, str):
        known = _mapping(config.get(section) or {}, section)
        if value not in known:
            raise InputError(
                f"{where}: unknown {section[:-1].replace('_', ' ')} {value!r}; defined: {sorted(known)}"
            )
        prof = _mapping(known[value], f"{section}.{value}")
        path = fit_json_path(prof, f"{section}.{value}")
        fit = (fits or {}).get(path) if path else None
        if kind == "batch":
            return resolve_batch_profile(value, dict(prof), fit)
        if kind == "step":
            return resolve_step_profile(value, prof, fit)
        return resolve_linear_profile(value, prof, fit)
    if not isinstance(value, Mapping):
        raise InputError(
            f"{where}: a profile name or a mapping of {', '.join(_INLINE_KEYS[kind])}, got {value!r}"
        )
    missing = [k for k in _INLINE_KEYS[kind] if k not in value]
    if missing:
        raise InputError(f"{where}: missing {missing}; give {', '.join(_INLINE_KEYS[kind])}")
    fixed = {"kind": "fixed", **dict(value)}
    try:
        if kind == "batch":
            return resolve_batch_profile(name, fixed, where=where)
        if kind == "step":
            return resolve_step_profile(name, fixed, where=where)
        return resolve_linear_profile(name, fixed, where=where)
    except InputError as err:
        text = str(err)
        raise InputError(text if text.startswith(where) else f"{where}: {text}") from None


def check_setting(value: Any, kind: str, config: Mapping[str, Any], *, where: str) -> None:
    """Check a study setting before any job runs (no fit.json needed): a profile name must exist
    in its section, an inline dict must make a valid law."""
    if isinstance(value, str):
        known = config.get(_section_of(kind)) or {}
        if value not in known:
            what = _section_of(kind)[:-1].replace("_", " ")
            raise InputError(f"{where}: unknown {what} {value!r}; defined: {sorted(known)}")
        return
    law_of_setting(value, kind, config, where=where, name=where)
