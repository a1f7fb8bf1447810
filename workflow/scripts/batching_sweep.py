"""One sweep over lambda for Fig. 5 (a model panel), Fig. 6a or Fig. 6b (a profile): exact chain,
closed forms and simulation per (policy, lambda). Params: figure, name, cfg, profile_cfg, sim,
chain, seed, fig_index."""

import math
import sys
import time

import pandas as pd

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from batching_common import law, load_profile, seed_for  # noqa: E402

from llmqueue.analytic import batch_chain as bc  # noqa: E402
from llmqueue.analytic import batch_time as bt  # noqa: E402
from llmqueue.io import write_csv  # noqa: E402
from llmqueue.sim.batching import Policy  # noqa: E402

sm = snakemake  # noqa: F821
P = sm.params
fit_path = sm.input.get("fit") if hasattr(sm.input, "get") else None
if isinstance(fit_path, list):
    fit_path = fit_path[0] if fit_path else None
cfg, sim, chain = P.cfg, dict(P.sim), P.chain
profile = load_profile(P.profile, P.profile_cfg, fit_path)
cap = P.tail_cap if P.figure != "fig5" else None
lw = law(cfg["tokens"], cap)
r = cfg["rates"]
rates, mu_best, b_best = bt.rate_grid(
    profile, lw, int(cfg["b_range"]), r["start"], r["stop"], r["step"]
)
h = float(chain.get("grid_h", 0.04))
kw = dict(tol=float(chain.get("tol", 1e-12)), escape_tol=float(chain.get("escape_tol", 1e-9)))

curves = []  # (label, policy, inoue (alpha, tau0) or None, fixed_time)
if P.figure == "fig5":
    lo, hi = cfg.get("bound_fit_range", [1, cfg["b_range"]])
    m2 = lw.support[1]
    eq20 = (
        bt.uniform_linear_bound(profile, m2)
        if lw.spec.startswith("uniform") and lw.support[0] == 0
        else None
    )
    fit_d = bt.fit_alpha_tau(profile, lw, lo, hi)
    fit_e = bt.fit_alpha_tau(profile, lw, lo, hi, elastic=True)
    curves = [
        ("dynamic", Policy("dynamic"), eq20, False),
        ("elastic", Policy("elastic"), None, False),
    ]
    extra_bounds = {"dynamic": fit_d, "elastic": fit_e}
elif P.figure == "fig6a":
    for K in cfg["fixed_K"]:
        curves.append((f"fixed K={K}", Policy("fixed", K=int(K)), None, False))
        curves.append((f"fixed K={K} fixed-T", Policy("fixed", K=int(K)), None, True))
    extra_bounds = {}
else:
    for bm in cfg["bmax"]:
        curves.append(
            (
                f"dynamic b_max={'inf' if bm is None else bm}",
                Policy("dynamic", bmax=bm),
                None,
                False,
            )
        )
    curves.append(("elastic", Policy("elastic"), None, False))
    extra_bounds = {}

rows = []
t0 = time.time()
with open(sm.log[0], "w") as log:
    print(
        f"{P.figure} {P.name}: profile {profile}, law {lw.spec}, best mu_b {mu_best:.4g}/s at b={b_best}",
        file=log,
    )
    for ci, (label, pol, eq20p, fixed_t) in enumerate(curves):
        model = (
            bc.FixedTimeModel(lambda b: bt.mean_batch_time(profile, lw, b))
            if fixed_t
            else bc.model_for(pol, profile, lw, h=h)
        )
        for ri, lam in enumerate(rates):
            s = dict(sim, fixed_time=fixed_t)
            row = bc.evaluate_point(
                pol,
                profile,
                lw,
                float(lam),
                model=model,
                inoue_params=eq20p,
                sim=s,
                seed=seed_for(P.seed, P.fig_index, ci, ri),
                **kw,
            )
            row.update(
                {
                    "curve": label,
                    "mode": "fixed_T" if fixed_t else "random_T",
                    "rate_fraction": float(lam / mu_best),
                    "best_mu": mu_best,
                    "best_b": b_best,
                    "profile": P.profile,
                    "profile_source": profile.source,
                    "verdict": profile.verdict,
                    "tokens": lw.spec,
                    "sim_requests": int(sim["requests"]),
                }
            )
            if pol.kind in extra_bounds:
                a, t = extra_bounds[pol.kind]
                row["bound_fit_alpha"], row["bound_fit_tau0"] = a, t
                try:
                    from llmqueue.analytic import inoue

                    row["bound_fit_response"] = inoue.bound(float(lam), a, t)
                except Exception:
                    row["bound_fit_response"] = math.nan
            if eq20p is not None:
                row["bound_alpha"], row["bound_tau0"] = eq20p
            rows.append(row)
            print(
                f"{label} lam={lam:.4g} {time.time() - t0:.1f}s unstable={row['unstable']} "
                f"exact={row['exact_response']:.4g} sim={row['sim_response']:.4g}+-{row['sim_response_ci95']:.2g}",
                file=log,
                flush=True,
            )
    write_csv(pd.DataFrame(rows), sm.output.sweep)
    if P.figure == "fig6a":
        # K* at the claim rate: Eq. (25) (fixed T), exact chain and simulation (random T)
        lam = float(cfg["claim_rate"])
        lo, hi = cfg["claim_K"]
        krows = []
        for K in range(int(lo), int(hi) + 1):
            pol = Policy("fixed", K=K)
            T = bt.mean_batch_time(profile, lw, K)
            row = bc.evaluate_point(
                pol,
                profile,
                lw,
                lam,
                model=bc.model_for(pol, profile, lw, h=h),
                sim=dict(sim, requests=int(cfg.get("claim_requests", sim["requests"]))),
                seed=seed_for(P.seed, P.fig_index, 99, K),
                **kw,
            )
            row.update({"T_K": T, "profile": P.profile, "verdict": profile.verdict})
            krows.append(row)
        write_csv(pd.DataFrame(krows), sm.output.kstar)
        print(f"kstar done {time.time() - t0:.1f}s", file=log)
