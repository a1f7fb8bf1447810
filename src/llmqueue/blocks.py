"""Prompts with identity: the KV-cache block ids of each request's prompt, for prefix caching.

A request's prompt is cut into blocks of ``block_tokens`` tokens from its first token; block k
holds tokens [k b, (k + 1) b). Two requests whose id lists are equal in their first k entries
have equal first k blocks (the same tokens at the same positions), so the KV of those blocks
computed for one can serve the other: the hash chain of vLLM's automatic prefix caching (a
block's hash covers its tokens and its parent's hash), SGLang's radix tree and Mooncake's
``hash_ids`` all name blocks this way. A request without ids shares nothing.

:class:`PromptBlocks` holds the ids of every request of a table, ragged (one flat array and
offsets, no Python objects per request), each list covering at most ceil(prompt / b) blocks (the
last may be partial). :meth:`PromptBlocks.on_blocks_of` maps ids over blocks of B tokens (B a
multiple of b, e.g. Mooncake's 512) onto an engine's blocks of b tokens: engine block k lies in
block floor(k b / B) of the list, at sub-position (k b mod B) / b, and gets the id
``id * (B / b) + sub-position``, so equal prefixes of the coarse list stay equal and different
coarse ids never collide; only engine blocks wholly inside the prompt get an id (a partial
engine block is never cached, as in vLLM). :meth:`PromptBlocks.dense` renumbers the ids
0..U-1 in order of first appearance, so that the compiled pool indexes an array by id;
:meth:`PromptBlocks.engine_ids` does both and remembers the answer on the (immutable) object, so
the runs of one replay map its ids once.

Units: tokens. Bad ids (not integers, negative, a list longer than its prompt's blocks, a block
size that does not divide the coarse one) are one-line :class:`~llmqueue.errors.InputError` s
naming the field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from llmqueue.errors import InputError

__all__ = ["MAX_BLOCK_ID", "PromptBlocks", "blocks_from_lists"]

# the largest block id accepted (int64 arithmetic on id * (B / b) stays exact below 2**62)
MAX_BLOCK_ID = 2**53


@dataclass(frozen=True)
class PromptBlocks:
    """Block ids of n requests' prompts: request i's ids are ``ids[offsets[i]:offsets[i + 1]]``,
    over blocks of ``block_tokens`` tokens (``offsets`` has n + 1 entries, int64, from 0)."""

    offsets: np.ndarray
    ids: np.ndarray
    block_tokens: int
    source: str = "blocks"
    # engine_ids' answers by (engine block, digest of the prompts); the last two kept
    _memo: dict[tuple[int, bytes], tuple[PromptBlocks, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        off = np.asarray(self.offsets, dtype=np.int64)
        ids = np.asarray(self.ids, dtype=np.int64)
        if off.ndim != 1 or off.size < 1 or off[0] != 0 or np.any(np.diff(off) < 0):
            raise InputError(f"{self.source}: block offsets must start at 0 and not decrease")
        if ids.ndim != 1 or int(off[-1]) != ids.size:
            raise InputError(f"{self.source}: block offsets must end at the number of ids")
        if ids.size and (ids.min() < 0 or ids.max() > MAX_BLOCK_ID):
            raise InputError(f"{self.source}: block ids must be integers in [0, {MAX_BLOCK_ID}]")
        b = self.block_tokens
        if isinstance(b, bool) or not isinstance(b, int | np.integer) or not 1 <= b <= 1 << 20:
            raise InputError(f"{self.source}: block_tokens must be an integer in [1, 1048576]")
        object.__setattr__(self, "offsets", off)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "block_tokens", int(b))

    @property
    def n(self) -> int:
        """Requests."""
        return int(self.offsets.size - 1)

    def counts(self) -> np.ndarray:
        """Ids per request."""
        return np.diff(self.offsets)

    def of(self, i: int) -> np.ndarray:
        """Request i's ids."""
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def take(self, lo: int, hi: int | None = None) -> PromptBlocks:
        """Requests lo..hi-1."""
        hi = self.n if hi is None else hi
        o = self.offsets[lo : hi + 1]
        return PromptBlocks(o - o[0], self.ids[o[0] : o[-1]], self.block_tokens, self.source)

    def check_prompts(self, prompt_tokens: np.ndarray, label: object = None) -> None:
        """Every list covers at most ceil(prompt / block_tokens) blocks of its request (a list
        that does not is refused naming ``label(i)`` if given, else ``request i``)."""
        p = np.asarray(prompt_tokens, dtype=float)
        if p.size != self.n:
            raise InputError(f"{self.source}: {self.n} id lists for {p.size} requests")
        most = np.ceil(p / self.block_tokens)
        over = np.flatnonzero(self.counts() > most)
        if over.size:
            i = int(over[0])
            at = label(i) if callable(label) else f"request {i}"
            raise InputError(
                f"{self.source}, {at}: it has {int(self.counts()[i])} block ids for "
                f"{p[i]:g} prompt tokens; allowed: at most ceil(prompt / {self.block_tokens}) "
                f"= {int(most[i])}"
            )

    def on_blocks_of(self, engine_block: int, prompt_tokens: np.ndarray) -> PromptBlocks:
        """The ids over an engine's blocks of `engine_block` tokens (which must divide
        ``block_tokens``), for prompts of `prompt_tokens`: only engine blocks wholly inside the
        prompt and inside the listed blocks get ids (the module's mapping)."""
        b = int(engine_block)
        if b < 1 or self.block_tokens % b:
            raise InputError(
                f"{self.source}: an engine block of {engine_block} tokens does not divide the "
                f"ids' block of {self.block_tokens}; allowed: a divisor of {self.block_tokens}"
            )
        self.check_prompts(prompt_tokens)
        r = self.block_tokens // b
        p = np.asarray(prompt_tokens, dtype=np.int64)
        full = np.minimum(p // b, self.counts() * r)  # engine blocks with an id, per request
        off = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(full, out=off[1:])
        req = np.repeat(np.arange(self.n), full)
        k = np.arange(int(off[-1]), dtype=np.int64) - off[req]  # engine block index
        coarse = self.ids[self.offsets[req] + k // r]
        return PromptBlocks(off, coarse * r + k % r, b, self.source)

    def engine_ids(self, engine_block: int, prompt_tokens: np.ndarray) -> tuple[PromptBlocks, int]:
        """``on_blocks_of(engine_block, prompt_tokens).dense()``, computed once per engine block
        and prompts (the object is immutable; the last two answers are kept)."""
        p = np.ascontiguousarray(prompt_tokens, dtype=np.float64)
        key = (int(engine_block), hashlib.blake2b(p.tobytes(), digest_size=16).digest())
        hit = self._memo.get(key)
        if hit is None:
            hit = self.on_blocks_of(engine_block, p).dense()
            while len(self._memo) >= 2:
                self._memo.pop(next(iter(self._memo)))
            self._memo[key] = hit
        return hit

    def dense(self) -> tuple[PromptBlocks, int]:
        """The same lists with ids renumbered 0..U-1 in order of first appearance, and U."""
        if self.ids.size == 0:
            return self, 0
        uniq, first, inv = np.unique(self.ids, return_index=True, return_inverse=True)
        rank = np.empty(uniq.size, dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(uniq.size)
        return PromptBlocks(self.offsets, rank[inv], self.block_tokens, self.source), int(uniq.size)


def blocks_from_lists(
    lists: Sequence[Sequence[object]], block_tokens: int, *, where: str, label: object = None
) -> PromptBlocks:
    """Ragged id lists (from JSON, one list per request) as :class:`PromptBlocks`; an entry that
    is not an integer in [0, :data:`MAX_BLOCK_ID`] is refused naming `where` and the request
    (``label(i)`` if given, else its index)."""
    counts = np.zeros(len(lists) + 1, dtype=np.int64)
    flat: list[int] = []
    for i, ids in enumerate(lists):
        bad = not isinstance(ids, list)
        if not bad:
            for x in ids:
                if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_BLOCK_ID:
                    bad = True
                    break
        if bad:
            at = label(i) if callable(label) else f"request {i}"
            raise InputError(
                f"{where}, {at}: block ids must be a list of integers in [0, {MAX_BLOCK_ID}]"
            )
        flat.extend(ids)  # type: ignore[arg-type]
        counts[i + 1] = len(ids)  # type: ignore[arg-type]
    return PromptBlocks(np.cumsum(counts), np.array(flat, dtype=np.int64), block_tokens, where)
