"""A serving policy's text form, ``KIND[:key=value,...]``: read by :func:`parse_policy` into a
:class:`llmqueue.policy.Policy` (whose docstring says what each key means) and written back by
:func:`policy_spec`.

Spec strings of the config and the command line, e.g. ``dynamic:bmax=16``,
``fixed:K=8``, ``continuous:max_batch=64,kv_tokens=200000,admission=on_demand``,
``continuous:max_batch=32,max_batched_tokens=4200,chunked_prefill=false``,
``continuous:max_batch=64,kv_tokens=4096,block_size=32,admission=per_chunk,kv_margin=0.15,max_batched_tokens=256``,
``rebatch:bmax=2,batch_timeout_s=10``, with the common keys ``order=sjf``, ``guard_s=100``,
``guard_factor=10``, ``servers=8``, ``replicas=8``, ``router=jsq``, ``d=2``.
"""

from __future__ import annotations

from llmqueue.errors import InputError
from llmqueue.policy import DEFAULT_ORDER, KV_ACCOUNTINGS, Policy, batch_former

__all__ = ["parse_policy", "policy_spec"]


_INT_KEYS = {
    "bmax": "bmax",
    "max_batch": "bmax",
    "K": "K",
    "B": "K",
    "batch": "K",
    "bins": "bins",
    "servers": "servers",
    "replicas": "replicas",
    "d": "router_d",
    "router_d": "router_d",
    "kv_tokens": "kv_tokens",
    "max_batched_tokens": "max_batched_tokens",
    "block_size": "block_size",
}


def parse_policy(spec: str) -> Policy:
    """Parse ``KIND[:key=value,...]`` (the module docstring); InputError names the bad part."""
    kind, _, body = spec.strip().partition(":")
    kw: dict[str, object] = {}
    for item in filter(None, (s.strip() for s in body.split(","))):
        key, eq, val = item.partition("=")
        key, val = key.strip(), val.strip()
        if not eq:
            raise InputError(f"policy {spec!r}: expected key=value, got {item!r}")
        if key in _INT_KEYS:
            if val.lower() in ("inf", "none") and key in ("bmax", "max_batch", "kv_tokens"):
                kw[_INT_KEYS[key]] = None
                continue
            try:
                kw[_INT_KEYS[key]] = int(val)
            except ValueError:
                raise InputError(f"policy {spec!r}: {key}={val!r} is not an integer") from None
        elif key in (
            "guard_s", "flush_s", "batch_timeout_s", "guard_factor", "kv_margin", "preempt_limit",
        ):  # fmt: skip
            try:
                kw[key] = None if val.lower() == "none" else float(val)
            except ValueError:
                raise InputError(f"policy {spec!r}: {key}={val!r} is not a number") from None
        elif key == "bin_edges":
            try:
                kw[key] = tuple(float(x) for x in val.split("/"))
            except ValueError:
                raise InputError(f"policy {spec!r}: bin_edges={val!r}: E1/E2/... tokens") from None
        elif key in ("order", "admission", "router", "kv_accounting"):
            kw[key] = val
        elif key in ("chunked_prefill", "batch_queue", "prefix_caching"):
            if val.lower() not in ("true", "false", "1", "0"):
                raise InputError(f"policy {spec!r}: {key}={val!r}: true or false")
            kw[key] = val.lower() in ("true", "1")
        else:
            raise InputError(
                f"policy {spec!r}: unknown key {key!r}; keys: max_batch (bmax), K, order, guard_s, "
                "guard_factor, servers, replicas, router, d, kv_tokens, admission, max_batched_tokens, block_size, "
                "chunked_prefill, batch_queue, kv_margin, prefix_caching, bins, "
                "bin_edges, flush_s, batch_timeout_s, preempt_limit, kv_accounting"
            )
    return Policy(kind, **kw)  # type: ignore[arg-type]


def policy_spec(p: Policy) -> str:
    """A policy back as a spec string that :func:`parse_policy` reads back to the same policy
    (``continuous:max_batch=256,admission=on_demand``)."""
    parts = []
    size = batch_former(p.kind).size
    if size == "bmax" and p.bmax is not None:
        parts.append(f"{'max_batch' if p.kind == 'continuous' else 'bmax'}={p.bmax}")
    if size == "K":
        parts.append(f"K={p.K}")
    if p.kind == "multibin":
        parts.append(f"bins={p.bins}")
    if p.kind == "continuous":
        if p.kv_tokens is not None:
            parts.append(f"kv_tokens={p.kv_tokens}")
        parts.append(f"admission={p.admission}")
        if p.max_batched_tokens is not None:
            parts.append(f"max_batched_tokens={p.max_batched_tokens}")
        if p.block_size != 1:
            parts.append(f"block_size={p.block_size}")
        if not p.chunked_prefill:
            parts.append("chunked_prefill=false")
        if p.batch_queue:
            parts.append("batch_queue=true")
        if p.kv_margin:
            parts.append(f"kv_margin={p.kv_margin:g}")
        if p.kv_accounting != KV_ACCOUNTINGS[0]:
            parts.append(f"kv_accounting={p.kv_accounting}")
        if p.prefix_caching:
            parts.append("prefix_caching=true")
    if p.order != DEFAULT_ORDER:
        parts.append(f"order={p.order}")
    if p.batch_timeout_s is not None:
        parts.append(f"batch_timeout_s={p.batch_timeout_s:g}")
    if p.guard_s is not None:
        parts.append(f"guard_s={p.guard_s:g}")
    if p.guard_factor is not None:
        parts.append(f"guard_factor={p.guard_factor:g}")
    if p.preempt_limit is not None:
        parts.append(f"preempt_limit={p.preempt_limit:g}")
    if p.routed:
        parts.append(f"replicas={p.replicas}")
        parts.append(f"router={p.router}")
        if p.router == "power_of_d":
            parts.append(f"d={p.router_d}")
    elif p.servers != 1:
        parts.append(f"servers={p.servers}")
    return p.kind + (":" + ",".join(parts) if parts else "")
