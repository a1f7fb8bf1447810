"""``llmqueue simulate``: the JSON an operator gets, its exact values, and bad input (exit 2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmqueue.cli import main
from llmqueue.policy import order_names

KEYS = ("mean", "ci95", "p50", "p90", "p99")


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    code = main(["simulate", *args, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exc:  # argparse's own errors
        code = main(["simulate", *args])
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err.strip().splitlines()[-1], err
    return err.strip().splitlines()[-1]  # one line says what is wrong (after argparse's usage)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace no part of the project has seen: gamma-distributed outputs, uniform prompts and
    timestamps of a Poisson stream (seconds)."""
    rng = np.random.default_rng(20261123)
    n = 20_000
    prompt = rng.integers(10, 800, n)  # outputs grow with the prompt: something to learn
    df = pd.DataFrame(
        {
            "ts": np.cumsum(rng.exponential(0.5, n)),
            "in_tok": prompt,
            "out_tok": np.maximum(1, np.round(rng.gamma(0.8, 1.0, n) * (100.0 + 0.5 * prompt))),
        }
    )
    path = tmp_path_factory.mktemp("trace") / "mine.csv"
    df.to_csv(path, index=False)
    return path


def _agree(wait: dict, rel: float = 0.03) -> None:
    assert math.isfinite(wait["exact"])
    err = abs(wait["mean"] - wait["exact"])
    # within `rel` and within about 4 sigma of the run and of the formula's own evaluation
    assert err <= rel * wait["exact"]
    assert err <= 2.0 * math.hypot(wait["ci95"], 1.96 * wait["exact_se"])
    assert wait["ci95"] < 0.6 * rel * wait["exact"]  # the check is not passed by a wide interval


def test_json_keys_and_pollaczek_khinchine(capsys: pytest.CaptureFixture[str]) -> None:
    out = simulate(
        capsys,
        *("--tokens", "lognormal:mu=5,sigma=1,cap=2048", "--load", "0.7"),
        *("--latency", "a=0.02,b0=0.1", "--requests", "2000000", "--warmup", "50000"),
    )
    for key in ("wait", "ttft", "jct"):
        assert set(KEYS) <= set(out[key]) and all(math.isfinite(out[key][k]) for k in KEYS)
        assert out[key]["p50"] <= out[key]["p90"] <= out[key]["p99"]
    for key in ("throughput_per_s", "tokens_per_s", "mean_batch", "preemptions", "rejected"):
        assert key in out
    assert out["unstable"] is False and out["mean_batch"] == 1.0
    assert out["max_rate_method"] == "formula" and math.isclose(out["load"], 0.7)
    assert math.isclose(out["throughput_per_s"], out["rate_per_s"], rel_tol=0.02)
    assert "Pollaczek-Khinchine" in out["wait"]["exact_method"]
    _agree(out["wait"])
    # one request at a time: TTFT = wait + b0 and JCT = wait + S on average
    assert math.isclose(out["ttft"]["mean"], out["wait"]["mean"] + 0.1, rel_tol=1e-6)


@pytest.mark.parametrize("predictor", ["noisy:sigma=0.7", "oracle"])
def test_spjf_on_an_unseen_trace_matches_the_priority_formula(
    capsys: pytest.CaptureFixture[str], trace: Path, predictor: str
) -> None:
    out = simulate(
        capsys,
        *("--trace", str(trace), "--prompt-column", "in_tok", "--output-column", "out_tok"),
        *("--order", "spjf", "--predictor", predictor, "--load", "0.7"),
        *("--latency", "a=0.015,b0=0.2", "--requests", "1000000", "--warmup", "50000"),
        *("--seed", "5"),
    )
    assert "Cobham" in out["wait"]["exact_method"]
    _agree(out["wait"])


def test_spjf_with_a_learned_predictor_trained_on_the_unseen_trace(
    capsys: pytest.CaptureFixture[str], trace: Path, tmp_path: Path
) -> None:
    """`llmqueue predictor train` on the trace, then `simulate --predictor learned:MODEL`: the
    mean wait equals Cobham's formula over the trace rows with each row's own prediction."""
    cols = ["--timestamp-column", "ts", "--prompt-column", "in_tok", "--output-column", "out_tok"]
    model = tmp_path / "mine.model"
    code = main(["predictor", "train", "--trace", str(trace), *cols, "--out", str(model)])
    assert code == 0 and model.is_file()
    capsys.readouterr()
    out = simulate(
        capsys,
        *("--trace", str(trace), *cols, "--order", "spjf", "--predictor", f"learned:{model}"),
        *("--load", "0.7", "--latency", "a=0.015,b0=0.2", "--requests", "1000000"),
        *("--warmup", "50000", "--seed", "6"),
    )
    assert "each row's prediction" in out["wait"]["exact_method"] and out["wait"]["exact_se"] == 0
    _agree(out["wait"])


def test_replay_and_named_profile(capsys: pytest.CaptureFixture[str], trace: Path) -> None:
    out = simulate(
        capsys,
        *("--trace", str(trace), "--replay", "--timestamp-column", "ts"),
        *("--prompt-column", "in_tok", "--output-column", "out_tok"),
        *("--batching", "dynamic", "--max-batch", "16", "--profile", "paper_k8"),
    )
    assert out["latency"] == "paper_k8" and "replay" in out["workload"]
    assert math.isclose(out["rate_per_s"], 2.0, rel_tol=0.03)  # the trace's own timestamps
    assert out["requests"] == 18_000 and out["mean_batch"] > 1  # all rows, 10% warm-up
    assert "exact" not in out["wait"]  # batching: no formula
    # no batching either: a replayed trace is not Poisson, still no formula
    rows = simulate(
        capsys,
        *("--trace", str(trace), "--replay", "--timestamp-column", "ts"),
        *("--prompt-column", "in_tok", "--output-column", "out_tok", "--latency", "a=0.001,b0=0"),
    )
    assert "exact" not in rows["wait"] and rows["mean_batch"] == 1.0


def test_continuous_and_max_rate(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        *("--tokens", "uniform:low=1,high=400", "--prompt-tokens", "uniform:low=0,high=600"),
        *("--batching", "continuous", "--max-batch", "32", "--kv-tokens", "20000"),
        *("--admission", "on_demand", "--step", "c0=0.008,c_tok=6e-5,c_ctx=2.6e-7"),
        *("--block-size", "16"),
        *("--requests", "100000", "--warmup", "10000", "--max-rate"),
    ]
    out = simulate(capsys, *args, "--load", "0.9")
    assert out["max_rate_method"] == "simulation" and out["kv_tokens"] == 20_000
    assert out["mean_batch"] > 1 and 0 < out["kv_utilisation"] <= 1
    assert out["ttft"]["mean"] < out["jct"]["mean"]
    assert 0.008 < out["tpot"]["mean"] < out["jct"]["mean"]  # at least one iteration per token
    only = simulate(capsys, *args)  # --max-rate alone: no run
    assert only["max_rate_per_s"] == out["max_rate_per_s"] and "jct" not in only


def test_over_capacity_is_reported_unstable_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    out = simulate(
        capsys,
        *("--tokens", "uniform:low=1,high=9", "--rate", "3", "--latency", "a=0.1,b0=0"),
        *("--requests", "400", "--warmup", "0"),
    )
    assert out["unstable"] is True and out["jct"] is None and out["wait"] is None
    assert "highest sustainable rate" in out["note"]  # rho = 1.5: no steady state, no formula


def test_just_above_the_simulated_capacity_is_unstable(capsys: pytest.CaptureFixture[str]) -> None:
    """1.25% above a continuous-batching capacity a 22,000-request run barely drifts; the
    saturated queue's capacity, measured for --max-rate, decides instead: no mean."""
    args = [
        *("--tokens", "deterministic:value=100", "--prompt-tokens", "deterministic:value=100"),
        *("--batching", "continuous", "--max-batch", "8", "--step", "c0=0.01,c_tok=0,c_ctx=0"),
        *("--requests", "20000", "--warmup", "2000", "--max-rate"),
    ]
    out = simulate(capsys, *args, "--rate", "8.1")  # capacity 8/s: 8 sequences of 100 steps
    assert out["max_rate_per_s"] == pytest.approx(8.0, rel=1e-6)
    assert out["unstable"] is True and out["jct"] is None
    assert "(simulation)" in out["note"]
    below = simulate(capsys, *args, "--rate", "7.2")
    assert below["unstable"] is False and below["jct"]["mean"] > 0


def test_multibin_max_rate_on_a_uniform_law_is_theorem_4_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A setting no part of the project was tuned on: the theorem, and the simulated saturated
    queue (a near-oracle predictor sends max_rate to the simulation) within 1% of it."""
    from llmqueue.analytic.multibin import theorem_4_2

    exact = 2 * theorem_4_2(16, 3, 3, 40) / 0.01  # two servers, 0.01 s per token
    args = [
        *("--tokens", "uniform:low=3,high=40", "--batching", "multibin", "--bins", "3"),
        *("--batch", "16", "--servers", "2", "--latency", "a=0.01,b0=0", "--max-rate"),
    ]
    theorem = simulate(capsys, *args, "--predictor", "oracle")
    assert theorem["max_rate_method"] == "theorem 4.2"
    assert math.isclose(theorem["max_rate_per_s"], exact, rel_tol=1e-9)
    sim = simulate(capsys, *args, "--predictor", "noisy:sigma=1e-6")
    assert sim["max_rate_method"] == "simulation"
    assert math.isclose(sim["max_rate_per_s"], exact, rel_tol=0.01)


def test_fixed_batching_max_rate_is_eq24(capsys: pytest.CaptureFixture[str]) -> None:
    out = simulate(
        capsys,
        *("--tokens", "uniform:low=0,high=1000", "--batching", "fixed", "--batch", "8"),
        *("--batch-time", "k1=0,k2=0,k3=3.1e-4,k4=2.48e-3", "--max-rate"),
    )
    # E[T_8] = (k3 8 + k4) E[max of 8 U(0, 1000)] = (0.00496) (8/9 1000)
    assert math.isclose(out["max_rate_per_s"], 8 / (0.00496 * 8000 / 9), rel_tol=1e-9)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--tokens", "uniform:low=1,high=9", "--rate", "1", "--order", "lifo"], "--order"),
        (["--tokens", "uniform:low=1,high=9", "--rate", "-1", "--latency", "a=1,b0=0"], "--rate"),
        (["--tokens", "uniform:low=1,high=9", "--load", "1.2", "--latency", "a=1,b0=0"], "--load"),
        (["--tokens", "uniform:low=1,high=9", "--rate", "1"], "time law"),
        (["--tokens", "bogus:x=1", "--rate", "1", "--latency", "a=1,b0=0"], "bogus"),
        (["--trace", "/nonexistent.csv", "--rate", "1", "--latency", "a=1,b0=0"], "--trace"),
        (
            [
                *(
                    "--tokens",
                    "uniform:low=100,high=900",
                    "--prompt-tokens",
                    "uniform:low=50,high=90",
                ),
                *("--rate", "1", "--batching", "continuous", "--kv-tokens", "120"),
                *("--step", "c0=0.01,c_tok=0,c_ctx=0"),
            ],
            "--kv-tokens 120 is below the smallest request",
        ),
        (
            ["--tokens", "uniform:low=1,high=9", "--rate", "1", "--batching", "continuous"]
            + ["--latency", "a=1,b0=0"],
            "--step or --profile",
        ),
        (
            ["--tokens", "uniform:low=1,high=9", "--rate", "1", "--batching", "fixed"]
            + ["--latency", "a=1,b0=0"],
            "--batch K",
        ),
        (
            ["--tokens", "uniform:low=1,high=9", "--rate", "1", "--order", "spjf"]
            + ["--latency", "a=1,b0=0"],
            "--predictor",
        ),
        (
            ["--tokens", "uniform:low=1,high=9", "--rate", "1", "--profile", "no_such"],
            "no_such",
        ),
        (
            [
                *("--tokens", "uniform:low=1,high=9", "--rate", "1", "--batching", "continuous"),
                *("--kv-tokens", "1000", "--block-size", "16", "--step", "c0=0.01,c_tok=0,c_ctx=0"),
            ],
            "whole number of blocks",
        ),
        (
            ["--tokens", "uniform:low=1,high=9", "--rate", "1", "--kv-tokens", "100"]
            + ["--latency", "a=1,b0=0"],
            "--kv-tokens applies to --batching continuous",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert needle in fails(capsys, *args)


def test_trace_without_the_columns_says_which(
    capsys: pytest.CaptureFixture[str], trace: Path
) -> None:
    err = fails(capsys, "--trace", str(trace), "--rate", "1", "--latency", "a=1,b0=0")
    assert "ContextTokens" in err and "in_tok" in err  # what it wanted, and what exists


CONT = ("--tokens", "lognormal:mu=5,sigma=1,cap=2048", "--prompt-tokens", "uniform:low=100,high=600",
        "--batching", "continuous", "--max-batch", "32", "--step", "c0=0.02,c_tok=0.0005,c_ctx=0",
        "--requests", "20000", "--warmup", "2000")  # fmt: skip


def test_the_non_work_conserving_batchers_have_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """--batch-queue (whole batches) serves less at the same rate than continuous batching;
    --no-chunked-prefill admits whole prompts only; both refused outside continuous batching."""
    plain = simulate(capsys, *CONT, "--rate", "0.5")
    whole = simulate(capsys, *CONT, "--rate", "0.5", "--batch-queue")
    assert whole["jct"]["mean"] > plain["jct"]["mean"] and whole["mean_batch"] < plain["mean_batch"]
    nochunk = simulate(
        capsys, *CONT, "--rate", "0.5", "--max-batched-tokens", "512", "--no-chunked-prefill"
    )
    assert nochunk["rejected"] > 0  # prompt + output over the 512-token budget: never admitted
    assert "applies to --batching continuous" in fails(
        capsys, "--tokens", "lognormal:mu=5,sigma=1", "--batching", "dynamic", "--batch-queue",
        "--latency", "a=0.02,b0=0.1", "--rate", "1",
    )  # fmt: skip
    assert "--no-chunked-prefill needs --max-batched-tokens" in fails(
        capsys, *CONT, "--rate", "1", "--no-chunked-prefill"
    )


@pytest.mark.parametrize("order", order_names(preemptive=True))
def test_preemptive_orders_on_the_command_line(
    capsys: pytest.CaptureFixture[str], order: str
) -> None:
    base = ("--tokens", "exponential:mean=200", "--load", "0.7", "--latency", "a=0.02,b0=0.1")
    pred = ("--predictor", "exp") if order.startswith("sp") or order == "pspjf" else ()
    out = simulate(capsys, *base, "--order", order, *pred, "--requests", "20000")
    assert out["jct"]["mean"] > 0 and out["wait"]["mean"] >= 0
    if order != "sprpt":
        assert out["wait"]["exact"] > 0 and "quadrature" in out["wait"]["exact_method"]
    assert "preempts" in fails(capsys, *base, "--order", order, *pred, "--batching", "dynamic")
    limited = simulate(
        capsys, *base, "--order", order, *pred, "--requests", "20000", "--preempt-limit", "0.5"
    )
    assert limited["jct"]["mean"] > 0
    assert "--preempt-limit applies to a preemptive --order" in fails(
        capsys, *base, "--preempt-limit", "0.5"
    )
    assert "--preempt-limit" in fails(
        capsys, *base, "--order", order, *pred, "--preempt-limit", "2"
    )


def test_dongs_kv_accounting_and_the_staircase_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--kv-accounting dong holds one more KV token per running sequence (a higher utilisation of
    the same budget); it needs --admission on_demand under continuous batching. --step
    staircase:... prices iterations by Dai, Li and Peng's staircase."""
    kv = (*CONT, "--rate", "0.5", "--admission", "on_demand", "--kv-tokens", "20000")
    vllm = simulate(capsys, *kv)
    dong = simulate(capsys, *kv, "--kv-accounting", "dong")
    assert dong["kv_utilisation"] > vllm["kv_utilisation"]
    assert "applies to --admission on_demand" in fails(
        capsys, *CONT, "--rate", "0.5", "--kv-accounting", "dong"
    )
    assert "applies to --batching continuous" in fails(
        capsys, "--tokens", "lognormal:mu=5,sigma=1", "--latency", "a=0.02,b0=0.1", "--rate",
        "1", "--kv-accounting", "dong",
    )  # fmt: skip
    stairs = [
        a if a != "c0=0.02,c_tok=0.0005,c_ctx=0" else "staircase:c0=0.02,stair=0.06,tokens=128"
        for a in CONT
    ]
    assert simulate(capsys, *stairs, "--rate", "0.5")["unstable"] is False
    assert "--step" in fails(capsys, *stairs[:-4], "--rate", "0.5", "--step", "staircase:c0=1")


MOONCAKE_CONV = "data/traces/mooncake-fast25/conversation_trace.jsonl"
PREFIX = ("--trace", MOONCAKE_CONV, "--trace-format", "mooncake", "--replay", "--rate", "0.3",
          "--batching", "continuous", "--max-batch", "32", "--admission", "on_demand",
          "--block-size", "16", "--max-batched-tokens", "4096",
          "--step", "c0=0.01,c_tok=0.00002,c_ctx=0", "--requests", "4000", "--warmup", "400")  # fmt: skip


def test_prefix_caching_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--prefix-caching on Mooncake's conversation trace: some prompt tokens are found cached,
    a larger pool finds at least as many, and the saved prefill shortens the time to first token
    (same arrivals, same pool)."""
    small = simulate(capsys, *PREFIX, "--kv-tokens", "400000", "--prefix-caching")
    large = simulate(capsys, *PREFIX, "--kv-tokens", "4000000", "--prefix-caching")
    off = simulate(capsys, *PREFIX, "--kv-tokens", "4000000")
    assert 0.0 < small["prefix_hit_share"] <= large["prefix_hit_share"] < 1.0
    assert "prefix_hit_share" not in off
    assert large["ttft"]["mean"] < off["ttft"]["mean"]


@pytest.mark.parametrize(
    ("change", "word"),
    [
        ({"--admission": "reserve"}, "--admission on_demand"),
        ({"--kv-tokens": None}, "--kv-tokens"),
        ({"--order": "srpt"}, "non-preemptive --order"),
        ({"--replay": None}, "--replay"),
        (
            {
                "--batching": "dynamic",
                "--step": None,
                "--admission": None,
                "--block-size": None,
                "--max-batched-tokens": None,
                "--kv-tokens": None,
            },
            "applies to --batching continuous",
        ),  # fmt: skip
        ({"--trace-format": "csv"}, "--trace"),
        ({"--block-size": "48", "--kv-tokens": "480000"}, "--block-size 48: the block ids"),
        (
            {"--kv-tokens": "400008"},
            "--kv-tokens 400008: not a whole number of blocks of --block-size 16",
        ),
    ],
)
def test_prefix_caching_refuses_bad_flags(
    capsys: pytest.CaptureFixture[str],
    change: dict,
    word: str,  # type: ignore[type-arg]
) -> None:
    args = [*PREFIX, "--kv-tokens", "400000", "--prefix-caching"]
    for flag, val in change.items():
        if flag in args:
            i = args.index(flag)
            has_value = i + 1 < len(args) and not args[i + 1].startswith("--")
            del args[i : i + (2 if has_value else 1)]
        if val is not None:
            args += [flag, val]
    if "--batching" in change:
        args += ["--latency", "a=0.02,b0=0.1"]
    assert word in fails(capsys, *args)


def test_prefix_caching_needs_block_ids(capsys: pytest.CaptureFixture[str], trace: Path) -> None:
    """A trace without block ids shares nothing: refused, naming --trace."""
    err = fails(
        capsys, "--trace", str(trace), "--timestamp-column", "ts", "--prompt-column", "in_tok",
        "--output-column", "out_tok", "--replay", "--batching", "continuous", "--admission",
        "on_demand", "--kv-tokens", "100000", "--step", "c0=0.01,c_tok=0.00002,c_ctx=0",
        "--prefix-caching", "--requests", "400", "--warmup", "0",
    )  # fmt: skip
    assert "no prompt block ids" in err and "--trace" in err
    assert "--load and --max-rate" in fails(
        capsys, *[a for a in PREFIX if a not in ("--rate", "0.3")], "--load", "0.5",
        "--kv-tokens", "400000", "--prefix-caching",
    )  # fmt: skip


@pytest.mark.parametrize("router", ["prefix_affinity", "prefix_score", "prefix_index"])
def test_prefix_routers_need_prefix_caching(
    capsys: pytest.CaptureFixture[str], router: str
) -> None:
    assert f"--router {router} scores replicas" in fails(
        capsys, *PREFIX, "--kv-tokens", "400000", "--replicas", "2", "--router", router
    )


@pytest.mark.parametrize("router", ["prefix_score", "prefix_index"])
def test_prefix_routers_on_the_command_line(
    capsys: pytest.CaptureFixture[str], router: str
) -> None:
    """Both scored routers run on Mooncake's trace with the cache on, and find some of it."""
    out = simulate(capsys, *PREFIX, "--kv-tokens", "4000000", "--prefix-caching",
                   "--replicas", "2", "--router", router)  # fmt: skip
    assert out["router"] == router and 0.0 < out["prefix_hit_share"] < 1.0
