"""Shared glue of the batching scripts: profiles, laws and seeds from snakemake params/inputs."""

import json

import numpy as np

from llmqueue.analytic.batch_time import resolve_batch_profile
from llmqueue.tokens import parse_law


def load_profile(name, cfg, fit_path=None):
    fit = None
    if fit_path:
        with open(fit_path) as fh:
            fit = json.load(fh)
    return resolve_batch_profile(name, cfg, fit)


def law(spec, cap=None):
    if cap is not None and "cap=" not in spec:
        spec = f"{spec},cap={cap:g}"
    return parse_law(spec, ".")


def seed_for(root, *key):
    """SeedSequence per sweep point from its position (byte-identical reruns)."""
    return np.random.SeedSequence(int(root), spawn_key=tuple(int(k) for k in key))
