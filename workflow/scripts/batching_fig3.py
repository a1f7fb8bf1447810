"""Fig. 3a (E[L_b], E[T_b] for the truncated Gaussian) and Fig. 3b (mu_b for three laws)."""

import math
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from batching_common import law, load_profile, seed_for  # noqa: E402

from llmqueue.analytic import batch_time as bt  # noqa: E402
from llmqueue.io import write_csv  # noqa: E402

sm = snakemake  # noqa: F821
with open(sm.log[0], "w") as log:
    cfg = sm.params.cfg
    profiles = {n: load_profile(n, sm.params.profiles[n]) for n in cfg["profiles"]}
    bs = np.arange(1, int(cfg["b_max"]) + 1)
    la = law(cfg["fig3a_tokens"])
    rows = []
    for b in bs:
        rng = np.random.default_rng(seed_for(sm.params.seed, 3, int(b)))
        x = la.sample(rng, int(cfg["mc_samples"]) * int(b)).reshape(-1, int(b)).max(axis=1)
        row = {
            "b": int(b),
            "tokens": la.spec,
            "EL": bt.expected_max(la, int(b)),
            "EL_mc": x.mean(),
            "EL_mc_ci95": 1.96 * x.std(ddof=1) / math.sqrt(x.size),
        }
        for n, p in profiles.items():  # Eq. (18) and (26) in expectation
            row[f"ET_{n}"] = float(p.t1(b) + p.t2(b) * row["EL"])
            row[f"ET_elastic_{n}"] = float(p.t1(b) + p.k4 * row["EL"] + p.k3 * b * la.mean())
        rows.append(row)
    write_csv(pd.DataFrame(rows), sm.output.fig3a)
    rows = []
    el = {spec: [bt.expected_max(law(spec), int(b)) for b in bs] for spec in cfg["fig3b_tokens"]}
    for n, p in profiles.items():
        for spec in cfg["fig3b_tokens"]:
            for b, eb in zip(bs, el[spec], strict=True):
                et = float(p.t1(b) + p.t2(b) * eb)  # Eq. (18)
                rows.append(
                    {
                        "profile": n,
                        "verdict": p.verdict,
                        "tokens": spec,
                        "b": int(b),
                        "ET": et,
                        "mu": b / et,
                    }
                )
    write_csv(pd.DataFrame(rows), sm.output.fig3b)
    print("fig3 done", file=log)
