"""Multi-turn chat sessions with shared system prompts, as a request table with prompt block ids
for prefix caching (:mod:`llmqueue.sim.prefix`).

A session opens with one of ``system_prompts`` system prompts of ``system_tokens`` tokens each,
chosen with Zipf(``zipf_alpha``) popularity (prompt i with probability proportional to
i^-alpha, i = 1..S); sessions arrive as a Poisson stream at ``rate_per_s`` sessions per second;
a session has ``turns`` turns (a number drawn from its token law, at least 1); turn k's prompt is
turn k-1's prompt + its answer + a new user message (turn 1's: the system prompt + a message),
message and answer lengths drawn from their token laws; turn k + 1 arrives a think time
(exponential, mean ``think_s``) after turn k *arrives* (open loop: the table is replayed, nobody
waits for an answer, so a short think time can bring a turn before its previous answer exists).

Block ids name content, as a hash chain does: a session's tokens form one append-only stream, and
block i of it (tokens [i b, (i + 1) b)) is the system prompt's block i when it lies wholly inside
the system prompt (shared by every session with that system prompt) and the session's own block
i otherwise; a turn's prompt carries the ids of the blocks wholly inside it. So turn k + 1 finds
turn k's prompt and answer among its leading blocks, and sessions with the same system prompt
share its full blocks. Units: tokens, seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from llmqueue.analytic.lru import zipf_popularity
from llmqueue.blocks import PromptBlocks
from llmqueue.errors import InputError
from llmqueue.sim.workload import ReplayWorkload
from llmqueue.tokens import TokenLaw

__all__ = ["SessionSpec", "session_table", "session_workload"]


@dataclass(frozen=True)
class SessionSpec:
    """The session generator's settings (module docstring)."""

    rate_per_s: float
    sessions: int
    system_prompts: int
    system_tokens: int
    zipf_alpha: float
    turns: TokenLaw
    message: TokenLaw
    answer: TokenLaw
    think_s: float
    block_tokens: int = 16

    def __post_init__(self) -> None:
        checks = (
            ("rate_per_s", self.rate_per_s > 0 and math.isfinite(self.rate_per_s), "> 0"),
            ("sessions", _int(self.sessions) and self.sessions >= 1, "an integer >= 1"),
            ("system_prompts", _int(self.system_prompts) and self.system_prompts >= 1, ">= 1"),
            ("system_tokens", _int(self.system_tokens) and self.system_tokens >= 0, ">= 0"),
            ("zipf_alpha", self.zipf_alpha >= 0 and math.isfinite(self.zipf_alpha), ">= 0"),
            ("think_s", self.think_s >= 0 and math.isfinite(self.think_s), ">= 0 s"),
            ("block_tokens", _int(self.block_tokens) and 1 <= self.block_tokens <= 1 << 20,
             "an integer in [1, 2**20]"),
        )  # fmt: skip
        for key, ok, allowed in checks:
            if not ok:
                raise InputError(f"sessions: {key} must be {allowed}, got {getattr(self, key)!r}")


def _int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def session_table(
    spec: SessionSpec, *, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, PromptBlocks, np.ndarray]:
    """(arrival s, prompt tokens, output tokens, block ids, session of each request), requests
    in arrival order (ties by session, then turn)."""
    rng = np.random.default_rng(seed)
    n, b = int(spec.sessions), int(spec.block_tokens)
    start = np.cumsum(rng.exponential(1.0 / spec.rate_per_s, n))
    system = rng.choice(
        spec.system_prompts, size=n, p=zipf_popularity(spec.system_prompts, spec.zipf_alpha)
    )
    turns = np.maximum(1, np.rint(spec.turns.sample(rng, n))).astype(np.int64)
    sys_blocks = int(spec.system_tokens) // b
    # ids: system prompt s's block i -> s * sys_blocks + i; session j's own block i -> base_j + i
    next_id = int(spec.system_prompts) * sys_blocks
    arr, prompt, out, sess, lists = [], [], [], [], []
    for j in range(n):
        k = int(turns[j])
        msg = np.maximum(1, np.rint(spec.message.sample(rng, k)))
        ans = np.maximum(1, np.rint(spec.answer.sample(rng, k)))
        think = rng.exponential(spec.think_s, k - 1) if spec.think_s > 0 else np.zeros(k - 1)
        t = start[j] + np.concatenate([[0.0], np.cumsum(think)])
        length = float(spec.system_tokens)
        base = next_id - sys_blocks  # the session's block i (i >= sys_blocks) is base + i
        for q in range(k):
            p = length + msg[q]
            full = int(p) // b
            ids = [int(system[j]) * sys_blocks + i for i in range(min(full, sys_blocks))]
            ids += [base + i for i in range(sys_blocks, full)]
            arr.append(t[q])
            prompt.append(p)
            out.append(ans[q])
            sess.append(j)
            lists.append(ids)
            length = p + ans[q]
        total_blocks = int(length) // b
        next_id = base + max(total_blocks, sys_blocks) + 1
    order = np.lexsort((np.arange(len(arr)), np.asarray(arr)))
    counts = np.array([len(lists[i]) for i in order], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    flat = np.array([x for i in order for x in lists[i]], dtype=np.int64)
    blocks = PromptBlocks(offsets, flat, b, "sessions")
    a = np.asarray(arr)[order]
    return (
        a - a[0],
        np.asarray(prompt)[order],
        np.asarray(out)[order],
        blocks,
        np.asarray(sess)[order],
    )


def session_workload(spec: SessionSpec, *, seed: int) -> ReplayWorkload:
    """The sessions of `spec` as a replayed table with their prompt block ids."""
    arr, prompt, out, blocks, _ = session_table(spec, seed=seed)
    if arr.size < 2:
        raise InputError("sessions: the table needs >= 2 requests (more sessions or turns)")
    return ReplayWorkload(arr, prompt, out, source="sessions", blocks=blocks)
