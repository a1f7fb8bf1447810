"""Claims 6-9 (figures.md) from the batching sweeps: results/claims/batching.csv."""

import math
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from batching_common import law, load_profile  # noqa: E402

from llmqueue.analytic import batch_chain as bc  # noqa: E402
from llmqueue.analytic import batch_time as bt  # noqa: E402
from llmqueue.analytic import inoue  # noqa: E402
from llmqueue.claims import Tolerance, claims_frame, judge  # noqa: E402
from llmqueue.errors import UnstableError  # noqa: E402
from llmqueue.io import write_csv  # noqa: E402
from llmqueue.sim.batching import Policy  # noqa: E402

sm = snakemake  # noqa: F821
P = sm.params
ref = pd.read_csv(sm.input.reference, dtype={"id": str}).set_index("id")
tols = {k: Tolerance.from_config(v) for k, v in P.tolerances.items()}
BAT, PROFS = P.cfg, P.profiles
rows = []
log = open(sm.log[0], "w")


def verdict_of(name):
    return PROFS[name].get("verdict", "independent")


def add(cid, ours, note, profile, miss="", claim_suffix=""):
    r = ref.loc[cid]
    tol = tols[r["tolerance"]]
    claim = f"{r['claim']} [profile {profile}]{claim_suffix}"
    bs = verdict_of(profile) == "back_solved"
    if bs:
        note = f"{note}; profile {profile} is back-solved (from claim 8a), so the row is back_solved whatever the numbers"
    rows.append(
        judge(
            cid,
            claim,
            float(r["paper"]),
            ours,
            str(r["unit"]),
            tol,
            note,
            back_solved=bs,
            miss_reason=miss,
        )
    )
    print(cid, ours, rows[-1].verdict, file=log)


# ---- claim 6: Fig. 3b shapes ----------------------------------------------------------------
f3 = pd.read_csv(sm.input.fig3b)
ids6 = {0: ("6a", "6b", "6c"), 1: ("6d", "6e", "6f")}
for pi, name in enumerate(BAT["fig3"]["profiles"][:2]):
    sub = f3[f3["profile"] == name]
    bmax = int(sub["b"].max())
    for cid, spec in zip(ids6[pi], BAT["fig3"]["fig3b_tokens"], strict=False):
        mu = sub[sub["tokens"] == spec].sort_values("b")["mu"].to_numpy()
        arg = int(np.argmax(mu)) + 1
        if cid in ("6c", "6f"):
            ours = float(1 < arg < bmax)
            note = f"argmax_b mu_b = {arg} on b = 1..{bmax}; max mu_b = {mu.max():.4g} req/s"
            miss = f"mu_b still rises at b = {bmax} (its peak lies beyond the b range)"
        else:
            ours = float(np.all(np.diff(mu) > 0))
            note = f"b = 1..{bmax}; mu_1 = {mu[0]:.4g}, mu_{bmax} = {mu[-1]:.4g} req/s"
            miss = f"mu_b is not increasing (max at b = {arg})"
        add(cid, ours, note, name, miss)

# ---- claim 7: Fig. 5 ------------------------------------------------------------------------
ids7 = {
    "llama": ("7a", "7b", "7c", "7j"),
    "alpaca": ("7d", "7e", "7f", "7k"),
    "chatglm": ("7g", "7h", "7i", "7l"),
}
for path in sm.input.fig5:
    df = pd.read_csv(path)
    panel = path.rsplit("_", 1)[-1].removesuffix(".csv")
    pname = BAT["fig5"]["panels"][panel]
    dyn = df[(df["policy"] == "dynamic") & ~df["unstable"].astype(bool)].sort_values("rate_per_s")
    ela = df[(df["policy"] == "elastic") & ~df["unstable"].astype(bool)].sort_values("rate_per_s")
    grid = (
        f"lambda = {dyn['rate_per_s'].min():.4g}..{dyn['rate_per_s'].max():.4g}/s ({len(dyn)} points, "
        f"{BAT['fig5']['rates']['start']}..{BAT['fig5']['rates']['stop']} of max mu_b over b <= {BAT['fig5']['b_range']})"
    )
    src = df["profile_source"].iloc[0]
    c_a, c_b, c_c, c_fit = ids7[panel]
    gap = float(np.max(np.abs(dyn["bound_response"] - dyn["sim_response"]) / dyn["sim_response"]))
    gap_exact = float(
        np.max(np.abs(dyn["bound_response"] - dyn["exact_response"]) / dyn["exact_response"])
    )
    add(
        c_a,
        gap,
        f"{panel} ({src}); alpha_b, tau0 from Eq. (20) with m2 = 1000: "
        f"({dyn['bound_alpha'].iloc[0]:.4g} s, {dyn['bound_tau0'].iloc[0]:.4g} s); {grid}; vs exact chain {gap_exact:.3g}",
        pname,
        "the bound sits above the simulation by more than 5%: Eq. (20) uses m2 where E[L_b] = m2 b/(b+1) (2x at b = 1)",
    )
    gapf = float(
        np.max(np.abs(dyn["bound_fit_response"] - dyn["sim_response"]) / dyn["sim_response"])
    )
    rows_fit_note = (
        f"{panel} ({src}); alpha_b, tau0 = least squares of E[T_b] over b = {BAT['fig5'].get('bound_fit_range')} "
        f"({dyn['bound_fit_alpha'].iloc[0]:.4g} s, {dyn['bound_fit_tau0'].iloc[0]:.4g} s); {grid}"
    )
    add(
        c_fit,
        gapf,
        rows_fit_note,
        pname,
        "the fitted-line bound misses the simulation by more than 5%",
        claim_suffix=" (reading: fitted alpha_b, tau0)",
    )
    m = dyn.merge(ela, on="rate_per_s", suffixes=("_d", "_e"))
    below = bool(
        np.all(m["exact_response_e"] < m["exact_response_d"])
        and np.all(m["sim_response_e"] < m["sim_response_d"])
    )
    add(
        c_b,
        float(below),
        f"{panel}; exact chain and simulation, mean response; {grid}",
        pname,
        "elastic is not below dynamic at every lambda",
    )
    gaps = (m["exact_response_d"] - m["exact_response_e"]).to_numpy()
    widen = bool(np.all(np.diff(gaps) > 0))
    add(
        c_c,
        float(widen),
        f"{panel}; exact chain gap dynamic - elastic from {gaps[0]:.3g} s to {gaps[-1]:.3g} s; {grid}",
        pname,
        "the gap does not grow monotonically",
    )

# ---- claim 8: Fig. 6a ------------------------------------------------------------------------
f6 = BAT["fig6"]
lam8 = float(f6["claim_rate"])
ids8 = {
    0: {
        "8a": "formula_wait",
        "8b": "sim_wait",
        "8c": "sim_response",
        "8e": "formula_response",
        "8f": "exact_wait",
        "8g": "exact_response",
    },
    1: {
        "8h": "formula_wait",
        "8i": "sim_wait",
        "8j": "sim_response",
        "8k": "formula_response",
        "8l": "exact_wait",
        "8m": "exact_response",
    },
}
for pi, path in enumerate(sm.input.kstar[:2]):
    ks = pd.read_csv(path)
    pname = ks["profile"].iloc[0]
    stable = ks[~ks["unstable"].astype(bool)]
    for cid, col in ids8[pi].items():
        krange = f"K = {int(ks['K'].min())}..{int(ks['K'].max())}, lambda = {lam8}"
        if stable.empty or stable[col].isna().all():
            add(
                cid,
                math.nan,
                f"{krange}: every K is unstable (lambda E[T_K] >= K)",
                pname,
                f"lambda = {lam8} exceeds K/E[T_K] for every K in the grid: no optimum exists",
            )
            continue
        s = stable.dropna(subset=[col])
        k = int(s.loc[s[col].idxmin(), "K"])
        note = f"{krange}; min {col} = {s[col].min():.4g} s"
        if col.startswith("sim"):
            ci = s.loc[s[col].idxmin(), col + "_ci95"]
            close = s[(s[col] - s[col].min()) <= ci + s[col + "_ci95"]]["K"].astype(int).tolist()
            note += f" (+-{ci:.2g}); K within the CIs of the minimum: {close}"
        add(cid, float(k), note, pname, f"K* = {k} on this grid")

# claim 8d: the Inoue bound at lambda = 0.43 under several readings
name0 = f6["profiles"][0]
prof0 = load_profile(name0, PROFS[name0], None)
lw = law(f6["tokens"], BAT.get("tail_cap_tokens"))
readings = []
for lo, hi in f6.get("inoue_fit_ranges", [[1, 64]]):
    a, t = bt.fit_alpha_tau(prof0, lw, int(lo), int(hi))
    try:
        readings.append((f"fit b={lo}..{hi}", a, t, inoue.bound(lam8, a, t)))
    except UnstableError:
        readings.append((f"fit b={lo}..{hi}", a, t, math.inf))
try:
    ex = bc.solve(bc.model_for(Policy("dynamic"), prof0, lw), lam8, Policy("dynamic"))
    exact_txt = f"exact chain (b_max = inf) {ex.response:.4g} s"
except UnstableError as err:
    exact_txt = f"exact chain (b_max = inf): {err}"
txt = "; ".join(
    f"{r[0]}: alpha_b = {r[1]:.4g} s, tau0 = {r[2]:.4g} s -> {r[3]:.4g} s" for r in readings
)
finite = [r for r in readings if math.isfinite(r[3])]
best = min(finite, key=lambda r: abs(r[3] - 125.0)) if finite else None
add(
    "8d",
    best[3] if best else math.nan,
    f"readings of Eq. (16) tried: {txt}; {exact_txt}; ours = the reading closest to 125 s",
    name0,
    "no reading of Eq. (16) gives about 125 s (equations.md: natural readings give 18-23 s)",
)

# the same readings under the second (independent) profile
if len(f6["profiles"]) > 1:
    name1 = f6["profiles"][1]
    prof1 = load_profile(name1, PROFS[name1], None)
    rd = []
    for lo, hi in f6.get("inoue_fit_ranges", [[1, 64]]):
        a, t = bt.fit_alpha_tau(prof1, lw, int(lo), int(hi))
        try:
            rd.append((f"fit b={lo}..{hi}", a, t, inoue.bound(lam8, a, t)))
        except UnstableError:
            rd.append((f"fit b={lo}..{hi}", a, t, math.inf))
    fin1 = [r for r in rd if math.isfinite(r[3])]
    txt1 = "; ".join(
        f"{r[0]}: alpha_b = {r[1]:.4g} s, tau0 = {r[2]:.4g} s -> "
        f"{'unstable (lambda alpha_b >= 1)' if math.isinf(r[3]) else f'{r[3]:.4g} s'}"
        for r in rd
    )
    b1 = min(fin1, key=lambda r: abs(r[3] - 125.0)) if fin1 else None
    add(
        "8n",
        b1[3] if b1 else math.nan,
        f"readings of Eq. (16) tried: {txt1}",
        name1,
        "no reading gives about 125 s"
        if b1
        else f"lambda = {lam8} is beyond the stability of Eq. (16) (lambda alpha_b >= 1) for every reading",
    )

# ---- claim 9: Fig. 6b ------------------------------------------------------------------------
ids9 = {0: ("9a", "9b", "9c"), 1: ("9d", "9e", "9f")}
for pi, path in enumerate(sm.input.fig6b[:2]):
    df = pd.read_csv(path)
    pname = df["profile"].iloc[0]
    lams = np.sort(df["rate_per_s"].unique())
    grid = f"lambda = {lams[0]:.4g}..{lams[-1]:.4g}/s ({len(lams)} points)"
    dyn = df[df["policy"] == "dynamic"]
    inf = dyn[dyn["bmax"].isna()].set_index("rate_per_s")
    fin = dyn[dyn["bmax"].notna()]
    lo = lams[0]
    q = inf.loc[lo, "exact_mean_batch"]
    diffs = []
    for bm, s in fin.groupby("bmax"):
        v = s.set_index("rate_per_s").loc[lo, "exact_response"]
        if bm >= q:
            diffs.append(
                (
                    int(bm),
                    float(abs(v - inf.loc[lo, "exact_response"]) / inf.loc[lo, "exact_response"]),
                )
            )
    ok = bool(diffs) and all(d < 0.01 for _, d in diffs)
    c9a, c9b, c9c = ids9[pi]
    add(
        c9a,
        float(ok),
        f"lambda = {lo:.4g}/s; mean batch at b_max = inf {q:.3g}; relative gaps of exact response "
        f"{[(b, round(d, 5)) for b, d in diffs]} (predicate: all < 1%)",
        pname,
        "a finite b_max differs by >= 1%",
    )
    fin_ok = fin[~fin["unstable"].astype(bool)]
    hi = float(fin_ok["rate_per_s"].max())  # the highest lambda where some finite b_max is stable
    best_fin = fin_ok[fin_ok["rate_per_s"] == hi]["exact_response"].min()
    best_bm = int(fin_ok.loc[fin_ok[fin_ok["rate_per_s"] == hi]["exact_response"].idxmin(), "bmax"])
    inf_hi = inf.loc[hi]
    inf_val = math.inf if bool(inf_hi["unstable"]) else float(inf_hi["exact_response"])
    first_bad = (
        inf[inf["unstable"].astype(bool)].index.min()
        if inf["unstable"].astype(bool).any()
        else None
    )
    add(
        c9b,
        float(best_fin < inf_val),
        f"highest lambda with a stable finite b_max: {hi:.4g}/s; there b_max = {best_bm} "
        f"gives {best_fin:.4g} s (exact response) vs b_max = inf {'unstable' if math.isinf(inf_val) else f'{inf_val:.4g} s'}; "
        f"b_max = inf unstable (escape probability > escape_tol per batch) from lambda = "
        f"{'none' if first_bad is None else f'{first_bad:.4g}'}/s; {grid}",
        pname,
        "b_max = inf is no worse at the highest lambda",
    )
    ela = df[df["policy"] == "elastic"].set_index("rate_per_s")
    both = [
        x for x in lams if not bool(inf.loc[x, "unstable"]) and not bool(ela.loc[x, "unstable"])
    ]
    better = all(ela.loc[x, "exact_response"] < inf.loc[x, "exact_response"] for x in both)
    add(
        c9c,
        float(better and len(both) > 0),
        f"mean response, exact chain, at the {len(both)} lambdas where dynamic "
        f"(b_max = inf) is stable; elastic stays stable at all {len(lams)}; {grid}",
        pname,
        "elastic is not below dynamic everywhere",
    )

write_csv(claims_frame(rows), sm.output[0])
log.close()
