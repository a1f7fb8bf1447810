"""``llmqueue batching``: JSON contract, ranges with unstable rows, bad input -> exit 2."""

import json

import pytest

from llmqueue.cli import main

K8 = "k1=0,k2=0,k3=3.1e-4,k4=2.48e-3"
T1 = "k1=0.01,k2=0.77,k3=5e-4,k4=0.02153"
LOGN = "lognormal:mu=7,sigma=0.7"
UNI = "uniform:low=0,high=1000"


def run(capsys, *argv):
    code = main(["batching", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("seed", ["0", "1", "2"])
def test_fixed_json_keys_and_values(capsys, seed):
    code, out, _ = run(
        capsys,
        "--policy",
        "fixed",
        "--batch",
        "8",
        "--tokens",
        LOGN,
        "--rate",
        "0.43",
        "--profile",
        K8,
        "--simulate",
        "40000",
        "--seed",
        seed,
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    assert {"mean_batch_time", "wait", "response", "batch_time_table"} <= d.keys()
    assert d["wait"]["formula"] == pytest.approx(13.31, abs=0.01)  # Eq. (25), fixed T = E[T_8]
    assert d["wait"]["exact"] > d["wait"]["formula"]  # random batch times wait longer
    for kind in ("wait", "response"):
        m = d[kind]
        # the simulation agrees with the exact chain within about 4 sigma of its batch means
        assert m["sim_ci95"] > 0
        assert abs(m["sim"] - m["exact"]) < 4 * m["sim_ci95"] / 1.96, (kind, m)
        assert 0 < m["sim_p50"] <= m["sim_p95"] <= m["sim_p99"]
    # a reply comes after its batch starts: by E[T_8] on average (padded batches)
    assert d["response"]["sim"] - d["wait"]["sim"] == pytest.approx(
        d["mean_batch_time"]["formula"], rel=0.05
    )
    assert d["response"]["formula"] == pytest.approx(
        d["wait"]["formula"] + d["mean_batch_time"]["formula"]
    )


def test_dynamic_has_bound_on_response(capsys):
    code, out, _ = run(
        capsys, "--policy", "dynamic", "--tokens", UNI, "--rate", "0.1", "--profile", T1, "--json"
    )
    d = json.loads(out)
    assert code == 0
    assert d["response"]["bound"] >= d["response"]["exact"]
    assert "bound" not in d["wait"]


def test_rate_range_marks_unstable_rows(capsys):
    code, out, _ = run(
        capsys,
        "--policy",
        "fixed",
        "--batch",
        "4",
        "--tokens",
        LOGN,
        "--rate",
        "0.1:0.5:0.2",
        "--profile",
        K8,
        "--json",
    )
    rows = json.loads(out)["rows"]
    assert code == 0 and len(rows) == 3
    assert rows[0]["unstable"] is False and "wait" in rows[0]
    assert rows[-1]["unstable"] is True and "wait" not in rows[-1] and "K" in rows[-1]["reason"]


def test_optimal_batch(capsys):
    code, out, _ = run(
        capsys,
        "--policy",
        "fixed",
        "--optimal-batch",
        "--tokens",
        LOGN,
        "--rate",
        "0.43",
        "--profile",
        K8,
        "--kmax",
        "12",
        "--json",
    )
    d = json.loads(out)["optimal_batch"]
    assert code == 0
    assert d["formula_wait"] == 8


def test_text_output(capsys):
    code, out, _ = run(
        capsys,
        "--policy",
        "elastic",
        "--bmax",
        "8",
        "--tokens",
        UNI,
        "--rate",
        "0.1",
        "--profile",
        T1,
    )
    assert code == 0 and "E[T_b] table" in out and "response" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (
            [
                "--policy",
                "fixed",
                "--batch",
                "8",
                "--tokens",
                LOGN,
                "--rate",
                "1.0",
                "--profile",
                K8,
            ],
            "K",
        ),
        (
            [
                "--policy",
                "fixed",
                "--batch",
                "0",
                "--tokens",
                LOGN,
                "--rate",
                "0.1",
                "--profile",
                K8,
            ],
            "--batch",
        ),
        (
            [
                "--policy",
                "dynamic",
                "--bmax",
                "-1",
                "--tokens",
                LOGN,
                "--rate",
                "0.1",
                "--profile",
                K8,
            ],
            "--bmax",
        ),
        (
            [
                "--policy",
                "dynamic",
                "--batch",
                "4",
                "--tokens",
                LOGN,
                "--rate",
                "0.1",
                "--profile",
                K8,
            ],
            "--batch",
        ),
        (["--policy", "fixed", "--tokens", LOGN, "--rate", "0.1", "--profile", K8], "--batch"),
        (
            [
                "--policy",
                "dynamic",
                "--tokens",
                LOGN,
                "--rate",
                "0.1",
                "--profile",
                "k1=0,k2=0,k3=-1e-4,k4=0.01",
            ],
            "k3",
        ),
        (
            ["--policy", "dynamic", "--tokens", LOGN, "--rate", "0.1", "--profile", "k1=0,k2=0"],
            "k1",
        ),
        (["--policy", "dynamic", "--tokens", LOGN, "--rate", "-0.1", "--profile", K8], "rate"),
        (
            ["--policy", "dynamic", "--tokens", LOGN, "--rate", "0.5:0.1:0.1", "--profile", K8],
            "STOP",
        ),
        (
            ["--policy", "dynamic", "--tokens", "lognormal:mu=7", "--rate", "0.1", "--profile", K8],
            "sigma",
        ),
        (["--policy", "dynamic", "--tokens", LOGN, "--rate", "0.5", "--profile", T1], "unstable"),
        (
            [
                "--policy",
                "elastic",
                "--optimal-batch",
                "--tokens",
                LOGN,
                "--rate",
                "0.1",
                "--profile",
                K8,
            ],
            "fixed",
        ),
    ],
)
def test_bad_input_exit_2_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert "Traceback" not in err and err.count("\n") == 1
    assert needle in err
