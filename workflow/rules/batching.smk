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


rule batching_fig3_data:
    input:
        fits=[f for n in BAT["fig3"]["profiles"] for f in bprof_fit(n)],
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        fig3a="results/batching/fig3a_EL_Hb.csv",
        fig3b="results/batching/fig3b_miub.csv",
    log:
        "logs/batching/fig3_data.log",
    benchmark:
        "logs/benchmarks/batching_fig3_data.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        cfg=BAT["fig3"],
        profiles={n: BPROF[n] for n in BAT["fig3"]["profiles"]},
        seed=config["seed"],
    script:
        "../scripts/batching_fig3.py"


rule batching_fig5_sweep:
    input:
        fit=lambda w: bprof_fit(BAT["fig5"]["panels"][w.panel]),
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        sweep="results/batching/fig5_{panel}.csv",
    log:
        "logs/batching/fig5_{panel}.log",
    benchmark:
        "logs/benchmarks/batching_fig5_sweep_{panel}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        **_sweep_params("fig5", 5, BAT["fig5"]),
        name=lambda w: w.panel,
        profile=lambda w: BAT["fig5"]["panels"][w.panel],
        profile_cfg=lambda w: BPROF[BAT["fig5"]["panels"][w.panel]],
    script:
        "../scripts/batching_sweep.py"


rule batching_fig6a_sweep:
    input:
        fit=lambda w: bprof_fit(w.bprofile),
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        sweep="results/batching/fig6a_{bprofile}.csv",
        kstar="results/batching/fig6a_kstar_{bprofile}.csv",
    log:
        "logs/batching/fig6a_{bprofile}.log",
    benchmark:
        "logs/benchmarks/batching_fig6a_sweep_{bprofile}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        **_sweep_params("fig6a", 61, BAT["fig6"]),
        name=lambda w: w.bprofile,
        profile=lambda w: w.bprofile,
        profile_cfg=lambda w: BPROF[w.bprofile],
    script:
        "../scripts/batching_sweep.py"


rule batching_fig6b_sweep:
    input:
        fit=lambda w: bprof_fit(w.bprofile),
        code=BAT_CODE + BAT_SCRIPTS,
    output:
        sweep="results/batching/fig6b_{bprofile}.csv",
    log:
        "logs/batching/fig6b_{bprofile}.log",
    benchmark:
        "logs/benchmarks/batching_fig6b_sweep_{bprofile}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        **_sweep_params("fig6b", 62, BAT["fig6"]),
        name=lambda w: w.bprofile,
        profile=lambda w: w.bprofile,
        profile_cfg=lambda w: BPROF[w.bprofile],
    script:
        "../scripts/batching_sweep.py"


rule batching_fig3a:
    input:
        data="results/batching/fig3a_EL_Hb.csv",
        code=lib("plots/fig3a_EL_Hb.py", "plots/style.py"),
    output:
        pdf="figures/fig3a_EL_Hb.pdf",
        png=report(
            "figures/fig3a_EL_Hb.png",
            caption="../report/fig3a_EL_Hb.rst",
            category="Batching",
        ),
    log:
        "logs/batching/plot_fig3a.log",
    benchmark:
        "logs/benchmarks/batching_fig3a.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig3a_EL_Hb",
        profiles=BAT["fig3"]["profiles"],
        verdicts={
            n: BPROF[n].get("verdict", "independent") for n in BAT["fig3"]["profiles"]
        },
    script:
        "../scripts/plot_figure.py"


rule batching_fig3b:
    input:
        data="results/batching/fig3b_miub.csv",
        code=lib("plots/fig3b_miub.py", "plots/style.py"),
    output:
        pdf="figures/fig3b_miub.pdf",
        png=report(
            "figures/fig3b_miub.png",
            caption="../report/fig3b_miub.rst",
            category="Batching",
        ),
    log:
        "logs/batching/plot_fig3b.log",
    benchmark:
        "logs/benchmarks/batching_fig3b.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig3b_miub",
    script:
        "../scripts/plot_figure.py"


rule batching_fig5:
    input:
        data="results/batching/fig5_{panel}.csv",
        code=lib("plots/fig5_junyun.py", "plots/style.py"),
    output:
        pdf="figures/fig5_junyun_{panel}.pdf",
        png=report(
            "figures/fig5_junyun_{panel}.png",
            caption="../report/fig5_junyun_{panel}.rst",
            category="Batching",
        ),
    log:
        "logs/batching/plot_fig5_{panel}.log",
    benchmark:
        "logs/benchmarks/batching_fig5_{panel}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig5_junyun",
        panel=lambda w: w.panel,
    script:
        "../scripts/plot_figure.py"


rule batching_fig6a:
    input:
        unpack(lambda w: {p: f"results/batching/fig6a_{p}.csv" for p in FIG6_PROFILES}),
        code=lib("plots/fig6a_fix_bsz.py", "plots/style.py"),
    output:
        pdf="figures/fig6a_fix_bsz.pdf",
        png=report(
            "figures/fig6a_fix_bsz.png",
            caption="../report/fig6a_fix_bsz.rst",
            category="Batching",
        ),
    log:
        "logs/batching/plot_fig6a.log",
    benchmark:
        "logs/benchmarks/batching_fig6a.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig6a_fix_bsz",
        profiles=FIG6_PROFILES,
    script:
        "../scripts/plot_figure.py"


rule batching_fig6b:
    input:
        unpack(lambda w: {p: f"results/batching/fig6b_{p}.csv" for p in FIG6_PROFILES}),
        code=lib("plots/fig6b_dy_bmax.py", "plots/style.py"),
    output:
        pdf="figures/fig6b_dy_bmax.pdf",
        png=report(
            "figures/fig6b_dy_bmax.png",
            caption="../report/fig6b_dy_bmax.rst",
            category="Batching",
        ),
    log:
        "logs/batching/plot_fig6b.log",
    benchmark:
        "logs/benchmarks/batching_fig6b.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig6b_dy_bmax",
        profiles=FIG6_PROFILES,
    script:
        "../scripts/plot_figure.py"


rule batching_claims:
    input:
        reference="data/reference/claims_batching.csv",
        fig3b="results/batching/fig3b_miub.csv",
        fig5=expand("results/batching/fig5_{panel}.csv", panel=FIG5_PANELS),
        fig6a=expand("results/batching/fig6a_{bprofile}.csv", bprofile=FIG6_PROFILES),
        kstar=expand(
            "results/batching/fig6a_kstar_{bprofile}.csv", bprofile=FIG6_PROFILES
        ),
        fig6b=expand("results/batching/fig6b_{bprofile}.csv", bprofile=FIG6_PROFILES),
        fits=[f for n in set(FIG6_PROFILES) for f in bprof_fit(n)],
        code=BAT_CODE + lib("claims.py") + BAT_SCRIPTS,
    output:
        "results/claims/batching.csv",
    log:
        "logs/batching/claims.log",
    benchmark:
        "logs/benchmarks/batching_claims.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        cfg=BAT,
        profiles=BPROF,
        tolerances=config["claims"]["tolerances"],
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
