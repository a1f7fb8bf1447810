"""Adversarial input everywhere: every flag of every operator command, every token-law spec and
mutated copies of the config.

Each CLI call must end, within a bounded time, in one of two ways: exit 0 with strict JSON (no
bare NaN or Infinity; no mean beside ``"unstable": true``), or exit 2 with one line on stderr
that names a flag of the command line (or a required one it lacks). Never a traceback, an
internal error (exit 1) or a hang. The same for files that look right but are not: a user's
``--config`` whose profiles (and their fit.json) have a missing key or a bad number (the line
names ``--config``, the profile and the key), a ``--trace`` whose token counts overflow the
engine's integers (the line names ``--trace``, the column and the row), and sizes each in range
whose product is not (a ``--limit`` range times ``--patience`` or ``--simulate``; servers times
the batch cap or the KV block size), refused at once with the estimate and the limit. A law spec
either parses to a law whose first two moments are finite or is refused with an InputError; a
mutated config is accepted or refused (schema or checks) before any job, never by a crash.
Examples are drawn by hypothesis from fixed seeds (derandomized), so a failure reproduces.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llmqueue.cli import main
from llmqueue.errors import InputError
from llmqueue.limits import MAX_ENGINE_ENTRIES, MAX_TOKENS
from llmqueue.policy import BATCHING, ORDERS, ROUTED_FORMERS, ROUTERS
from llmqueue.studies import check_config
from llmqueue.tokens import parse_law

ROOT = Path(__file__).resolve().parents[2]
TRACE = "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
MOONCAKE = "data/traces/mooncake-fast25/synthetic_trace.jsonl"  # with prompt block ids
SECONDS = 60  # the most one call may take, the engine's kernels compiled (the fixture below)
FUZZ = settings(
    max_examples=40,
    deadline=None,  # the time bound is checked per call below, with its own message
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# values a careless or hostile user types into a numeric flag
NASTY_NUMBERS = [
    "0", "-1", "-0", "1e-300", "1e308", "1e19", "nan", "inf", "-inf", "abc", "", "1,5",
    "0x10", "1e999", "9" * 40, "2.5", "3", "1e5",
]  # fmt: skip


def number(lo: float, hi: float) -> st.SearchStrategy[str]:
    """A flag's value: a sane number in [lo, hi] most of the time, else a nasty one."""
    sane = st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.6g}")
    return st.one_of(sane, sane, st.sampled_from(NASTY_NUMBERS))


def count(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.one_of(st.integers(lo, hi).map(str), st.sampled_from(NASTY_NUMBERS))


LAWS = st.one_of(
    st.sampled_from(
        [
            "lognormal:mu=5,sigma=1",
            "lognormal:mu=5,sigma=1,cap=2048",
            "uniform:low=1,high=500",
            "exponential:mean=200",
            "deterministic:value=100",
            "truncnorm:mean=300,sd=100",
            f"trace:{TRACE}:GeneratedTokens",
            "lognormal:mu=700,sigma=1",
            "lognormal:mu=1,sigma=40",
            "exponential:mean=1e200",
            "deterministic:value=1e19",
            "uniform:low=5,high=1",
            "lognormal:mu=5",
            "trace:/no/such.csv:x",
            "nonsense",
            "lognormal:mu=nan,sigma=1",
            "weibull:shape=0.6,scale=300",
            "weibull:shape=0.05,scale=1e6",
            "pareto:alpha=2.5,xm=100",
            "pareto:alpha=1.2,xm=100",
            "pareto:alpha=1.2,xm=100,cap=4000",
            "quantiles:tests/data/laws/quantiles.csv",
            "quantiles:/no/such.csv",
            "quantiles:tests/data",
        ]
    ),
    st.builds(
        lambda kind, a, b: f"{kind}:{a},{b}",
        st.sampled_from(
            [
                "lognormal",
                "uniform",
                "exponential",
                "truncnorm",
                "deterministic",
                "weibull",
                "pareto",
            ]
        ),
        st.sampled_from(
            [
                "mu=3",
                "low=0",
                "mean=1e9",
                "value=-1",
                "sigma=0",
                "mean=5",
                "x=1",
                "shape=0.5",
                "alpha=0",
            ]
        ),
        st.sampled_from(
            [
                "sigma=2",
                "high=1e10",
                "sd=1e300",
                "cap=0",
                "cap=1e12",
                "sigma=30",
                "scale=1e12",
                "xm=1",
            ]
        ),
    ),
)


# One small valid run of every batch former (central, and behind a router where it takes one) and
# of plan: the warm-up that compiles the engine's kernels before any call is timed. A cold
# compile of plan's kernels alone takes longer than SECONDS on a small VM, and which fuzzed call
# comes first in a fresh checkout (empty Numba cache) depends on the test order, so the bound
# would otherwise measure the compiler and the order rather than the call.
WARM_LAWS = {
    "none": ["--latency", "a=0.002,b0=0.05"],
    "continuous": ["--step", "c0=0.02,c_tok=1e-5,c_ctx=1e-7", "--max-batch", "8"],
    "fixed": ["--batch", "4"],
    "multibin": ["--batch", "4", "--bins", "2", "--predictor", "oracle"],
}
WARM_BATCH_TIME = ["--batch-time", "k1=0,k2=0.05,k3=1e-5,k4=0.002", "--max-batch", "8"]


@pytest.fixture(scope="module", autouse=True)
def compiled_engine() -> None:
    base = ["simulate", "--tokens", "deterministic:value=50", "--rate", "0.01"]
    base += ["--requests", "2000", "--warmup", "100"]
    calls = []
    for kind in BATCHING:
        law = WARM_LAWS.get(kind, WARM_BATCH_TIME)
        if kind in ("fixed", "multibin"):
            law = WARM_BATCH_TIME[:2] + WARM_LAWS[kind]
        calls.append([*base, "--batching", kind, *law])
        if kind in ROUTED_FORMERS:
            calls.append([*base, "--batching", kind, *law, "--replicas", "2", "--router", "jsq"])
    calls.append(["plan", "--tokens", "lognormal:mu=5,sigma=1", "--slo", "ttft_p99=2", "--rate",
                  "max", "--step", "c0=0.02,c_tok=1e-5,c_ctx=1e-7", "--requests", "600",
                  "--warmup", "60", "--tolerance", "0.2", "--kv-tokens", "40000", "--replicas",
                  "1:2", "--router", "central,round_robin", "--max-batch", "8", "--json"])  # fmt: skip
    for argv in calls:
        code, _, err, _ = run_cli(*argv)
        assert code == 0, f"warm-up {' '.join(argv)}: {err}"


def run_cli(*argv: str) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


def _no_mean_when_unstable(obj: Any, unstable: bool = False) -> None:
    if isinstance(obj, dict):
        unstable = unstable or obj.get("unstable") is True
        for k, v in obj.items():
            if unstable and k in ("mean", "p50", "p90", "p99") and v is not None:
                raise AssertionError(f"{k} = {v} reported for an unstable queue")
            _no_mean_when_unstable(v, unstable)
    elif isinstance(obj, list):
        for v in obj:
            _no_mean_when_unstable(v, unstable)


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def assert_names_a_flag(line: str, argv: list[str]) -> None:
    """The one line of a refusal: ``llmqueue CMD: error: ...`` naming a flag the user gave (or,
    for argparse's "required" message, the flag missing), not merely holding ``--``."""
    assert re.match(rf"llmqueue {argv[0]}( [a-z-]+)?: error: ", line), f"not a refusal: {line}"
    named = set(FLAG.findall(line))
    given = {w for w in argv if w.startswith("--")}
    assert named & given or ("required" in line and named), (
        f"names no flag of {sorted(given)}: {line}"
    )


def check_outcome(argv: list[str]) -> int:
    code, out, err, dt = run_cli(*argv)
    shown = " ".join(argv)
    assert dt < SECONDS, f"{dt:.0f} s: {shown}"
    assert "Traceback" not in err, f"traceback for {shown}:\n{err}"
    assert code in (0, 2), f"exit {code} for {shown}:\n{err}"
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, f"{len(lines)} lines for {shown}:\n{err}"
        assert_names_a_flag(lines[0], argv)
        return code
    if "--json" in argv:

        def refuse(c: str) -> None:
            raise AssertionError(f"bare {c} in the JSON of {shown}")

        _no_mean_when_unstable(json.loads(out, parse_constant=refuse))
    return code


def refusal(argv: list[str], seconds: float = 10.0) -> str:
    """The one line of a refusal that must come at once (before any long work)."""
    code, _, err, dt = run_cli(*argv)
    shown = " ".join(argv)
    assert code == 2, f"exit {code} for {shown}:\n{err}"
    assert dt < seconds, f"refused only after {dt:.1f} s: {shown}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, f"for {shown}:\n{err}"
    assert_names_a_flag(lines[0], argv)
    return lines[0]


@given(
    tokens=LAWS,
    rate=number(1e-4, 0.2),
    latency=st.sampled_from(
        ["a=0.023,b0=0.186", "a=0,b0=0", "a=1e308,b0=1", "a=-1,b0=1", "a=0.01", "b0=1"]
    ),
    limit=st.one_of(number(50, 4000), st.sampled_from(["100:2000:100", "5:1:1", "1:1e9:1"])),
    patience=st.one_of(st.none(), number(1, 120)),
    simulate=st.one_of(st.none(), count(1000, 3000)),
    extra=st.lists(
        st.tuples(
            st.sampled_from(["--alpha", "--cost", "--gamma", "--seed", "--warmup"]),
            st.sampled_from(NASTY_NUMBERS),
        ),
        max_size=2,
    ),
)
@FUZZ
def test_token_limit_flags(
    tokens: str, rate: str, latency: str, limit: str, patience: Any, simulate: Any, extra: list
) -> None:
    argv = ["token-limit", "--tokens", tokens, "--rate", rate, "--latency", latency]
    argv += ["--limit", limit, "--json"]
    if patience is not None:
        argv += ["--patience", patience]
    if simulate is not None:
        argv += ["--simulate", simulate]
    for flag, value in extra:
        argv += [flag, value]
    check_outcome(argv)


@given(
    policy=st.sampled_from(["dynamic", "fixed", "elastic", "static"]),
    tokens=LAWS,
    rate=st.one_of(number(1e-3, 0.6), st.sampled_from(["0.05:0.2:0.05", "0.2:0.05:0.05"])),
    profile=st.sampled_from(
        [
            "k1=0,k2=0,k3=3.1e-4,k4=2.48e-3",
            "k1=0.0023,k2=0.0003,k3=8.1e-6,k4=0.0061",
            "k1=1e308,k2=0,k3=0,k4=1",
            "k1=0,k2=0,k3=0,k4=0",
            "k1=0,k2=0",
        ]
    ),
    batch=st.one_of(st.none(), count(1, 16)),
    bmax=st.one_of(st.none(), count(1, 16)),
    simulate=st.one_of(st.none(), count(1000, 3000)),
    extra=st.lists(
        st.tuples(
            st.sampled_from(["--seed", "--sim-batches", "--fit-max-batch", "--kmax"]),
            st.sampled_from(NASTY_NUMBERS),
        ),
        max_size=2,
    ),
)
@FUZZ
def test_batching_flags(
    policy: str,
    tokens: str,
    rate: str,
    profile: str,
    batch: Any,
    bmax: Any,
    simulate: Any,
    extra: list,
) -> None:
    argv = ["batching", "--policy", policy, "--tokens", tokens, "--rate", rate]
    argv += ["--profile", profile, "--json"]
    for flag, value in (("--batch", batch), ("--bmax", bmax), ("--simulate", simulate)):
        if value is not None:
            argv += [flag, value]
    for flag, value in extra:
        argv += [flag, value]
    check_outcome(argv)


SIM_EXTRA = st.sampled_from(
    [
        "--servers",
        "--max-batch",
        "--batch",
        "--bins",
        "--guard",
        "--flush",
        "--kv-tokens",
        "--kv-memory-fraction",
        "--max-batched-tokens",
        "--block-size",
        "--seed",
        "--warmup",
        "--load",
        "--replicas",
        "--router-d",
        "--batch-timeout",
        "--guard-factor",
        "--preempt-limit",
    ]
)


@given(
    workload=st.one_of(
        LAWS.map(lambda law: ["--tokens", law]),
        st.just(["--trace", TRACE]),
        st.just(["--trace", TRACE, "--replay"]),
        st.just(["--trace", MOONCAKE, "--replay"]),
        st.just(["--trace", "/etc/hostname"]),
    ),
    rate=number(0.01, 3.0),
    batching=st.sampled_from(BATCHING),
    order=st.sampled_from([*ORDERS, "lifo"]),
    router=st.sampled_from([None, *ROUTERS, "x"]),
    law=st.sampled_from(
        [
            ["--latency", "a=0.002,b0=0.05"],
            ["--batch-time", "k1=0,k2=0.05,k3=1e-5,k4=0.002"],
            ["--step", "c0=0.02,c_tok=1e-5,c_ctx=1e-7"],
            ["--step", "staircase:c0=0.01,stair=0.03,tokens=128"],
            ["--step", "staircase:c0=0.01,stair=0.03,tokens=0.5"],
            ["--latency", "a=inf,b0=0"],
            ["--profile", "nope"],
        ]
    ),
    sizes=st.fixed_dictionaries(
        {"--max-batch": count(1, 64), "--batch": count(1, 16), "--bins": count(1, 4)}
    ),
    predictor=st.sampled_from(
        [
            None,
            "oracle",
            "noisy:sigma=0.5",
            "buckets:k=5,acc=0.8",
            "learned:/no/model",
            "x",
            "exp",
            "uniform:a=0.5",
            "uniform:a=2",
            "column:GeneratedTokens",
            "column:nope",
        ]  # fmt: skip
    ),
    extra=st.lists(st.tuples(SIM_EXTRA, st.sampled_from(NASTY_NUMBERS)), max_size=2),
    kv=st.sampled_from(
        [
            [],
            ["--admission", "on_demand", "--kv-tokens", "4000", "--kv-accounting", "dong"],
            ["--kv-accounting", "dong"],
            ["--admission", "on_demand", "--kv-accounting", "x"],
            [
                "--admission",
                "on_demand",
                "--kv-tokens",
                "400000",
                "--block-size",
                "16",
                "--prefix-caching",
            ],
            ["--prefix-caching"],
            ["--admission", "on_demand", "--kv-tokens", "4000", "--prefix-caching"],
        ]  # fmt: skip
    ),
)
@FUZZ
def test_simulate_flags(
    workload: list,
    rate: str,
    batching: str,
    order: str,
    router: Any,
    law: list,
    sizes: dict,
    predictor: Any,
    extra: list,
    kv: list,
) -> None:
    argv = ["simulate", *workload, "--rate", rate, "--batching", batching, "--order", order]
    if router is not None:
        argv += ["--router", router, "--replicas", "3"]
    argv += [*law, "--requests", "2000", "--warmup", "200", "--capacity-requests", "2000"]
    if batching in ("dynamic", "elastic", "continuous", "rebatch"):
        argv += ["--max-batch", sizes["--max-batch"]]
    if batching in ("fixed", "multibin"):
        argv += ["--batch", sizes["--batch"]]
    if batching == "multibin":
        argv += ["--bins", sizes["--bins"]]
    if predictor is not None:
        argv += ["--predictor", predictor]
    for flag, value in extra:
        argv += [flag, value]
    check_outcome([*argv, *kv, "--json"])


@given(
    trace=st.sampled_from(
        [
            ["--trace", MOONCAKE, "--replay"],
            ["--trace", MOONCAKE],
            ["--trace", TRACE, "--replay"],
            ["--trace", MOONCAKE, "--replay", "--trace-format", "csv"],
        ]
    ),
    rate=number(0.05, 2.0),
    batching=st.sampled_from(["continuous", "continuous", "dynamic"]),
    admission=st.sampled_from(["on_demand", "on_demand", "reserve", "x"]),
    order=st.sampled_from(["fcfs", "sjf", "srpt"]),
    router=st.sampled_from([None, "round_robin", "jsq", "prefix_affinity"]),
    kv=st.one_of(count(16, 4_000_000), st.just(None)),
    block=st.one_of(st.sampled_from(["1", "16", "32", "48", "512", "1024"]), count(1, 64)),
    load=st.sampled_from([[], ["--load", "0.5"], ["--max-rate"]]),
)
@FUZZ
def test_prefix_caching_flags(
    trace: list,
    rate: str,
    batching: str,
    admission: str,
    order: str,
    router: Any,
    kv: Any,
    block: str,
    load: list,
) -> None:
    """--prefix-caching beside every flag its preconditions name: a trace with or without block
    ids, replayed or not, the former, admission, order, router, KV budget and block size."""
    argv = ["simulate", *trace, "--rate", rate, "--batching", batching, "--max-batch", "32"]
    argv += ["--admission", admission, "--order", order, "--block-size", block, "--prefix-caching"]
    argv += ["--step", "c0=0.01,c_tok=2e-5,c_ctx=1e-7", "--requests", "1500", "--warmup", "100"]
    if batching == "dynamic":
        argv += ["--latency", "a=0.02,b0=0.1"]
    if router is not None:
        argv += ["--router", router, "--replicas", "2"]
    if kv is not None:
        argv += ["--kv-tokens", kv]
    check_outcome([*argv, *load, "--json"])


@given(
    workload=st.one_of(LAWS.map(lambda law: ["--tokens", law]), st.just(["--trace", TRACE])),
    slo=st.sampled_from(
        ["ttft_p99=2,tpot_p99=0.1", "jct=30,attainment=0.9", "ttft_p42=1", "tpot=-1", "", "x=1"]
    ),
    rate=st.sampled_from(["max", "2", "1:4", "4:1", "inf", "0", "1e308"]),
    space=st.fixed_dictionaries(
        {
            "--replicas": st.sampled_from(["1", "1:3", "0", "2:1", "1:100000", "x"]),
            "--router": st.sampled_from(["central", "jsq,random", "least_kv", "nearest"]),
            "--order": st.sampled_from(["fcfs", "fcfs,sjf", "spjf", "lifo"]),
            "--max-batch": st.sampled_from(["8", "8,16", "4:64", "1:100000:+1", "-3"]),
            "--max-batched-tokens": st.sampled_from(["none", "512", "512:2048", "0"]),
        }
    ),
    extra=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "--kv-tokens",
                    "--block-size",
                    "--tolerance",
                    "--headroom",
                    "--max-load",
                    "--target-rate",
                    "--guard",
                    "--seed",
                    "--slice",
                    "--workers",
                ]
            ),
            st.sampled_from(NASTY_NUMBERS),
        ),
        max_size=2,
    ),
)
@FUZZ
def test_plan_flags(workload: list, slo: str, rate: str, space: dict, extra: list) -> None:
    argv = [
        "plan",
        *workload,
        "--slo",
        slo,
        "--rate",
        rate,
        "--step",
        "c0=0.02,c_tok=1e-5,c_ctx=1e-7",
    ]
    argv += ["--requests", "600", "--warmup", "60", "--tolerance", "0.2"]
    if not any(f == "--kv-tokens" for f, _ in extra):
        argv += ["--kv-tokens", "40000"]
    for flag, value in space.items():
        argv += [flag, value]
    for flag, value in extra:
        argv += [flag, value]
    check_outcome([*argv, "--json"])


@given(
    action=st.sampled_from(["train", "score"]),
    trace=st.sampled_from([TRACE, "/etc/hostname", "/no/such.csv", "data"]),
    extra=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "--train-fraction",
                    "--validation-fraction",
                    "--known-after",
                    "--max-iter",
                    "--learning-rate",
                    "--n-classes",
                    "--seed",
                    "--history",
                ]
            ),
            st.sampled_from(NASTY_NUMBERS),
        ),
        min_size=1,
        max_size=2,
    ),
)
@FUZZ
def test_predictor_flags(action: str, trace: str, extra: list, tmp_path_factory: Any) -> None:
    argv = ["predictor", action, "--trace", trace, "--json"]
    if action == "train":
        argv += ["--out", str(tmp_path_factory.mktemp("m") / "m.model"), "--max-iter", "5"]
        for flag, value in extra:
            argv += [flag, value]
    else:
        argv += ["--predictor", "noisy:sigma=0.5"]
    check_outcome(argv)


def test_predictor_files_that_look_right_but_are_not(tmp_path: Path) -> None:
    """A model file with a valid header and wrong contents, an output path that is a folder."""
    header = {"format": "llmqueue-length-model", "version": 1, "kind": "regressor"}
    bad = tmp_path / "bad.model"
    bad.write_bytes(json.dumps(header).encode() + b"\nnot a pickle")
    check_outcome(["predictor", "score", "--trace", TRACE, "--model", str(bad), "--json"])
    code, _, err, _ = run_cli("predictor", "score", "--trace", TRACE, "--model", str(bad))
    assert code == 2 and "lacks 'features'" in err
    code, _, err, _ = run_cli("predictor", "train", "--trace", TRACE, "--out", str(tmp_path))
    assert code == 2 and "--out" in err and "directory" in err


@given(spec=LAWS)
@FUZZ
def test_every_law_spec_parses_to_finite_moments_or_is_refused(spec: str) -> None:
    try:
        law = parse_law(spec, str(ROOT))
    except InputError:
        return
    assert math.isfinite(law.mean()) and math.isfinite(float(law.clipped_moment(math.inf, 2)))


CONFIG = yaml.safe_load((ROOT / "config/config.yaml").read_text())


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaves(v, (*path, k))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _leaves(v, (*path, i))]
    return [path]


LEAVES = _leaves(CONFIG)


@given(
    leaf=st.sampled_from(LEAVES),
    value=st.sampled_from([-1, 0, 1e308, float("nan"), "abc", None, [], {}, "1e19", True]),
)
@settings(max_examples=150, deadline=None, derandomize=True)
def test_mutated_configs_are_accepted_or_refused_before_any_job(leaf: tuple, value: Any) -> None:
    from llmqueue.schema import fill_defaults

    cfg = copy.deepcopy(CONFIG)
    node = cfg
    for key in leaf[:-1]:
        node = node[key]
    node[leaf[-1]] = value
    try:
        fill_defaults(cfg, ROOT / "workflow/schemas/config.schema.yaml")  # as the Snakefile
        check_config(cfg, ROOT)
    except InputError:
        return
    except Exception as err:  # noqa: BLE001 - the schema's own error type
        if type(err).__name__ in ("WorkflowError", "ValidationError"):
            return
        raise


@pytest.mark.parametrize(
    "path, value",
    [
        (("token_limit", "tokens"), "lognormal:mu=700,sigma=1"),
        (("token_limit", "tokens"), "exponential:mean=1e200"),
        (("token_limit", "patient", "rate_per_s"), float("inf")),
        (("token_limit", "simulation", "requests"), -5),
        (("serving", "simulation", "requests"), 10**12),
        (("validation", "matrix_compare", "speed_window_s"), 0),
        (("validation", "machine_speed_compare", "dir"), "data/validation/no-such-run"),
        (("validation", "vllm", "matrix", "batch_queue_gate", "lead_s"), 5),
        (("validation", "vllm", "matrix", "batch_queue_gate", "prompt_tokens"), 0),
        (("validation", "vllm", "engine", "host_cpus_bind"), "0"),
        (("validation", "vllm", "engine", "host_cpus_bind"), "1-"),
    ],
)
def test_config_values_out_of_range_are_refused(path: tuple, value: Any) -> None:
    from llmqueue.schema import fill_defaults

    cfg = copy.deepcopy(CONFIG)
    node = cfg
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(Exception) as err:
        fill_defaults(cfg, ROOT / "workflow/schemas/config.schema.yaml")  # as the Snakefile
        check_config(cfg, ROOT)
    assert type(err.value).__name__ in ("InputError", "WorkflowError", "ValidationError")
    assert str(path[-1]) in str(err.value) or path[0] in str(err.value)


# ---- a user's --config whose profiles (and fit.json) look right but are not -----------------------
DROP = "<drop>"  # a mutation that deletes the key
PROFILE = {
    "latency_profiles": (
        {"kind": "fixed", "a_s_per_token": 0.01, "b0_s": 0.1, "solved_from": []},
        "linear",
        {"slope": 0.01, "intercept": 0.1},
        ["--batching", "none"],
    ),
    "batch_profiles": (
        {"kind": "fixed", "k1": 0.0, "k2": 0.0, "k3": 3e-4, "k4": 2e-3},
        "batch",
        {"k1": 0.0, "k2": 0.0, "k3": 3e-4, "k4": 2e-3},
        ["--batching", "dynamic", "--max-batch", "8"],
    ),
    "step_profiles": (
        {"kind": "fixed", "c0_s": 0.01, "c_tok_s": 1e-4, "c_ctx_s": 1e-7},
        "step",
        {"c0_s": 0.01, "c_tok_s": 1e-4, "c_ctx_s": 1e-7, "r2": 0.99, "n": 9},
        ["--batching", "continuous", "--max-batch", "8"],
    ),
}
BAD_VALUES = [DROP, "abc", "", -1, 1e308, "nan", "inf", None, [], {}, True, [0.1], "1e-3", 0]


@given(
    section=st.sampled_from(sorted(PROFILE)),
    fit=st.booleans(),
    key=st.sampled_from(
        ["kind", "source", "model", "depth", "variant", "solved_from", "a_s_per_token", "b0_s"]
        + ["k1", "k3", "k4", "c0_s", "c_tok_s", "c_ctx_s", "slope", "intercept", "r2"]
    ),
    value=st.sampled_from(BAD_VALUES),
    whole=st.sampled_from([None, None, None, "[1, 2]", "{oops", '{"linear": 3}']),
)
@settings(FUZZ, max_examples=30)
def test_user_config_with_mutated_profiles(
    section: str, fit: bool, key: str, value: Any, whole: Any, tmp_path_factory: Any
) -> None:
    fixed, entry, numbers, batching = PROFILE[section]
    root = tmp_path_factory.mktemp("user")
    prof: dict[str, Any] = {"kind": "fit", "source": "s", "model": "m"} if fit else dict(fixed)
    fit_entry = dict(numbers)
    target = fit_entry if fit and key in fit_entry else prof
    if value == DROP:
        target.pop(key, None)
    else:
        target[key] = value
    (root / "config").mkdir()
    cfg = root / "config" / "config.yaml"
    cfg.write_text(yaml.safe_dump({section: {"p": prof}}))
    fit_json = root / "results/profiling/s/m/fit.json"
    fit_json.parent.mkdir(parents=True)
    fit_json.write_text(whole or json.dumps({entry: fit_entry, "label": "L"}))
    argv = ["simulate", "--tokens", "deterministic:value=50", "--rate", "0.01", *batching]
    argv += ["--profile", "p", "--config", str(cfg), "--requests", "400", "--warmup", "0"]
    argv += ["--capacity-requests", "1000", "--json"]
    if check_outcome(argv) == 2:
        _, _, err, _ = run_cli(*argv)
        assert f"--config {cfg}: " in err and (f"{section}.p" in err or "'p'" in err), err


def test_user_config_refusals_name_the_file_the_profile_and_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    base = ["simulate", "--tokens", "deterministic:value=50", "--rate", "0.01", "--batching"]
    base += ["dynamic", "--profile", "p", "--config", str(cfg), "--requests", "400"]
    for prof, said in [
        ({"kind": "fixed", "a_s_per_token": "abc", "b0_s": 0.1}, "a_s_per_token must be a number"),
        ({"kind": "fixed", "b0_s": 0.1}, "missing key 'a_s_per_token'"),
        ({"kind": "fit", "source": "paper"}, "kind fit needs model"),
    ]:
        cfg.write_text(yaml.safe_dump({"latency_profiles": {"p": prof}}))
        line = refusal(base)
        assert f"--config {cfg}: latency_profiles.p" in line and said in line, line


# ---- a --trace whose token counts do not fit the engine's integers -------------------------------
@given(
    value=st.one_of(
        st.integers(2**63, 2**80).map(str),
        st.sampled_from(["1e19", "1e10", str(int(MAX_TOKENS) + 1), "inf", "-inf", "nan", "-1"]),
    ),
    column=st.sampled_from(["ContextTokens", "GeneratedTokens"]),
    row=st.integers(0, 4),
    trace_format=st.sampled_from([None, "csv"]),
)
@settings(FUZZ, max_examples=20)
def test_traces_with_huge_token_counts_are_refused(
    value: str, column: str, row: int, trace_format: Any, tmp_path_factory: Any
) -> None:
    rows = [{"ContextTokens": "10", "GeneratedTokens": "20"} for _ in range(5)]
    rows[row][column] = value
    path = tmp_path_factory.mktemp("trace") / "huge.csv"
    path.write_text(
        "ContextTokens,GeneratedTokens\n"
        + "".join(f"{r['ContextTokens']},{r['GeneratedTokens']}\n" for r in rows)
    )
    argv = ["simulate", "--trace", str(path), "--rate", "0.01", "--batching", "continuous"]
    argv += ["--step", "c0=0.01,c_tok=1e-4,c_ctx=0", "--requests", "400", "--json"]
    if trace_format:
        argv += ["--trace-format", trace_format]
    line = refusal(argv)
    assert f": error: --trace: column {column!r} of {path}" in line, line
    assert f"data row {row + 1}" in line, line


# ---- sizes each in range whose product is not --------------------------------------------------
@given(
    limit=st.sampled_from(["1:100000:1", "1:5000:1", "10:40000:4", "100:3000:0.5"]),
    rate=st.sampled_from(["0.01", "0.2", "3"]),
    patience=st.sampled_from([None, "60", "600", "2700"]),
    simulate=st.sampled_from([None, "1e6", "1e9"]),
)
@settings(FUZZ, max_examples=20)
def test_token_limit_ranges_that_would_run_for_hours_are_refused_at_once(
    limit: str, rate: str, patience: Any, simulate: Any
) -> None:
    if patience is None and simulate is None:
        simulate = "1e6"  # a patient curve without simulation is quick: not this test's case
    argv = ["token-limit", "--tokens", "lognormal:mu=7,sigma=0.7", "--rate", rate]
    argv += ["--latency", "a=0.023,b0=0.186", "--limit", limit, "--json"]
    for flag, value in (("--patience", patience), ("--simulate", simulate)):
        if value is not None:
            argv += [flag, value]
    line = refusal(argv, seconds=5.0)
    assert f"--limit {limit} with --" in line and "at most" in line, line
    assert re.search(r"give at most [\d,]+ --limit points", line), line


@given(
    servers=st.sampled_from(["2048", "4096"]),
    size=st.sampled_from(["--max-batch", "--block-size"]),
    value=st.sampled_from(["4096", "65536"]),
    replicas=st.booleans(),
)
@settings(FUZZ, max_examples=12)
def test_engine_tables_that_would_not_fit_are_refused_at_once(
    servers: str, size: str, value: str, replicas: bool
) -> None:
    many = (
        ["--replicas", servers, "--router", "round_robin"] if replicas else ["--servers", servers]
    )
    argv = ["simulate", "--tokens", "deterministic:value=50", "--rate", "0.01", "--batching"]
    argv += ["continuous", "--step", "c0=0.01,c_tok=1e-4,c_ctx=0", *many, size, value, "--json"]
    line = refusal(argv, seconds=5.0)
    entries = int(servers) * int(value)
    assert f"{many[0]} {servers} x {size} {value} = {entries:,}" in line, line
    assert f"at most {MAX_ENGINE_ENTRIES:,}" in line, line
    assert (
        f"of {8 * entries / 2**20:.3g} MiB" in line or f"of {8 * entries / 2**30:.3g} GiB" in line
    )


@given(rate=st.floats(1e-3, 3.0), patience=st.floats(0.05, 5000.0))
@settings(FUZZ, max_examples=25)
def test_the_exact_work_estimate_is_the_solvers_own_worst_case(
    rate: float, patience: float, monkeypatch: Any
) -> None:
    """token-limit's estimate of the exact M/G/1+D work is the grids the solver solves when the
    loss never converges (its worst case), cell for cell."""
    from llmqueue.analytic import impatience
    from llmqueue.cli.token_limit import exact_cells
    from llmqueue.latency import LinearLatency

    if rate * patience > 8192:
        assert exact_cells(rate, patience) == 0  # the solver refuses it at once
        return
    grids: list[int] = []

    def never_converging(g: Any, lam: float, tau: float, steps: int) -> tuple[float, float]:
        grids.append(steps)
        return 1.0 + steps, float(steps)

    monkeypatch.setattr(impatience, "solve_renewal", never_converging)
    law = parse_law("deterministic:value=100")
    impatience.exact_token_limit(law, LinearLatency(0.001, 0.01), rate, patience, 100.0)
    assert sum(n * n for n in grids) == exact_cells(rate, patience)


# ---- round three (issue 37) ----------------------------------------------------------------------
PLAN_LAW = ["--step", "c0=0.02,c_tok=1e-5,c_ctx=1e-7"]
PLAN_RUN = ["--requests", "600", "--warmup", "60", "--tolerance", "0.2", "--kv-tokens", "40000"]


def plan_rows(argv: list[str]) -> list[dict[str, Any]]:
    code, out, err, _ = run_cli(*argv)  # its answers checked, not its time (a first compile)
    assert code == 0, f"exit {code}: {' '.join(argv)}\n{err}"
    rows: list[dict[str, Any]] = json.loads(out)["rows"]
    return rows


@given(
    rate=st.sampled_from(["max", "1", "30", "45", "100", "1e9", "5:30", "20:80", "60:1e9"]),
    law=st.sampled_from(
        [PLAN_LAW, ["--step", "c0=1e-12,c_tok=0,c_ctx=0"], ["--step", "c0=0,c_tok=1e-300,c_ctx=0"]]
    ),
    batch=st.sampled_from(["8", "8,64"]),
    sizes=st.sampled_from([["--requests", "400", "--warmup", "0"], ["--requests", "2000"]]),
)
@settings(FUZZ, max_examples=25)
def test_plan_never_reports_a_goodput_above_what_it_measured(
    rate: str, law: list, batch: str, sizes: list
) -> None:
    """Whatever --rate and however short the runs: no goodput above the configuration's own
    saturation rate, nor above the rates --rate accepts (a degenerate step law); a rate at or
    above saturation is never met."""
    argv = ["plan", "--tokens", "deterministic:value=10", "--slo", "ttft_p99=2", "--rate", rate]
    argv += [*law, "--max-batch", batch, "--kv-tokens", "40000", "--tolerance", "0.2", *sizes]
    for row in plan_rows([*argv, "--json"]):
        g, sat = row["goodput_rate_per_s"], row["saturation_rate_per_s"]
        assert sat is not None and sat > 0, row
        assert g <= 0.95 * sat * (1 + 1e-12) and g <= 1e9, row
        if ":" not in rate and rate != "max" and float(rate) >= 0.95 * sat:
            assert not row["met"] and row["goodput_bound"] == "<", row
        if row["too_short"]:
            assert row["in_system"] is not None, row


def test_plan_says_when_its_runs_are_too_short_naming_the_flags() -> None:
    argv = ["plan", "--tokens", "lognormal:mu=5,sigma=1,cap=2048", "--prompt-tokens",
            "uniform:low=100,high=2000", "--step", "c0=0.0125,c_tok=4e-5,c_ctx=1.5e-7",
            "--kv-tokens", "200000", "--slo", "ttft_p99=5", "--requests", "400", "--warmup", "0",
            "--json"]  # fmt: skip
    code, out, err, _ = run_cli(*argv)
    assert code == 0, err
    res = json.loads(out)
    assert res["rows"][0]["too_short"] is True
    assert "--warmup" in res["warning"] and "--requests" in res["warning"], res["warning"]
    code, out, _, _ = run_cli(*argv[:-5], "--requests", "20000", "--warmup", "2000", "--json")
    assert code == 0 and "warning" not in json.loads(out)


# a plan table's columns and the junk a hand-edited or truncated one may hold
@given(
    column=st.sampled_from(
        [
            "replicas",
            "router",
            "order",
            "max_batch",
            "max_batched_tokens",
            "kv_tokens",
            "goodput_rate_per_s",
            "goodput_bound",
            "goodput_per_replica_per_s",
            "met",
            "saturation_rate_per_s",
            "pareto_latency_s",
            "ttft_p99_s",
            "too_short",
            "runs",
        ]
    ),  # fmt: skip
    value=st.sampled_from(["abc", "", "nan", "-1", "inf", "1e400", "True", "~", "2.5", "0"]),
    shape=st.sampled_from(["value", "ragged", "no column", "two files"]),
)
@settings(FUZZ, max_examples=60)
def test_plan_merge_reads_tables_strictly(
    column: str, value: str, shape: str, tmp_path_factory: Any
) -> None:
    folder = tmp_path_factory.mktemp("merge")
    good = folder / "good.csv"
    if not good.exists():
        argv = ["plan", "--tokens", "deterministic:value=10", "--slo", "ttft_p99=2", *PLAN_LAW]
        argv += [*PLAN_RUN, "--max-batch", "8,16", "--csv", str(good), "--json"]
        assert run_cli(*argv)[0] == 0
    lines = good.read_text().splitlines()
    head = lines[0].split(",")
    i = head.index(column)
    bad = folder / "bad.csv"
    if shape == "ragged":
        lines[2] += "," + value
    elif shape == "no column":
        lines = [",".join(c for j, c in enumerate(ln.split(",")) if j != i) for ln in lines]
    else:
        cells = lines[2].split(",")
        cells[i] = value
        lines[2] = ",".join(cells)
    bad.write_text("\n".join(lines) + "\n")
    files = [str(good), str(bad)] if shape == "two files" else [str(bad)]
    code, out, err, _ = run_cli("plan", "--merge", *files, "--json")
    assert "Traceback" not in err and code in (0, 2), err
    if code == 2:
        line = err.strip()
        assert len(line.splitlines()) == 1 and "--merge" in line and str(bad) in line, line
        if shape in ("value", "two files"):
            assert "data row 2" in line and f"column {column!r}" in line, line
        return
    for row in json.loads(out)["rows"]:  # accepted: the same table, every value in range
        assert row["goodput_bound"] in ("=", ">=", "<") and row["replicas"] >= 1


@given(
    stamp=st.sampled_from(["1e300", "-1", "nan", "inf", "1e13", "2e9"]),
    fmt=st.sampled_from(["csv", "vidur", "vllm-bench", "mooncake"]),
    replay=st.booleans(),
    load=st.booleans(),
)
@settings(FUZZ, max_examples=40)
def test_traces_with_absurd_timestamps_are_refused_by_the_reader(
    stamp: str, fmt: str, replay: bool, load: bool, tmp_path_factory: Any
) -> None:
    """A last timestamp far out (or not a number) is one line naming --trace, never a replay at
    a rate of 1e-298/s or an internal name."""
    folder = tmp_path_factory.mktemp("stamps")
    n = 1200
    times = [f"{0.5 * i:g}" for i in range(n - 1)] + [stamp]
    if fmt == "csv":
        path = folder / "t.csv"
        body = "".join(f"{t},100,20\n" for t in times)
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + body)
    elif fmt == "vidur":
        path = folder / "t.csv"
        body = "".join(f"{t},100,20\n" for t in times)
        path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" + body)
    elif fmt == "vllm-bench":
        path = folder / "t.json"
        path.write_text(
            '{"input_lens": [' + ",".join(["100"] * n) + '], "output_lens": ['
            + ",".join(["20"] * n) + '], "start_times": [' + ",".join(
                t if t not in ("nan", "inf") else f'"{t}"' for t in times) + "]}"
        )  # fmt: skip
    else:
        path = folder / "t.jsonl"
        path.write_text(
            "".join(
                f'{{"timestamp": {t if t not in ("nan", "inf") else chr(34) + t + chr(34)}, '
                f'"input_length": 100, "output_length": 20}}\n'
                for t in times
            )
        )
    argv = ["simulate", "--trace", str(path), "--batching", "continuous", "--max-batch", "16"]
    argv += ["--step", "c0=0.01,c_tok=1e-4,c_ctx=0", "--requests", "600", "--warmup", "60"]
    argv += ["--capacity-requests", "1000", "--json"]
    argv += ["--replay"] if replay else []
    argv += ["--load", "0.5"] if load else ([] if replay else ["--rate", "1"])
    code = check_outcome(argv)
    if code == 0:
        return
    _, _, err, _ = run_cli(*argv)
    assert "time_scale" not in err and "rate_per_s" not in err, err


def test_a_trace_that_is_no_regular_file_is_named_as_what_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    base = ["simulate", "--rate", "1", "--latency", "a=0.01,b0=0", "--requests", "400", "--json"]
    for path, what in ((tmp_path, "directory"), (fifo, "FIFO"), ("/dev/zero", "device"),
                       (tmp_path / "none.csv", "does not exist")):  # fmt: skip
        line = refusal([*base, "--trace", str(path)])
        assert what in line and "--trace" in line, line
        line = refusal(["plan", "--merge", str(path)])
        assert what in line, line


@pytest.mark.parametrize("fmt", ["mooncake", "csv", "vllm-bench"])
def test_a_utf8_byte_order_mark_is_read_and_others_are_refused_by_name(
    fmt: str, tmp_path: Path
) -> None:
    n = 500
    if fmt == "mooncake":
        text = "".join(
            json.dumps({"timestamp": 100 * i, "input_length": 50, "output_length": 10}) + "\n"
            for i in range(n)
        )
    elif fmt == "csv":
        text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
            f"{0.1 * i:g},50,10\n" for i in range(n)
        )
    else:
        text = json.dumps(
            {
                "input_lens": [50] * n,
                "output_lens": [10] * n,
                "start_times": [0.1 * i for i in range(n)],
            }
        )
    plain, bom, utf16 = (tmp_path / f"{k}.{fmt}" for k in ("plain", "bom", "utf16"))
    plain.write_text(text, encoding="utf-8")
    bom.write_text(text, encoding="utf-8-sig")
    utf16.write_text(text, encoding="utf-16")
    argv = ["simulate", "--batching", "continuous", "--step", "c0=0.01,c_tok=1e-4,c_ctx=0"]
    argv += ["--replay", "--requests", "400", "--warmup", "40", "--json"]
    outs = []
    for path in (plain, bom):
        code, out, err, _ = run_cli(*argv, "--trace", str(path))
        assert code == 0, err
        res = json.loads(out)
        outs.append({k: v for k, v in res.items() if k != "workload"})
    assert outs[0] == outs[1]
    line = refusal([*argv, "--trace", str(utf16)])
    assert "UTF-16 byte-order mark" in line, line


@pytest.mark.parametrize(
    ("fmt", "names"),
    [
        ("vidur", "arrived_at,num_prefill_tokens,num_decode_tokens"),
        ("vllm-bench", "start_times,input_lens,output_lens"),
        ("mooncake", "timestamp,input_length,output_length"),
        ("burstgpt", "Timestamp,Request tokens,Response tokens"),
        ("csv", "TIMESTAMP,ContextTokens,GeneratedTokens"),
    ],
)
def test_a_replay_is_described_by_its_formats_own_columns(
    fmt: str, names: str, tmp_path: Path
) -> None:
    from llmqueue.traces import TraceRows, write_vidur

    n = 500
    rows = TraceRows([0.1 * i for i in range(n)], [0.0] * n, [50.0] * n, [10.0] * n, source="test")
    path = tmp_path / "t"
    if fmt == "vidur":
        write_vidur(rows, path)
    elif fmt == "vllm-bench":
        path.write_text(json.dumps({"input_lens": [50] * n, "output_lens": [10] * n,
                                    "start_times": [0.1 * i for i in range(n)]}))  # fmt: skip
    elif fmt == "mooncake":
        path.write_text("".join(json.dumps({"timestamp": 100 * i, "input_length": 50,
                                            "output_length": 10}) + "\n" for i in range(n)))  # fmt: skip
    elif fmt == "burstgpt":
        path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                        + "".join(f"{0.1 * i:g},ChatGPT,50,10,60,Conversation log\n"
                                  for i in range(n)))  # fmt: skip
    else:
        path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                        + "".join(f"{0.1 * i:g},50,10\n" for i in range(n)))  # fmt: skip
    for given_fmt in ("auto", fmt):
        argv = ["simulate", "--trace", str(path), "--trace-format", given_fmt, "--replay"]
        argv += ["--batching", "continuous", "--step", "c0=0.01,c_tok=1e-4,c_ctx=0"]
        code, out, err, _ = run_cli(*argv, "--requests", "400", "--warmup", "40", "--json")
        assert code == 0, err
        assert f"t:{names}" in json.loads(out)["workload"], json.loads(out)["workload"]
        # the library's replay describes it the same way
        from llmqueue.sim.workload import ReplayWorkload

        assert f"t:{names}" in ReplayWorkload.from_csv(path, trace_format=given_fmt).describe()


@given(
    flag=st.sampled_from(["--overhead-gib", "--tokens"]),
    value=st.sampled_from(NASTY_NUMBERS),
    dtype=st.sampled_from([None, "float16", "int3"]),
)
@settings(FUZZ, max_examples=30)
def test_profile_kv_limit_flags(flag: str, value: str, dtype: Any) -> None:
    argv = ["profile", "kv-limit", "--model", "llama2-7b-chat", "--gpu", "a100-80gb", flag, value]
    if dtype:
        argv += ["--kv-dtype", dtype]
    code, out, err, _ = run_cli(*argv)
    assert "Traceback" not in err and code in (0, 2), err
    if code == 2:
        line = err.strip()
        assert len(line.splitlines()) == 1 and (flag in line or "--kv-dtype" in line), line
    else:
        assert json.loads(out)["max_batch"] >= 0


@given(
    slo=st.sampled_from(
        [
            "ttft_=2",
            "ttft=2,ttft_=3",
            "ttft=2,ttft=3",
            "ttft_p99=1,ttft_p99 =2",
            "ttft_P99=1",
            "tpot_p99_=1",
            "jct_mean=1,jct_mean=2",
            "ttft=1,attainment=0.9,attainment=0.8",
            "_p99=1",
            "ttft__p99=1",
        ]
    )  # fmt: skip
)
@settings(FUZZ, max_examples=10)
def test_the_slo_parser_refuses_unknown_suffixes_and_a_metric_given_twice(slo: str) -> None:
    argv = ["plan", "--tokens", "deterministic:value=10", "--slo", slo, *PLAN_LAW, *PLAN_RUN]
    line = refusal(argv)
    assert "--slo" in line and ("unknown SLO" in line or "given twice" in line), line


def test_plan_refuses_a_kv_budget_below_the_smallest_request_naming_the_flag() -> None:
    argv = ["plan", "--tokens", "deterministic:value=100", "--prompt-tokens",
            "deterministic:value=100", "--slo", "ttft_p99=2", *PLAN_LAW, "--kv-tokens", "16,4096"]  # fmt: skip
    line = refusal(argv)
    assert "--kv-tokens 16 is below the smallest request" in line and ">= 200" in line, line


def test_a_replay_too_short_for_the_capacity_search_names_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    + "".join(f"{0.1 * i:g},50,10\n" for i in range(700)))  # fmt: skip
    law = ["--step", "c0=0.01,c_tok=1e-4,c_ctx=0"]
    line = refusal(["plan", "--trace", str(path), "--replay", "--slo", "ttft_p99=2", *law,
                    "--kv-tokens", "40000", "--requests", "400"])  # fmt: skip
    assert f"--trace {path}: 700 rows" in line and "1000" in line, line
    line = refusal(["simulate", "--trace", str(path), "--replay", "--load", "0.5", "--batching",
                    "continuous", *law, "--requests", "400", "--warmup", "40"])  # fmt: skip
    assert f"--trace {path}: 700 rows" in line and "--load" in line, line


def test_power_of_d_with_fewer_replicas_than_d_behaves_as_in_plan() -> None:
    """The default d = 2 is lowered to the replicas in both commands (simulate says so, naming
    --router-d); a --router-d above --replicas is refused naming it."""
    base = ["--tokens", "deterministic:value=10", "--step", "c0=0.02,c_tok=1e-5,c_ctx=1e-7"]
    sim = ["simulate", *base, "--batching", "continuous", "--max-batch", "8", "--rate", "10"]
    sim += ["--replicas", "1", "--router", "power_of_d", "--requests", "2000", "--json"]
    code, out, err, _ = run_cli(*sim)
    assert code == 0, err
    res = json.loads(out)
    assert res["router_d"] == 1 and "--router-d" in res["router_d_note"]
    central = ["simulate", *base, "--batching", "continuous", "--max-batch", "8", "--rate", "10"]
    central += ["--replicas", "1", "--router", "round_robin", "--requests", "2000", "--json"]
    same = json.loads(run_cli(*central)[1])
    assert res["ttft"] == same["ttft"]  # one replica behind any router: the same queue
    line = refusal([*sim, "--router-d", "2"])
    assert "--router-d 2" in line, line
    plan = ["plan", *base, "--slo", "ttft_p99=2", "--rate", "10", "--replicas", "1",
            "--router", "power_of_d,round_robin", "--max-batch", "8", "--kv-tokens", "40000",
            "--requests", "2000", "--json"]  # fmt: skip
    code, out, err, _ = run_cli(*plan)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert rows[0]["ttft_p99_s"] == rows[1]["ttft_p99_s"]


@given(
    pair=st.sampled_from(
        [
            ("--csv", "--export"),
            ("--csv", "--figure"),
            ("--export", "--figure"),
            ("--csv", "--trace"),
            ("--export", "--trace"),
        ]
    ),  # fmt: skip
    spelling=st.sampled_from(["same", "dotdot", "link"]),
)
@settings(FUZZ, max_examples=20)
def test_one_file_given_for_two_outputs_is_refused(
    pair: tuple[str, str], spelling: str, tmp_path_factory: Any
) -> None:
    folder = tmp_path_factory.mktemp("twice")
    (folder / "sub").mkdir(exist_ok=True)
    trace = folder / "trace.csv"
    shutil.copy2(ROOT / TRACE, trace)
    first = str(folder / "out.pdf")
    second = {
        "same": first,
        "dotdot": str(folder / "sub" / ".." / "out.pdf"),
        "link": str(folder / "link.pdf"),
    }[spelling]
    if spelling == "link" and not Path(second).is_symlink():
        Path(second).symlink_to(first)
    paths = {pair[0]: first, pair[1]: second}
    if "--trace" in paths:
        shutil.copy2(ROOT / TRACE, paths["--trace"])
    argv = ["plan", "--trace", paths.get("--trace", str(trace)), "--slo", "ttft_p99=2", *PLAN_LAW]
    argv += [*PLAN_RUN, "--target-rate", "1"]
    if "--csv" in paths:
        argv += ["--csv", paths["--csv"]]
    if "--export" in paths:
        argv += ["--export", "vidur", paths["--export"]]
    if "--figure" in paths:
        argv += ["--figure", paths["--figure"][: -len(".pdf")]]
    before = sorted(p.name for p in folder.rglob("*"))
    line = refusal(argv)
    assert "give" in line and ("own file" in line), line
    assert sorted(p.name for p in folder.rglob("*")) == before  # nothing written


# the path parts a user may give: plain names, climbs, this folder, odd characters, a link
PARTS = st.sampled_from(["a", "b", "..", ".", "x y", "ü", "-n", "link", "sub"])


@given(parts=st.lists(PARTS, min_size=1, max_size=5), name=st.sampled_from(["o", ".o", "o.x"]))
@settings(FUZZ, max_examples=40)
def test_an_output_path_never_leaves_its_folder(
    parts: list[str], name: str, tmp_path_factory: Any
) -> None:
    """Whatever --csv, --figure and --export name, a command writes exactly those files (their
    resolved paths) and nothing anywhere else, not even a temp file: the folder a path names is
    the only one written to. A path that cannot be written is refused at once."""
    root = tmp_path_factory.mktemp("out")
    work = root / "work"
    for d in ("a/b", "sub", "b"):
        (work / d).mkdir(parents=True, exist_ok=True)
    (work / "link").symlink_to(work / "sub")
    rel = os.path.join(*parts, name)
    # a climb out of the test's own folder names a folder of someone else's: not tried here
    assume(Path(os.path.realpath(work / rel)).is_relative_to(root))
    merged = root / "plan.csv"
    argv = ["plan", "--tokens", "deterministic:value=10", "--slo", "ttft_p99=2", *PLAN_LAW]
    assert run_cli(*argv, *PLAN_RUN, "--csv", str(merged), "--json")[0] == 0
    for flags_ in (["--csv", rel], ["--figure", rel]):
        before = {p for p in root.rglob("*")}
        cwd = os.getcwd()
        os.chdir(work)
        try:
            code, _, err, _ = run_cli("plan", "--merge", str(merged), *flags_, "--json")
        finally:
            os.chdir(cwd)
        assert code in (0, 2) and "Traceback" not in err, err
        made = {p for p in root.rglob("*")} - before
        if flags_[0] == "--csv":
            expect = {Path(os.path.realpath(work / rel))}
        else:
            expect = {Path(os.path.realpath(work / f"{rel}.{x}")) for x in ("pdf", "png")}
        if code == 2:
            assert not made, made
            continue
        assert {Path(os.path.realpath(p)) for p in made if p.is_file()} == expect, (rel, made)
        for p in expect:
            assert p.is_relative_to(root), p
            p.unlink()
