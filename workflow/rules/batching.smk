# Batching study (issue 4; paper Sec. IV, V-C): Fig. 3a, 3b, 5, 6a, 6b and claims 6-9.
# Sweeps: exact embedded Markov chain, closed forms (Eq. 16, 25) and the Numba simulation per
# (policy, lambda); lambda grids are fractions of each profile's best mu_b (config batching.*.rates).
BAT = config["batching"]
BPROF = config.get("batch_profiles", {})
BAT_CODE = lib(
    "tokens.py",
    "latency.py",
    "analytic/batch_time.py",
    "analytic/batch_chain.py",
    "analytic/bulk.py",
    "analytic/inoue.py",
    "sim/batching.py",
    "sim/stats.py",
)
BAT_SCRIPTS = ["workflow/scripts/batching_common.py"]
FIG5_PANELS = list(BAT["fig5"]["panels"])
FIG6_PROFILES = list(BAT["fig6"]["profiles"])


def bprof_fit(name):
    """The fit.json a batch profile of kind 'fit' is read from (none for a fixed profile)."""
    p = BPROF[name]
    if p.get("kind", "fixed") == "fit":
        return [f"results/profiling/{p['source']}/{p['model']}/fit.json"]
    return []


def _sweep_params(figure, fig_index, section):
    return dict(
        figure=figure,
        fig_index=fig_index,
        cfg=section,
        sim=BAT["simulation"],
        chain=BAT["chain"],
        seed=config["seed"],
        tail_cap=BAT.get("tail_cap_tokens"),
    )


wildcard_constraints:
    panel="|".join(FIG5_PANELS),
    bprofile="|".join(FIG6_PROFILES),


rule batching_fig3_data:
    input:
        fits=[f for n in BAT["fig3"]["profiles"] for f in bprof_fit(n)],
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        fig3a="results/batching/fig3a_EL_Hb.csv",
        fig3b="results/batching/fig3b_miub.csv",
    params:
        cfg=BAT["fig3"],
        profiles={n: BPROF[n] for n in BAT["fig3"]["profiles"]},
        seed=config["seed"],
    log:
        "logs/batching/fig3_data.log",
    benchmark:
        "logs/benchmarks/batching_fig3_data.tsv"
    script:
        "../scripts/batching_fig3.py"


rule batching_fig5_sweep:
    input:
        fit=lambda w: bprof_fit(BAT["fig5"]["panels"][w.panel]),
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        sweep="results/batching/fig5_{panel}.csv",
    params:
        name=lambda w: w.panel,
        profile=lambda w: BAT["fig5"]["panels"][w.panel],
        profile_cfg=lambda w: BPROF[BAT["fig5"]["panels"][w.panel]],
        **_sweep_params("fig5", 5, BAT["fig5"]),
    log:
        "logs/batching/fig5_{panel}.log",
    benchmark:
        "logs/benchmarks/batching_fig5_sweep_{panel}.tsv"
    script:
        "../scripts/batching_sweep.py"


rule batching_fig6a_sweep:
    input:
        fit=lambda w: bprof_fit(w.bprofile),
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        sweep="results/batching/fig6a_{bprofile}.csv",
        kstar="results/batching/fig6a_kstar_{bprofile}.csv",
    params:
        name=lambda w: w.bprofile,
        profile=lambda w: w.bprofile,
        profile_cfg=lambda w: BPROF[w.bprofile],
        **_sweep_params("fig6a", 61, BAT["fig6"]),
    log:
        "logs/batching/fig6a_{bprofile}.log",
    benchmark:
        "logs/benchmarks/batching_fig6a_sweep_{bprofile}.tsv"
    script:
        "../scripts/batching_sweep.py"


rule batching_fig6b_sweep:
    input:
        fit=lambda w: bprof_fit(w.bprofile),
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        sweep="results/batching/fig6b_{bprofile}.csv",
    params:
        name=lambda w: w.bprofile,
        profile=lambda w: w.bprofile,
        profile_cfg=lambda w: BPROF[w.bprofile],
        **_sweep_params("fig6b", 62, BAT["fig6"]),
    log:
        "logs/batching/fig6b_{bprofile}.log",
    benchmark:
        "logs/benchmarks/batching_fig6b_sweep_{bprofile}.tsv"
    script:
        "../scripts/batching_sweep.py"


rule batching_fig3a:
    input:
        data="results/batching/fig3a_EL_Hb.csv",
        code=lib("plots/fig3a_EL_Hb.py", "plots/style.py"),
    output:
        pdf="figures/fig3a_EL_Hb.pdf",
        png=report("figures/fig3a_EL_Hb.png", caption="../report/fig3a_EL_Hb.rst", category="Batching"),
    params:
        module="fig3a_EL_Hb",
        profiles=BAT["fig3"]["profiles"],
        verdicts={n: BPROF[n].get("verdict", "independent") for n in BAT["fig3"]["profiles"]},
    log:
        "logs/batching/plot_fig3a.log",
    benchmark:
        "logs/benchmarks/batching_fig3a.tsv"
    script:
        "../scripts/plot_figure.py"


rule batching_fig3b:
    input:
        data="results/batching/fig3b_miub.csv",
        code=lib("plots/fig3b_miub.py", "plots/style.py"),
    output:
        pdf="figures/fig3b_miub.pdf",
        png=report("figures/fig3b_miub.png", caption="../report/fig3b_miub.rst", category="Batching"),
    params:
        module="fig3b_miub",
    log:
        "logs/batching/plot_fig3b.log",
    benchmark:
        "logs/benchmarks/batching_fig3b.tsv"
    script:
        "../scripts/plot_figure.py"


rule batching_fig5:
    input:
        data="results/batching/fig5_{panel}.csv",
        code=lib("plots/fig5_junyun.py", "plots/style.py"),
    output:
        pdf="figures/fig5_junyun_{panel}.pdf",
        png=report("figures/fig5_junyun_{panel}.png", caption="../report/fig5_junyun_{panel}.rst", category="Batching"),
    params:
        module="fig5_junyun",
        panel=lambda w: w.panel,
    log:
        "logs/batching/plot_fig5_{panel}.log",
    benchmark:
        "logs/benchmarks/batching_fig5_{panel}.tsv"
    script:
        "../scripts/plot_figure.py"


rule batching_fig6a:
    input:
        unpack(lambda w: {p: f"results/batching/fig6a_{p}.csv" for p in FIG6_PROFILES}),
        code=lib("plots/fig6a_fix_bsz.py", "plots/style.py"),
    output:
        pdf="figures/fig6a_fix_bsz.pdf",
        png=report("figures/fig6a_fix_bsz.png", caption="../report/fig6a_fix_bsz.rst", category="Batching"),
    params:
        module="fig6a_fix_bsz",
        profiles=FIG6_PROFILES,
    log:
        "logs/batching/plot_fig6a.log",
    benchmark:
        "logs/benchmarks/batching_fig6a.tsv"
    script:
        "../scripts/plot_figure.py"


rule batching_fig6b:
    input:
        unpack(lambda w: {p: f"results/batching/fig6b_{p}.csv" for p in FIG6_PROFILES}),
        code=lib("plots/fig6b_dy_bmax.py", "plots/style.py"),
    output:
        pdf="figures/fig6b_dy_bmax.pdf",
        png=report("figures/fig6b_dy_bmax.png", caption="../report/fig6b_dy_bmax.rst", category="Batching"),
    params:
        module="fig6b_dy_bmax",
        profiles=FIG6_PROFILES,
    log:
        "logs/batching/plot_fig6b.log",
    benchmark:
        "logs/benchmarks/batching_fig6b.tsv"
    script:
        "../scripts/plot_figure.py"


rule batching_claims:
    input:
        reference="data/reference/claims_batching.csv",
        fig3b="results/batching/fig3b_miub.csv",
        fig5=expand("results/batching/fig5_{panel}.csv", panel=FIG5_PANELS),
        fig6a=expand("results/batching/fig6a_{bprofile}.csv", bprofile=FIG6_PROFILES),
        kstar=expand("results/batching/fig6a_kstar_{bprofile}.csv", bprofile=FIG6_PROFILES),
        fig6b=expand("results/batching/fig6b_{bprofile}.csv", bprofile=FIG6_PROFILES),
        fits=[f for n in set(FIG6_PROFILES) for f in bprof_fit(n)],
        code=BAT_CODE + lib("claims.py") + BAT_SCRIPTS,
    output:
        "results/claims/batching.csv",
    params:
        cfg=BAT,
        profiles=BPROF,
        tolerances=config["claims"]["tolerances"],
    log:
        "logs/batching/claims.log",
    benchmark:
        "logs/benchmarks/batching_claims.tsv"
    script:
        "../scripts/batching_claims.py"


STUDY_TARGETS["batching"] = [
    *figure("fig3a_EL_Hb"),
    *figure("fig3b_miub"),
    *[f for p in FIG5_PANELS for f in figure(f"fig5_junyun_{p}")],
    *figure("fig6a_fix_bsz"),
    *figure("fig6b_dy_bmax"),
]
CLAIM_TABLES.append("results/claims/batching.csv")
