# Batching study (paper Sec. IV, V-C): Fig. 3a, 3b, 5, 6a, 6b and claims 6-9
# (llmqueue.studies.batching). Sweeps: exact embedded Markov chain, closed forms (Eq. 16, 25) and
# the simulation per (policy, lambda); lambda grids are fractions of each profile's best mu_b.
BAT = config["batching"]
BPROF = config["batch_profiles"]
F3, F5, F6 = BAT["fig3"], BAT["fig5"], BAT["fig6"]
FIG5_PANELS = list(F5["panels"])
FIG6_PROFILES = list(F6["profiles"])


# The sweeps (llmqueue.studies.batching.spec.SweepSpec), one small dict per figure: `stream` keys each
# figure's random streams apart.
SWEEPS = {
    "fig5": dict(
        curves="dynamic_vs_elastic",
        tokens=F5["tokens"],
        b_range=F5["b_range"],
        rates=F5["rates"],
        stream=5,
        bound_fit_range=F5["bound_fit_range"],
    ),
    "fig6a": dict(
        curves="fixed_batch",
        tokens=F6["tokens"],
        b_range=F6["b_range"],
        rates=F6["rates"],
        stream=61,
        fixed_K=F6["fixed_K"],
        tail_cap_tokens=BAT["tail_cap_tokens"],
    ),
    "fig6b": dict(
        curves="bmax",
        tokens=F6["tokens"],
        b_range=F6["b_range"],
        rates=F6["rates"],
        stream=62,
        bmax=F6["bmax"],
        tail_cap_tokens=BAT["tail_cap_tokens"],
    ),
}
# Which profile each sweep output uses: a Fig. 5 panel names a model, Fig. 6 files a profile.
SWEEP_PROFILE = {
    "fig5": lambda name: F5["panels"][name],
    "fig6a": lambda name: name,
    "fig6b": lambda name: name,
}


wildcard_constraints:
    sweep="|".join(SWEEPS),
    sname="|".join(sorted({*FIG5_PANELS, *FIG6_PROFILES})),
    bprofile="|".join(FIG6_PROFILES),


rule batching_fig3_data:
    input:
        fits=[f for n in F3["profiles"] for f in fit_inputs(BPROF[n])],
        code=step_code("llmqueue.studies.batching.steps:fig3"),
    output:
        fig3a="results/batching/fig3a_EL_Hb.csv",
        fig3b="results/batching/fig3b_miub.csv",
    log:
        "logs/batching/fig3_data.log",
    benchmark:
        "logs/benchmarks/batching_fig3_data.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.batching.steps:fig3",
        profile_names=F3["profiles"],
        profiles={n: BPROF[n] for n in F3["profiles"]},
        fig3a_tokens=F3["fig3a_tokens"],
        fig3b_tokens=F3["fig3b_tokens"],
        b_max=F3["b_max"],
        mc_samples=F3["mc_samples"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule batching_sweep:
    """One lambda sweep: a Fig. 5 panel (sname = panel) or Fig. 6a / 6b (sname = profile)."""
    input:
        fit=lambda w: fit_inputs(BPROF[SWEEP_PROFILE[w.sweep](w.sname)]),
        code=step_code("llmqueue.studies.batching.steps:sweep"),
    output:
        "results/batching/{sweep}_{sname}.csv",
    log:
        "logs/batching/{sweep}_{sname}.log",
    benchmark:
        "logs/benchmarks/batching_sweep_{sweep}_{sname}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.batching.steps:sweep",
        spec=lambda w: SWEEPS[w.sweep],
        profile=lambda w: SWEEP_PROFILE[w.sweep](w.sname),
        profile_cfg=lambda w: BPROF[SWEEP_PROFILE[w.sweep](w.sname)],
        sim=BAT["simulation"],
        chain=BAT["chain"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule batching_kstar:
    """Claim 8: every fixed K of claim_K at claim_rate, one profile."""
    input:
        fit=lambda w: fit_inputs(BPROF[w.bprofile]),
        code=step_code("llmqueue.studies.batching.steps:kstar"),
    output:
        "results/batching/fig6a_kstar_{bprofile}.csv",
    log:
        "logs/batching/kstar_{bprofile}.log",
    benchmark:
        "logs/benchmarks/batching_kstar_{bprofile}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.batching.steps:kstar",
        profile=lambda w: w.bprofile,
        profile_cfg=lambda w: BPROF[w.bprofile],
        tokens=F6["tokens"],
        tail_cap_tokens=BAT["tail_cap_tokens"],
        rate_per_s=F6["claim_rate"],
        k_range=F6["claim_K"],
        sim=dict(BAT["simulation"], requests=F6["claim_requests"]),
        chain=BAT["chain"],
        seed=config["seed"],
        stream=SWEEPS["fig6a"]["stream"],
    script:
        "../../../../workflow/scripts/step.py"


rule batching_claims:
    input:
        reference="src/llmqueue/studies/batching/reference_claims.csv",
        fig3b="results/batching/fig3b_miub.csv",
        fig5=expand("results/batching/fig5_{panel}.csv", panel=FIG5_PANELS),
        kstar=expand(
            "results/batching/fig6a_kstar_{bprofile}.csv", bprofile=FIG6_PROFILES
        ),
        fig6b=expand("results/batching/fig6b_{bprofile}.csv", bprofile=FIG6_PROFILES),
        fits=sorted(
            {
                f
                for n in [*F3["profiles"], *F5["panels"].values(), *FIG6_PROFILES]
                for f in fit_inputs(BPROF[n])
            }
        ),
        code=step_code("llmqueue.studies.batching.steps:claims"),
    output:
        "results/claims/batching.csv",
    log:
        "logs/batching/claims.log",
    benchmark:
        "logs/benchmarks/batching_claims.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.batching.steps:claims",
        profiles={
            n: BPROF[n]
            for n in sorted({*F3["profiles"], *F5["panels"].values(), *FIG6_PROFILES})
        },
        fig3_profiles=F3["profiles"],
        fig3b_tokens=F3["fig3b_tokens"],
        fig5_panels=F5["panels"],
        fig5_rates=F5["rates"],
        fig5_b_range=F5["b_range"],
        fig5_bound_fit_range=F5["bound_fit_range"],
        fig6_profiles=FIG6_PROFILES,
        fig6_tokens=F6["tokens"],
        tail_cap_tokens=BAT["tail_cap_tokens"],
        claim_rate=F6["claim_rate"],
        inoue_fit_ranges=F6["inoue_fit_ranges"],
        chain=BAT["chain"],
        peak_b_max=F3["peak_b_max"],
        kv_limit=F3["kv_limit"],
        roofline=config["profiling"]["roofline"],
        tolerances=config["claims"]["tolerances"],
    script:
        "../../../../workflow/scripts/step.py"


CLAIM_TABLES.append("results/claims/batching.csv")

# ---- figures
BAT_CATEGORY = "Batching (Sec. IV)"
declare_figure(
    "fig3a",
    study="batching",
    plot="fig3a_EL_Hb",
    data={"data": "results/batching/fig3a_EL_Hb.csv"},
    params=dict(
        profiles=F3["profiles"],
        verdicts={n: BPROF[n]["verdict"] for n in F3["profiles"]},
    ),
    category=BAT_CATEGORY,
)
declare_figure(
    "fig3b",
    study="batching",
    claims=[6],
    plot="fig3b_miub",
    data={"data": "results/batching/fig3b_miub.csv"},
    category=BAT_CATEGORY,
)
declare_figure(
    "fig5",
    study="batching",
    claims=[7],
    plot="fig5_junyun",
    panels=FIG5_PANELS,
    data=lambda panel: {"data": f"results/batching/fig5_{panel}.csv"},
    category=BAT_CATEGORY,
)
declare_figure(
    "fig6a",
    study="batching",
    claims=[8],
    plot="fig6a_fix_bsz",
    data={p: f"results/batching/fig6a_{p}.csv" for p in FIG6_PROFILES},
    params=dict(profiles=FIG6_PROFILES),
    category=BAT_CATEGORY,
)
declare_figure(
    "fig6b",
    study="batching",
    claims=[9],
    plot="fig6b_dy_bmax",
    data={p: f"results/batching/fig6b_{p}.csv" for p in FIG6_PROFILES},
    params=dict(profiles=FIG6_PROFILES),
    category=BAT_CATEGORY,
)
