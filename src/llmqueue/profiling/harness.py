"""Timing harness: forced-length greedy generation with the first token and each later token
timed separately (paper Sec. II-B/II-C; t1 and t2 of Eq. 18).

- Forced output length: exactly ``new_tokens`` tokens are generated; EOS is never checked, so it
  cannot stop a run early (the paper's output lengths are fixed per measurement).
- t1 = prefill of the (padded) prompt batch + choice of the first token; t2 = each later decode
  step (one token for every sequence of the batch). N in S = a*N + b0 counts the tokens after the
  first (docs/equations.md), so a run of n tokens takes t1 + (n - 1)*t2.
- The device is synchronised before every clock read (``torch.cuda.synchronize`` on CUDA).
- Batches: prompts of unequal length are left-padded to the longest, with an attention mask and
  position ids from the mask, as Hugging Face ``generate`` does ("padded to the longest", Sec. IV).
- The loop mirrors ``generate`` with greedy decoding, a ``DynamicCache`` and ``logits_to_keep=1``.

Needs torch (and transformers for the model); imported lazily so that ``llmqueue.profiling``'s
roofline and KV-cache arithmetic work without them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmqueue.errors import InputError

__all__ = ["GenerationTiming", "generate_timed", "time_point", "PointTiming"]


@dataclass
class GenerationTiming:
    """One generation run. Times in seconds."""

    batch: int
    input_tokens: list[int]
    new_tokens: int
    t1_s: float
    step_s: list[float]
    total_s: float
    tokens: Any = field(default=None, repr=False)  # (batch, new_tokens) generated ids

    @property
    def t2_median_s(self) -> float:
        return statistics.median(self.step_s) if self.step_s else float("nan")

    @property
    def t2_mean_s(self) -> float:
        return sum(self.step_s) / len(self.step_s) if self.step_s else float("nan")


def _sync(device: Any) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def generate_timed(
    model: Any,
    input_lengths: Sequence[int],
    new_tokens: int,
    seed: int = 0,
    keep_tokens: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> GenerationTiming:
    """Generate exactly `new_tokens` tokens for a batch of random prompts of the given lengths.

    Prompts are random token ids (timing does not depend on them), left-padded to the longest.
    Returns t1 (prefill + first token) and the time of each later step, read after a device
    synchronisation; ``total_s`` = t1 + sum(step times) by construction of the clock chain.
    `clock` is the wall clock by default (``time.thread_time`` measures CPU work instead, which
    the layer-linearity test uses on a shared machine).
    """
    import torch
    from transformers import DynamicCache

    lengths = [int(x) for x in input_lengths]
    if not lengths or min(lengths) < 1:
        raise InputError(f"input lengths must be >= 1 token, got {lengths}")
    if new_tokens < 1:
        raise InputError(f"new_tokens must be >= 1, got {new_tokens}")
    cfg = model.config
    ctx = int(getattr(cfg, "max_position_embeddings", 1 << 30))
    if max(lengths) + new_tokens > ctx:
        raise InputError(
            f"input {max(lengths)} + output {new_tokens} tokens exceed the model's context of {ctx} tokens"
        )
    device = next(model.parameters()).device
    b, s = len(lengths), max(lengths)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(3, cfg.vocab_size, (b, s), generator=gen)
    padded = min(lengths) < s
    mask = torch.ones((b, s), dtype=torch.long)
    for i, n in enumerate(lengths):
        if n < s:
            ids[i, : s - n] = cfg.pad_token_id if cfg.pad_token_id is not None else 0
            mask[i, : s - n] = 0
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out_tokens = []
    steps: list[float] = []
    with torch.inference_mode():
        cache = DynamicCache(config=cfg)
        _sync(device)
        t0 = clock()
        out = model(
            input_ids=ids,
            attention_mask=mask if padded else None,
            position_ids=pos,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
        out_tokens.append(nxt)
        _sync(device)
        t = clock()
        t1 = t - t0
        pos = pos[:, -1:]
        for _ in range(new_tokens - 1):
            pos = pos + 1
            if padded:
                mask = torch.cat([mask, mask.new_ones((b, 1))], dim=-1)
            out = model(
                input_ids=nxt,
                attention_mask=mask if padded else None,
                position_ids=pos,
                past_key_values=out.past_key_values,
                use_cache=True,
                logits_to_keep=1,
            )
            nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
            out_tokens.append(nxt)
            _sync(device)
            t_new = clock()
            steps.append(t_new - t)
            t = t_new
        total = t - t0
    tokens = torch.cat(out_tokens, dim=-1).cpu() if keep_tokens else None
    return GenerationTiming(b, lengths, new_tokens, t1, steps, total, tokens)


@dataclass(frozen=True)
class PointTiming:
    """Medians over repeats of one (batch, input, decode steps) point. Seconds."""

    batch: int
    input_tokens: int
    decode_steps: int
    repeats: int
    t1_s: float  # median over repeats of t1
    t2_s: float  # median over repeats of the per-run median step time
    t2_mean_s: float  # median over repeats of the per-run mean step time (for composing T)
    total_s: float  # median over repeats of the run's total
    t1_spread_s: float  # max - min of t1 over repeats
    t2_spread_s: float  # max - min of the per-run median step time

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def time_point(
    model: Any,
    batch: int,
    input_tokens: int,
    decode_steps: int,
    warmup: int = 1,
    repeats: int = 3,
    seed: int = 0,
) -> PointTiming:
    """Time t1 and t2 at one point: `warmup` short runs (2 tokens) then `repeats` runs of
    ``decode_steps + 1`` tokens (the first token plus `decode_steps` decode steps); medians."""
    if batch < 1 or repeats < 1 or decode_steps < 1 or warmup < 0:
        raise InputError("batch, repeats and decode_steps must be >= 1 and warmup >= 0")
    lengths = [input_tokens] * batch
    for w in range(warmup):
        generate_timed(model, lengths, 2, seed=seed + 1000 + w)
    runs = [generate_timed(model, lengths, decode_steps + 1, seed=seed + r) for r in range(repeats)]
    t1 = [r.t1_s for r in runs]
    t2 = [r.t2_median_s for r in runs]
    return PointTiming(
        batch,
        input_tokens,
        decode_steps,
        repeats,
        statistics.median(t1),
        statistics.median(t2),
        statistics.median([r.t2_mean_s for r in runs]),
        statistics.median([r.total_s for r in runs]),
        max(t1) - min(t1),
        max(t2) - min(t2),
    )
