"""Harness tests on the tiny model (CPU): forced length, t1/t2 splits, padding, depth linearity,
bad devices. Needs the `profiling` extra (torch + transformers)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llmqueue.errors import InputError  # noqa: E402
from llmqueue.profiling.fits import depth_fit  # noqa: E402
from llmqueue.profiling.harness import generate_timed, time_point  # noqa: E402
from llmqueue.profiling.models import build_model, get_spec  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return build_model("tiny", "cpu", "float32", seed=1)


@pytest.mark.parametrize("n", [1, 2, 9])
def test_forced_length_yields_n_tokens(tiny, n: int) -> None:
    r = generate_timed(tiny, [7, 7], n, keep_tokens=True)
    assert tuple(r.tokens.shape) == (2, n)
    assert len(r.step_s) == n - 1


def test_eos_does_not_stop_generation(tiny) -> None:
    first = generate_timed(tiny, [5], 12, seed=3, keep_tokens=True).tokens
    old = tiny.config.eos_token_id
    try:
        tiny.config.eos_token_id = int(first[0, 0])  # the very first token is now EOS
        again = generate_timed(tiny, [5], 12, seed=3, keep_tokens=True).tokens
    finally:
        tiny.config.eos_token_id = old
    assert again.shape[1] == 12
    assert int(again[0, 0]) == int(first[0, 0])  # EOS was produced and generation went on


def test_left_padding_unequal_inputs(tiny) -> None:
    r = generate_timed(tiny, [3, 11, 6], 5, keep_tokens=True)
    assert tuple(r.tokens.shape) == (3, 5)
    assert r.input_tokens == [3, 11, 6]


def test_t1_t2_splits_add_up_to_total(tiny) -> None:
    t0 = time.perf_counter()
    r = generate_timed(tiny, [16] * 2, 10)
    outer = time.perf_counter() - t0
    assert r.total_s == pytest.approx(r.t1_s + sum(r.step_s), rel=1e-9, abs=1e-12)
    assert 0 < r.total_s <= outer
    assert r.total_s >= 0.3 * outer  # the clock chain covers the run (input set-up is tiny)
    assert r.t1_s > 0 and min(r.step_s) > 0


def test_time_point_medians(tiny) -> None:
    pt = time_point(tiny, 2, 8, 4, warmup=1, repeats=3)
    assert pt.batch == 2 and pt.repeats == 3 and pt.decode_steps == 4
    assert pt.t1_s > 0 and pt.t2_s > 0 and pt.t2_mean_s > 0
    assert pt.t1_spread_s >= 0


def test_context_overflow_is_an_input_error(tiny) -> None:
    ctx = get_spec("tiny").context
    with pytest.raises(InputError, match="context"):
        generate_timed(tiny, [ctx - 2], 5)


def test_layer_scaling_is_linear_on_a_wider_tiny_config() -> None:
    """Decode work grows linearly with the number of layers (the CPU path's extrapolation rests on it).

    Measured as CPU time of one thread (``time.thread_time``), the minimum over 72 steps, so other
    processes on a shared machine do not decide the verdict; a quadratic cost would fail it.
    """
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.initialization import no_init_weights

    from llmqueue.profiling.models import fill_random_

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    depths = (1, 2, 4, 8)
    models = {}
    for layers in depths:
        cfg = LlamaConfig(
            vocab_size=256,
            hidden_size=512,
            intermediate_size=1536,
            num_hidden_layers=layers,
            num_attention_heads=8,
            num_key_value_heads=8,
            max_position_embeddings=256,
            pad_token_id=0,
        )
        with no_init_weights():
            models[layers] = LlamaForCausalLM(cfg).eval()
        fill_random_(models[layers], seed=0)
    steps: dict[int, list[float]] = {n: [] for n in depths}
    t1s: dict[int, list[float]] = {n: [] for n in depths}
    try:
        for rnd in range(3):  # interleaved rounds: a burst of load hits every depth alike
            for layers in depths:
                r = generate_timed(models[layers], [8], 25, seed=rnd, clock=time.thread_time)
                steps[layers] += r.step_s
                t1s[layers].append(r.t1_s)
    finally:
        torch.set_num_threads(threads)
    rows = [
        {
            "model": "w",
            "layers": n,
            "batch": 1,
            "input_tokens": 8,
            "t1_s": min(t1s[n]),
            "t2_s": min(steps[n]),
        }
        for n in depths
    ]
    d = depth_fit(pd.DataFrame(rows), "w", {"batch": 1, "input_tokens": 8}, tolerance=0.25)
    assert d["t2"]["slope"] > 0
    assert d["t2"]["r2"] > 0.95, d
    assert d["t2"]["max_rel_residual"] <= 0.25, d


def test_cuda_asked_but_absent() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    with pytest.raises(InputError, match="CUDA is not available"):
        build_model("tiny", "cuda")


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"name": "gpt-5"}, "unknown model"),
        ({"device": "tpu"}, "device"),
        ({"dtype": "float16"}, "not supported on CPU"),
        ({"dtype": "int3"}, "dtype"),
    ],
)
def test_bad_model_device_dtype(kw: dict, msg: str) -> None:
    args = {"name": "tiny", "device": "cpu", "dtype": "float32", **kw}
    with pytest.raises(InputError, match=msg):
        build_model(**args)
