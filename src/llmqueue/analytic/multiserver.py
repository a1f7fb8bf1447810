"""Exact mean waits of c servers fed by Poisson arrivals: the central queue and the routers.

- **Central queue, exponential service (M/M/c)**: the Erlang C formula. With offered load
  a = lambda / mu and rho = a / c < 1, the probability that an arrival waits is
  C(c, a) = [a^c / c! / (1 - rho)] / [sum_{k<c} a^k / k! + a^c / c! / (1 - rho)], and the mean wait
  is W_q = C(c, a) / (c mu - lambda) (Kleinrock 1975, Vol. I, Sec. 3.5).
- **Random routing (any service law)**: each replica sees a Poisson stream of rate lambda / c (a
  thinned Poisson process), so each is an M/G/1 queue: Pollaczek-Khinchine,
  W_q = (lambda / c) E[S^2] / (2 (1 - (lambda / c) E[S])).
- **Round robin, exponential service**: replica r gets every c-th arrival, so its interarrival
  times are Erlang(c, lambda), LST A*(s) = (lambda / (lambda + s))^c: a GI/M/1 queue. Its waiting
  probability sigma is the root in (0, 1) of sigma = A*(mu (1 - sigma)), and W_q = sigma /
  (mu (1 - sigma)) (Kleinrock 1975, Sec. 6.4; Gross & Harris, Sec. 5.3).

Join-the-shortest-queue has no closed form for c > 2; it lies between the central queue (no
replica idles while another has requests waiting) and random routing, at every load.

Units: rates in requests per second, times in seconds.
"""

from __future__ import annotations

import math

from scipy import optimize

from llmqueue.analytic.mg1 import pk_wait
from llmqueue.errors import InputError

__all__ = ["erlang_c", "mmc_wait", "random_routing_wait", "round_robin_mm_wait", "gim1_sigma"]


def _check(rate_per_s: float, mu_per_s: float, servers: int) -> float:
    if not (isinstance(servers, int) and servers >= 1):
        raise InputError(f"servers must be an integer >= 1, got {servers!r}")
    if not (rate_per_s > 0 and mu_per_s > 0 and math.isfinite(rate_per_s * mu_per_s)):
        raise InputError(f"rates must be finite and > 0, got {rate_per_s!r}, {mu_per_s!r}")
    rho = rate_per_s / (servers * mu_per_s)
    if rho >= 1.0:
        raise InputError(f"load rho = lambda / (c mu) = {rho:.4g} must be < 1 for a steady state")
    return rho


def erlang_c(servers: int, offered: float) -> float:
    """C(c, a): the probability that an arrival to M/M/c waits, offered load a = lambda / mu < c.
    Summed in the stable recursive form (the terms a^k / k! relative to the last one)."""
    c = servers
    rho = offered / c
    if not (0 < rho < 1):
        raise InputError(f"offered load a / c = {rho:.4g} must lie in (0, 1)")
    # sum_{k<c} a^k/k! divided by a^c/c!: walk down from k = c - 1
    ratio = 0.0
    term = 1.0
    for k in range(c, 0, -1):
        term *= k / offered  # a^(k-1)/(k-1)! over a^c/c!
        ratio += term
    tail = 1.0 / (1.0 - rho)
    return tail / (ratio + tail)


def mmc_wait(rate_per_s: float, mu_per_s: float, servers: int) -> float:
    """Mean wait in queue of M/M/c (Erlang C), seconds."""
    _check(rate_per_s, mu_per_s, servers)
    return erlang_c(servers, rate_per_s / mu_per_s) / (servers * mu_per_s - rate_per_s)


def random_routing_wait(
    rate_per_s: float, mean_s: float, second_moment_s2: float, replicas: int
) -> float:
    """Mean wait when Poisson arrivals go to `replicas` queues uniformly at random: each is M/G/1
    at rate lambda / c (Pollaczek-Khinchine), service moments E[S] (s) and E[S^2] (s^2)."""
    _check(rate_per_s, 1.0 / mean_s, replicas)
    return pk_wait(rate_per_s / replicas, mean_s, second_moment_s2)


def gim1_sigma(rate_per_s: float, mu_per_s: float, stages: int) -> float:
    """sigma in (0, 1) with sigma = A*(mu (1 - sigma)), A*(s) = (lambda / (lambda + s))^stages:
    the GI/M/1 queue whose interarrival times are Erlang(stages, lambda) (mean stages / lambda)."""
    rho = _check(rate_per_s, mu_per_s, stages)
    del rho

    def gap(sig: float) -> float:
        return (rate_per_s / (rate_per_s + mu_per_s * (1.0 - sig))) ** stages - sig

    # gap > 0 at 0 and < 0 just below 1 when the queue is stable (the root 1 is the trivial one)
    hi = 1.0 - 1e-12
    if gap(hi) >= 0:
        raise InputError("no root sigma < 1: the queue is not stable")
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-15, rtol=1e-14))


def round_robin_mm_wait(rate_per_s: float, mu_per_s: float, replicas: int) -> float:
    """Mean wait when Poisson arrivals go to `replicas` exponential servers in turn: each replica is
    E_c/M/1 (Erlang(c, lambda) interarrivals), W_q = sigma / (mu (1 - sigma)), seconds."""
    sigma = gim1_sigma(rate_per_s, mu_per_s, replicas)
    return sigma / (mu_per_s * (1.0 - sigma))
