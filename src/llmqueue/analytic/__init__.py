"""Closed forms and exact numeric solutions.

- Sec. III (one request at a time): :mod:`.mg1` (Eq. 1-5), :mod:`.impatience` (Eq. 6-9 and the
  exact M/G/1+D solution), :mod:`.tradeoff` (Eq. 10-13);
- Sec. IV (batching): :mod:`.batch_time` (Eq. 17-24, 26), :mod:`.inoue` (Eq. 14-16),
  :mod:`.bulk` (Eq. 25), :mod:`.batch_chain` (exact embedded Markov chains);
- beyond the paper: :mod:`.multiserver`, :mod:`.priority`, :mod:`.multibin`, and :mod:`.lru`
  (an exact LRU replay and Che's approximation, the theory of the prefix cache).
"""
