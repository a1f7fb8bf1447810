"""Measure the serving step law on a device: the time of one engine iteration against the decode
sequences it advances, the prompt tokens it prefills and the context tokens its attention reads.

The serving simulator's iteration law is

    step(decode_seqs, prefill_tokens, context_tokens) = c0 + c_tok * (decode_seqs + prefill_tokens)
                                                         + c_ctx * context_tokens        (seconds)

(linear layers scale with the tokens an iteration processes, attention with the KV cache it reads).
This module times its two pure cases on a random-weight model at full depth:

- **decode**: one step of `b` sequences that each hold `context` tokens of KV cache
  (``decode_seqs = b``, ``prefill_tokens = 0``, ``context_tokens = b * context``). The cache is a
  Hugging Face ``StaticCache`` preallocated for ``context + steps`` tokens and filled with random
  keys and values (no prefill needed; timing does not depend on the values), so a step writes one
  token in place and reads the cache once, as a paged cache does (``DynamicCache``, which the
  Table I sweep uses, copies the whole cache every step). Optionally the same step replayed from a
  captured CUDA graph (``graph`` rows: no Python or launch overhead, as vLLM runs decode).
- **prefill**: one forward pass over `b` prompts of `p` tokens into an empty cache, the first
  output token chosen (``decode_seqs = 0``, ``prefill_tokens = b * p``, ``context_tokens = b * p``:
  attention over the prompt itself).

An iteration that mixes prefill and decode (chunked prefill) is not timed: the law assumes the
two add, which is its modelling assumption, not a measurement. Every point: `warmup` untimed
runs, then `repeats` timed ones (decode: `steps` steps each, the median step); the device is
synchronised before every clock read. Rows go to ``step_law.csv`` (atomically, after each point).

Needs torch and transformers, imported lazily.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError

__all__ = ["STEP_COLUMNS", "decode_points", "time_decode", "time_prefill", "run_step_law"]

STEP_COLUMNS = [
    "model",
    "dtype",
    "kind",  # decode | prefill
    "mode",  # eager | graph
    "batch",
    "tokens_per_seq",  # decode: context per sequence; prefill: prompt tokens per sequence
    "decode_seqs",
    "prefill_tokens",
    "context_tokens",
    "steps",
    "repeats",
    "time_s",  # median
    "spread_s",  # max - min over repeats
]


def decode_points(
    batch_sizes: Sequence[int], contexts: Sequence[int], max_kv_tokens: int, context_limit: int
) -> list[tuple[int, int]]:
    """(batch, context) pairs of the decode grid whose KV fits: b * context <= `max_kv_tokens` and
    context below the model's window."""
    pts = [
        (int(b), int(c))
        for b in batch_sizes
        for c in contexts
        if int(b) * int(c) <= max_kv_tokens and int(c) < context_limit
    ]
    if not pts:
        raise InputError(
            f"step_law: no decode point fits max_kv_tokens = {max_kv_tokens} "
            f"(batch sizes {list(batch_sizes)}, contexts {list(contexts)})"
        )
    return pts


def _sync(device: Any) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def _filled_static_cache(model: Any, batch: int, context: int, room: int, seed: int) -> Any:
    """A ``StaticCache`` for ``context + room`` tokens whose first `context` positions hold random
    keys and values (every layer), so the next write lands at position `context`."""
    import torch
    from transformers import StaticCache

    cfg = model.config
    p = next(model.parameters())
    cache = StaticCache(config=cfg, max_cache_len=context + room)
    kv_heads = cfg.num_key_value_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    gen = torch.Generator(device=p.device).manual_seed(seed)
    for layer in range(cfg.num_hidden_layers):
        k = torch.randn(
            (batch, kv_heads, context, head_dim), generator=gen, device=p.device, dtype=p.dtype
        )
        cache.update(k, k * 0.5, layer)
    return cache


def _reset_length(cache: Any, context: int) -> None:
    for layer in cache.layers:
        layer.cumulative_length.fill_(context)


def time_decode(
    model: Any,
    batch: int,
    context: int,
    steps: int,
    warmup: int,
    repeats: int,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """Median and spread (s) of one decode step of `batch` sequences at `context` cached tokens.

    Each repeat refills nothing: the cache length is reset to `context` and `steps` steps run,
    so every repeat reads the same KV (context .. context + steps tokens).
    """
    import torch

    if batch < 1 or context < 1 or steps < 1 or repeats < 1 or warmup < 0:
        raise InputError("batch, context, steps, repeats must be >= 1 and warmup >= 0")
    device = next(model.parameters()).device
    room = max(steps, warmup, 1) + 1
    with torch.inference_mode():
        cache = _filled_static_cache(model, batch, context, room, seed)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        ids = torch.randint(3, model.config.vocab_size, (batch, 1), generator=gen).to(device)

        def run(n: int) -> list[float]:
            _reset_length(cache, context)
            nxt = ids
            times = []
            _sync(device)
            t = clock()
            for k in range(n):
                pos = torch.full((batch, 1), context + k, dtype=torch.long, device=device)
                out = model(
                    input_ids=nxt,
                    position_ids=pos,
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
                _sync(device)
                t_new = clock()
                times.append(t_new - t)
                t = t_new
            return times

        if warmup:
            run(warmup)
        meds = [statistics.median(run(steps)) for _ in range(repeats)]
    return statistics.median(meds), max(meds) - min(meds)


def time_decode_graph(
    model: Any, batch: int, context: int, replays: int, repeats: int, seed: int = 0
) -> tuple[float, float]:
    """Median and spread (s) of one decode step replayed from a captured CUDA graph (CUDA only).

    The step (write one token at position `context`, read the cache, choose the next token) is
    captured once; before each replay the cache length is reset, so every replay is the same step.
    Timed with CUDA events over `replays` replays, per repeat; medians.
    """
    import torch

    device = next(model.parameters()).device
    if device.type != "cuda":
        raise InputError("graph mode needs a CUDA device")
    with torch.inference_mode():
        cache = _filled_static_cache(model, batch, context, 2, seed)
        ids = torch.full((batch, 1), 5, dtype=torch.long, device=device)
        pos = torch.full((batch, 1), context, dtype=torch.long, device=device)

        def step() -> Any:
            out = model(
                input_ids=ids,
                position_ids=pos,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            return out.logits[:, -1, :].argmax(-1, keepdim=True)

        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                _reset_length(cache, context)
                step()
        torch.cuda.current_stream(device).wait_stream(side)
        _reset_length(cache, context)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        per = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            total = 0.0
            for _ in range(replays):
                _reset_length(cache, context)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                total += start.elapsed_time(end) / 1000.0
            per.append(total / replays)
        del graph
    return statistics.median(per), max(per) - min(per)


def time_prefill(
    model: Any,
    batch: int,
    prompt: int,
    warmup: int,
    repeats: int,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """Median and spread (s) of a prefill of `batch` prompts of `prompt` tokens into an empty cache
    (the first output token chosen; logits of the last position only)."""
    import torch
    from transformers import DynamicCache

    if batch < 1 or prompt < 1 or repeats < 1 or warmup < 0:
        raise InputError("batch, prompt, repeats must be >= 1 and warmup >= 0")
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (batch, prompt), generator=gen).to(device)

    def once() -> float:
        cache = DynamicCache(config=model.config)
        _sync(device)
        t0 = clock()
        out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        out.logits[:, -1, :].argmax(-1)
        _sync(device)
        return clock() - t0

    with torch.inference_mode():
        for _ in range(warmup):
            once()
        ts = [once() for _ in range(repeats)]
    return statistics.median(ts), max(ts) - min(ts)


def run_step_law(
    plan: Mapping[str, Any],
    device: str,
    out_dir: Path,
    seed: int,
    log: Callable[[str], None] = print,
    model: Any = None,
) -> Path:
    """Time the plan's decode and prefill grids; write ``out_dir/step_law.csv``; return its path.

    `plan`: config ``profiling.step_law`` (model, dtype, decode_batch_sizes, decode_contexts,
    max_kv_tokens, decode_steps, prefill_points, warmup, repeats, graph_points). `model` (tests):
    an already built model to time instead of building ``plan['model']`` at full depth.
    """
    import pandas as pd
    import torch

    from llmqueue.hardware.models import build_model, get_spec
    from llmqueue.io import write_csv

    spec = get_spec(str(plan["model"]))
    dtype = str(plan["dtype"])
    if model is None:
        t0 = time.perf_counter()
        model = build_model(spec.name, device, dtype, seed=seed)
        log(f"built {spec.name} ({dtype}, {device}) in {time.perf_counter() - t0:.1f}s")
    ctx_limit = int(model.config.max_position_embeddings)
    points = decode_points(
        plan["decode_batch_sizes"], plan["decode_contexts"], int(plan["max_kv_tokens"]), ctx_limit
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "step_law.csv"
    rows: list[dict[str, Any]] = []
    base = {"model": spec.name, "dtype": dtype}
    warmup, repeats, steps = int(plan["warmup"]), int(plan["repeats"]), int(plan["decode_steps"])

    def add(
        kind: str, mode: str, b: int, per_seq: int, n_steps: int, med: float, spread: float
    ) -> None:
        """One timed point as a row of the serving law's composition: a decode advances `b`
        sequences holding `per_seq` tokens each; a prefill feeds `b` prompts of `per_seq`."""
        decode = kind == "decode"
        rows.append(
            {
                **base,
                "kind": kind,
                "mode": mode,
                "batch": b,
                "tokens_per_seq": per_seq,
                "decode_seqs": b if decode else 0,
                "prefill_tokens": 0 if decode else b * per_seq,
                "context_tokens": b * per_seq,
                "steps": n_steps,
                "repeats": repeats,
                "time_s": med,
                "spread_s": spread,
            }
        )
        write_csv(pd.DataFrame(rows, columns=STEP_COLUMNS), path)

    for b, p in plan["prefill_points"]:
        med, spread = time_prefill(model, int(b), int(p), warmup, repeats, seed)
        add("prefill", "eager", int(b), int(p), 1, med, spread)
        log(f"prefill b={b} p={p}: {med * 1e3:.2f} ms (spread {spread * 1e3:.2f})")
    for b, c in points:
        med, spread = time_decode(model, b, c, steps, warmup, repeats, seed)
        add("decode", "eager", b, c, steps, med, spread)
        log(f"decode b={b} ctx={c}: {med * 1e3:.2f} ms (spread {spread * 1e3:.2f})")
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    if device.startswith("cuda"):
        for b, c in plan.get("graph_points", []):
            try:
                med, spread = time_decode_graph(model, int(b), int(c), steps, repeats, seed)
            except Exception as err:  # noqa: BLE001 - a capture that fails is recorded, not fatal
                log(f"graph capture failed at b={b} ctx={c}: {type(err).__name__}: {err}")
                break
            add("decode", "graph", int(b), int(c), steps, med, spread)
            log(
                f"decode (CUDA graph) b={b} ctx={c}: {med * 1e3:.2f} ms (spread {spread * 1e3:.2f})"
            )
    return path
