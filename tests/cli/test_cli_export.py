"""``--export vidur PATH`` of llmqueue simulate and plan: the requests a run simulates, written in
vidur's request CSV; replayed back through the engine they give the same run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llmqueue.cli import main
from llmqueue.latency import StepLaw
from llmqueue.policy import Policy
from llmqueue.seeds import seed_sequence
from llmqueue.sim.engine import run
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import parse_law
from llmqueue.traces import read_trace

COMMON = ["--batching", "continuous", "--step", "c0=0.01,c_tok=1e-4,c_ctx=1e-7",
          "--max-batch", "8", "--requests", "400", "--warmup", "40", "--json"]  # fmt: skip


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["simulate", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_exported_load_is_the_run_s_requests(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The file holds the requests the engine ran (its per-request table, same seed stream), and
    replayed it gives the same means but for the arrivals after the last measured request (the
    run goes on with them until every measured request finishes; the file stops)."""
    path = tmp_path / "load.csv"
    first = _run(capsys, "--tokens", "uniform:low=1,high=100", "--prompt-tokens",
                 "uniform:low=1,high=300", "--rate", "6", *COMMON, "--export", "vidur", str(path))  # fmt: skip
    rows = read_trace(path, format="vidur")
    assert rows.arrival_s.size == 440 and rows.arrival_s[0] == 0.0
    w = PoissonWorkload(parse_law("uniform:low=1,high=100"), 6.0,
                        prompt=parse_law("uniform:low=1,high=300"))  # fmt: skip
    res = run(w, Policy("continuous", bmax=8), StepLaw(0.01, 1e-4, 1e-7), requests=400,
              warmup=40, seed=seed_sequence(0, "run"), per_request=True)  # fmt: skip
    tab = res.per_request[:440]
    np.testing.assert_allclose(rows.arrival_s, tab[:, 1] - tab[0, 1], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(rows.prompt_tokens, tab[:, 2])
    np.testing.assert_array_equal(rows.output_tokens, tab[:, 3])
    assert res.response.mean == pytest.approx(first["jct"]["mean"], rel=1e-12)
    again = _run(capsys, "--trace", str(path), "--replay", *COMMON)
    assert again["jct"]["mean"] == pytest.approx(first["jct"]["mean"], rel=0.03)


def test_plan_exports_the_load_at_the_target_rate(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "load.csv"
    rc = main(["plan", "--tokens", "uniform:low=1,high=100", "--step", "c0=0.01,c_tok=1e-4,c_ctx=0",
               "--kv-tokens", "4096", "--slo", "jct_p99=5", "--rate", "2", "--requests", "500",
               "--warmup", "50", "--json", "--export", "vidur", str(path)])  # fmt: skip
    assert rc == 0
    capsys.readouterr()
    rows = read_trace(path, format="vidur")
    assert rows.arrival_s.size == 550
    assert (rows.arrival_s.size - 1) / rows.arrival_s[-1] == pytest.approx(2.0, rel=0.15)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--export", "csv", "x.csv"], "--export: format 'csv' is not one of vidur"),
        (["--export", "vidur", "/nonexistent/x.csv"], "--export: the folder"),
    ],
)
def test_bad_exports_exit_2(capsys, args, match) -> None:  # type: ignore[no-untyped-def]
    rc = main(["simulate", "--tokens", "uniform:low=1,high=100", "--rate", "1", *COMMON, *args])
    assert rc == 2
    assert match in capsys.readouterr().err
