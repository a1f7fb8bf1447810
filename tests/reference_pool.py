"""A plain-Python reference of the prefix-caching block pool (llmqueue.sim.block_pool), written
from vLLM's v1 BlockPool as llmqueue.sim.block_pool's docstring describes it: a Python list as the free queue
(popped at the front, appended at the back, removed from the middle on a hit), a dict from id to
the list of its cached copies (in the order they were cached), reference counts in a list."""

from __future__ import annotations


class RefPool:
    def __init__(self, capacity: int) -> None:
        self.free: list[int] = list(range(capacity))
        self.ref = [0] * capacity
        self.id_of: list[int | None] = [None] * capacity
        self.copies: dict[int, list[int]] = {}
        self.evictions = 0

    def cached_run(self, ids: list[int], most: int) -> int:
        k = 0
        while k < min(most, len(ids)) and self.copies.get(ids[k]):
            k += 1
        return k

    def evictable(self, ids: list[int]) -> int:
        return sum(1 for i in ids if self.ref[self.copies[i][0]] == 0)

    def touch(self, ids: list[int]) -> list[int]:
        out = []
        for i in ids:
            b = self.copies[i][0]
            if self.ref[b] == 0:
                self.free.remove(b)
            self.ref[b] += 1
            out.append(b)
        return out

    def allocate(self, n: int) -> list[int]:
        assert n <= len(self.free)
        out = []
        for _ in range(n):
            b = self.free.pop(0)
            i = self.id_of[b]
            if i is not None:
                self.copies[i].remove(b)
                if not self.copies[i]:
                    del self.copies[i]
                self.id_of[b] = None
                self.evictions += 1
            assert self.ref[b] == 0
            self.ref[b] = 1
            out.append(b)
        return out

    def register(self, b: int, i: int) -> None:
        if self.id_of[b] is None:
            self.id_of[b] = i
            self.copies.setdefault(i, []).append(b)

    def release(self, table: list[int]) -> None:
        for b in reversed(table):
            self.ref[b] -= 1
            assert self.ref[b] >= 0
            if self.ref[b] == 0:
                self.free.append(b)

    @property
    def cached(self) -> int:
        return sum(len(c) for c in self.copies.values())
