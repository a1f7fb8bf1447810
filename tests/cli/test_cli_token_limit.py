"""The operator CLI `llmqueue token-limit`: outputs, JSON keys, ranges, bad input (exit 2)."""

import json
import subprocess
import sys

import pytest

from llmqueue.cli import main

LN = "lognormal:mu=7,sigma=0.7"
LAT = "a=0.023,b0=0.186"


def run_json(capsys, *args):
    assert main(["token-limit", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_single_limit_patient_json(capsys):
    out = run_json(capsys, "--tokens", LN, "--rate", "0.025", "--latency", LAT, "--limit", "1600")
    assert set(out) >= {"rho", "mean_service", "second_moment", "wq"}
    assert out["wq"]["formula"] == pytest.approx(24.74, abs=0.05)
    assert 0 < out["rho"]["formula"] < 1


def test_single_limit_impatient_with_simulation(capsys):
    out = run_json(
        capsys,
        "--tokens",
        LN,
        "--rate",
        "0.04",
        "--latency",
        LAT,
        "--limit",
        "1300",
        "--patience",
        "60",
        "--simulate",
        "400000",
        "--seed",
        "3",
    )
    for key in ("loss", "wqs", "w_all"):
        assert {"formula", "exact", "sim", "sim_ci95"} <= set(out[key])
    assert {"sim_p50", "sim_p95", "sim_p99"} <= set(out["w_all"])
    assert abs(out["loss"]["sim"] - out["loss"]["exact"]) < 5 * out["loss"]["sim_ci95"] + 1e-3


def test_range_prints_rows_and_optimum(capsys):
    out = run_json(
        capsys, "--tokens", LN, "--rate", "0.04", "--latency", LAT, "--limit", "1000:3000:500"
    )
    assert [r["limit"] for r in out["rows"]] == [1000, 1500, 2000, 2500, 3000]
    assert out["rows"][-1]["unstable"] is True and "wq" not in out["rows"][-1]
    assert out["optimum"]["limit"] in (1000, 1500, 2000)


def test_range_impatient_optimum_uses_alpha_cost_gamma(capsys):
    a = run_json(
        capsys,
        "--tokens",
        LN,
        "--rate",
        "0.04",
        "--latency",
        LAT,
        "--limit",
        "200:2000:200",
        "--patience",
        "60",
    )
    b = run_json(
        capsys,
        "--tokens",
        LN,
        "--rate",
        "0.04",
        "--latency",
        LAT,
        "--limit",
        "200:2000:200",
        "--patience",
        "60",
        "--cost",
        "0",
        "--alpha",
        "0.99",
    )
    assert b["optimum"]["limit"] >= a["optimum"]["limit"]
    assert b["optimum"]["cost"] == 0


def test_trace_column_works(capsys, azure_trace):
    out = run_json(
        capsys,
        "--tokens",
        f"trace:{azure_trace}:GeneratedTokens",
        "--rate",
        "0.1",
        "--latency",
        LAT,
        "--limit",
        "500",
    )
    assert out["p_below_limit"] > 0.8


def test_text_output(capsys):
    assert (
        main(
            [
                "token-limit",
                "--tokens",
                LN,
                "--rate",
                "0.025",
                "--latency",
                LAT,
                "--limit",
                "1000:2000:500",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "optimum: l* =" in text and "1500" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (["--rate", "0.04", "--limit", "3000"], "rho"),
        (["--rate", "0", "--limit", "1000"], "--rate: value must be a number in (0, 1e+09]"),
        (["--rate", "-1", "--limit", "1000"], "--rate: value must be a number in (0, 1e+09]"),
        (["--rate", "0.01", "--limit", "0"], "--limit must lie in (0, 1e+09] tokens"),
        (["--rate", "0.01", "--limit", "5:1:1"], "START:STOP:STEP"),
        (["--rate", "0.01", "--limit", "abc"], "--limit"),
        (["--rate", "0.01", "--limit", "100", "--patience", "-3"], "--patience"),
        (["--rate", "0.01", "--limit", "100", "--tokens", "lognormal:mu=7"], "missing"),
        (
            ["--rate", "0.01", "--limit", "100", "--tokens", "trace:/no/such.csv:x"],
            "does not exist",
        ),
        (["--rate", "0.01", "--limit", "100", "--latency", "a=1"], "--latency"),
    ],
)
def test_bad_input_exit_code_2_without_traceback(args, message, capsys):
    base = {"--tokens": LN, "--latency": LAT}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    argv = [x for kv in base.items() for x in kv]
    try:
        code = main(["token-limit", *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_bad_input_from_the_command_line_exits_2():
    """The same from a real process: exit status 2, one message, no traceback."""
    argv = ["--tokens", LN, "--latency", LAT, "--rate", "0", "--limit", "1000"]
    proc = subprocess.run(
        [sys.executable, "-m", "llmqueue", "token-limit", *argv], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "argument --rate: value must be a number in (0, 1e+09] requests/s" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
