"""The fields of the engine's request slot pool: ``pool[slot, F_*]`` (float64), one row per
request while it waits or runs (:mod:`llmqueue.sim.queue` allocates and recycles the rows).

A request is in at most one heap at a time (the queue's while it waits, its server's completion
heap while it decodes), so both keep its position in the one field ``F_HPOS``
(:mod:`llmqueue.sim.heap`).
"""

from __future__ import annotations

F_ARR = 0  # arrival time (s)
F_PROMPT = 1  # prompt tokens
F_OUT = 2  # output tokens (true)
F_PRED = 3  # predicted output tokens
F_ID = 4  # request id (arrival index, exact in float64 below 2**53)
F_WAITING = 5  # 1 while in the queue
F_FRONT = 6  # 1 when put back by a preemption (goes first)
F_DONE = 7  # output tokens generated so far (continuous batching)
F_TTFT = 8  # time of its first token (-1 before)
F_START = 9  # time it was first admitted / its batch started (-1 before)
F_PREFILLED = 10  # prompt (+ recomputed) tokens prefilled so far in its current admission
F_SERVER = 11  # server it runs on (-1 while waiting)
F_PEFF = 12  # tokens its current prefill covers: prompt + tokens generated before a preemption
F_HELD = 13  # KV-cache tokens it holds (continuous batching)
F_DECODING = 14  # 1 once its (re)prefill is done and it decodes (continuous batching)
F_BASE = 15  # decoding: tokens generated = server's decode steps + F_BASE
F_TARGET = 16  # decoding: the server's decode-step count at which it has all its tokens
F_HBASE = 17  # decoding, on-demand KV: tokens held = server's decode steps + F_HBASE
F_HPOS = 18  # its position in the heap that holds it (the queue's or its server's)
F_ADMSEQ = 19  # admission sequence number (tells a live admission-stack entry from a stale one)
F_HITS = 20  # prefix caching: blocks its admission hit (its first cached copies of its ids)
F_CHAIN = 21  # prefix caching: first block it allocated for an id (-1: none), chained by link
F_REG = 22  # prefix caching: its leading id'ed blocks cached so far (hits included)
F_REGB = 23  # prefix caching: its block that is cached next (-1: none)
NF = 24
