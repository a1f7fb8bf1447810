"""Serving study (issue 13): mean and p99 job completion time (arrival -> last token) against the
arrival rate for every batch former (none, dynamic, elastic, continuous batching with the KV
reserved at admission or grown on demand), all priced by one GPU step law; each curve ends at
its policy's highest sustainable rate (dotted), beyond which the queue has no steady state."""

from __future__ import annotations

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from llmqueue import figstyle as style

PLAIN = FuncFormatter(lambda v, _: f"{v:g}")

LABELS = {
    "none": "no batching",
    "dynamic": "dynamic",
    "elastic": "elastic",
    "continuous_reserve": "continuous, KV reserved",
    "continuous_on_demand": "continuous, KV on demand",
}


def plot(inputs: dict, params: dict):
    policies = params["policies"]
    fig, axes = style.new_figure((7.2, 3.0), ncols=2)
    for i, name in enumerate(policies):
        df = inputs[name].sort_values("rate_per_s")
        ok = df[~df["unstable"].astype(bool)]
        label = LABELS.get(name, name)
        ls = "--" if name.endswith("on_demand") else "-"
        cap = float((df["rate_per_s"] / df["load"]).iloc[0])
        for ax, col, ci in ((axes[0], "jct_mean_s", "jct_ci95_s"), (axes[1], "jct_p99_s", None)):
            x, y = ok["rate_per_s"].to_numpy(), ok[col].to_numpy()
            ax.plot(x, y, ls, marker="o", color=style.color(i), mfc="none", ms=2.5, label=label)
            if ci is not None:
                c = ok[ci].to_numpy()
                ax.fill_between(x, y - c, y + c, color=style.color(i), alpha=0.25, lw=0)
            ax.axvline(cap, color=style.color(i), ls=":", lw=0.8)
    for ax, what in zip(axes, ("mean JCT (s, 95% CI band)", "p99 JCT (s)"), strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(PLAIN)
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("arrival rate (requests/s)")
        ax.set_ylabel(what)
    axes[0].set_title("mean job completion time")
    axes[1].set_title("99th percentile")
    axes[0].legend(loc="upper left", fontsize=6)
    first = inputs[policies[0]]
    specs = "; ".join(f"{LABELS.get(n, n)}: {inputs[n]['spec'].iloc[0]}" for n in policies)
    style.source_note(
        fig,
        f"LLaMA-2-7B, step law {params['step_profile']} ({first['verdict'].iloc[0]}); static "
        f"batches: {params['static_law']} (Eq. 18); Azure conv trace rows, Poisson arrivals; "
        f"{int(first['sim_requests'].iloc[0])} requests per point; dotted: highest sustainable "
        f"rate of each policy. Policies: {specs}",
    )
    return fig
