"""Multi-Bin Batching: the highest sustainable throughput against the number of bins k.

(a) their synthetic setting (B = 128, U(1, 20), batch time = longest length): Theorem 4.2 (line)
and the simulated highest throughput (markers, 95% CI), with the limit B/m; (b) their simulated
LLM (0.0366 s/token, B = 8, 8 servers) with our length law: the exact rate (lines) and the
simulated one (markers) with bins by the true length and under neighbour-bin errors p_e, and (if
given) with bins from a learned length model on held-out trace rows, labelled with its bin
accuracy; (c) the gain over k = 1, ours beside the paper's six published rates (GSM8K lengths).
"""

from __future__ import annotations

import numpy as np

from llmqueue import figstyle as style


def _paper_rates(ref) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]  # noqa: ANN001
    """(k, rate) of the six published rates (reference rows 11a-11f)."""
    from llmqueue.studies.multibin.spec import CLAIM_RATE_IDS

    by_id = dict(zip(ref["id"].astype(str), ref["paper"].astype(float), strict=True))
    ks = [k for k, cid in CLAIM_RATE_IDS.items() if cid in by_id]
    return np.array(ks, float), np.array([by_id[CLAIM_RATE_IDS[k]] for k in ks])


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    syn, llm, ref = inputs["synthetic"], inputs["llm"], inputs["reference"]
    fig, (a, b, c) = style.new_figure((7.2, 2.9), ncols=3)
    # (a) synthetic
    style.formula_line(a, syn["bins"], syn["theorem_rate"], "Theorem 4.2", i=0)
    style.sim_points(a, syn["bins"], syn["sim_rate"], syn["sim_rate_ci95"], "simulation", i=0)
    a.axhline(syn["limit_rate"].iloc[0], color="0.4", ls=":", lw=1.0, label="limit B/m (k → ∞)")
    a.set_xticks(syn["bins"])
    a.set_xlabel("bins k")
    a.set_ylabel("highest throughput (requests / time unit)")
    a.set_title(f"(a) synthetic: B = {int(syn['batch'].iloc[0])}\n{syn['tokens'].iloc[0]}")
    a.legend(loc="lower right")
    # (b) simulated LLM, absolute, with prediction errors
    for i, pe in enumerate(sorted(llm["pe"].unique())):
        s = llm[llm["pe"] == pe].sort_values("bins")
        lab = "true bins" if pe == 0 else f"p_e = {pe:g}"
        style.formula_line(b, s["bins"], s["exact_rate_per_s"], lab, i=i)
        style.sim_points(b, s["bins"], s["sim_rate_per_s"], s["sim_rate_ci95_per_s"], "_sim", i=i)
    learned = inputs.get("learned")
    if learned is not None:  # bins from a real predictor, on the held-out rows
        for by, ls in zip(dict.fromkeys(learned["bins_by"]), (":", "--"), strict=False):
            s = learned[learned["bins_by"] == by].sort_values("bins")
            lab = f"{by}, held-out rows" if by == "true length" else f"{by} (held-out rows)"
            b.errorbar(
                s["bins"], s["sim_rate_per_s"], yerr=s["sim_rate_ci95_per_s"], fmt="s" + ls, color="k",
                mfc="none", ms=3, lw=1.0, capsize=1.5, label=lab,
            )  # fmt: skip
            if by != "true length":
                for _, r in s[s["bins"].isin([2, 4, 8])].iterrows():
                    b.annotate(
                        f"{100 * r['bin_accuracy']:.0f}%", (r["bins"], r["sim_rate_per_s"]),
                        textcoords="offset points", xytext=(0, -9), ha="center", fontsize=5,
                    )  # fmt: skip
    b.plot([], [], "ko", mfc="none", label="markers: simulation (95% CI)")
    b.set_xscale("log", base=2)
    b.set_xlabel("bins k")
    b.set_ylabel("highest sustainable rate (requests/s)")
    srv, bat = int(llm["servers"].iloc[0]), int(llm["batch"].iloc[0])
    b.set_title(f"(b) simulated LLM: B = {bat}, {srv} servers\nbins by true length or with errors")
    lo, hi = b.get_ylim()
    b.set_ylim(lo, hi + 0.45 * (hi - lo))  # headroom for the legend
    b.legend(loc="upper left", fontsize=5.5, ncol=2)
    # (c) gain over k = 1: ours and the paper's
    s = llm[llm["pe"] == 0].sort_values("bins")
    k1 = s["bins"].iloc[0]
    style.formula_line(c, s["bins"], 100 * s["exact_gain"], "ours, exact (Azure conv lengths)", i=0)
    rel = s["sim_rate_ci95_per_s"] / s["sim_rate_per_s"]
    ci = 100 * (1 + s["sim_gain"]) * np.hypot(rel, rel.iloc[0])
    style.sim_points(c, s["bins"], 100 * s["sim_gain"], ci, "ours, simulation", i=0)
    if learned is not None:
        for by, ls in zip(dict.fromkeys(learned["bins_by"]), (":", "--"), strict=False):
            s2 = learned[learned["bins_by"] == by].sort_values("bins")
            c.plot(s2["bins"], 100 * s2["sim_gain"], "s" + ls, color="k", mfc="none", ms=3,
                   lw=1.0, label=f"{by} (held-out rows)")  # fmt: skip
    pk, pr = _paper_rates(ref)
    if pk.size and pk[0] == k1:
        c.plot(
            pk, 100 * (pr / pr[0] - 1), "-.x", color="0.5", lw=1.0, label="paper (GSM8K lengths)"
        )
    c.set_xscale("log", base=2)
    c.set_xlabel("bins k")
    c.set_ylabel(f"gain over k = {int(k1)} (%)")
    c.set_title("(c) gain from more bins\nours (Azure conv lengths) and the paper's")
    c.legend(loc="upper left", fontsize=5.5)
    for ax in (b, c):
        ax.set_xticks(s["bins"])
        ax.set_xticklabels([str(int(k)) for k in s["bins"]])
    style.source_note(
        fig,
        f"{int(syn['replications'].iloc[0])} saturated queues of {int(syn['sim_requests'].iloc[0])} "
        f"requests per synthetic point, {int(llm['replications'].iloc[0])} of "
        f"{int(llm['sim_requests'].iloc[0])} per LLM point; LLM lengths "
        f"{llm['tokens'].iloc[0].split(':')[-1]} of the Azure conv trace "
        f"(mean {llm['mean_tokens'].iloc[0]:.0f} tokens), not the paper's GSM8K answers; "
        "p_e: a request lands in each neighbouring bin with probability p_e"
        + (
            "; black: bins by the SSJF study's learned model on its held-out 30% of the trace "
            "(labels: bin accuracy)"
            if learned is not None
            else ""
        ),
    )
    return fig
