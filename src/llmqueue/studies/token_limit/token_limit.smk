# Token-limit study (paper Sec. III, V-B): Fig. 4a-4d and claims 3-5 (llmqueue.studies.token_limit).
TL = config["token_limit"]
TL_PROFILES = [TL["profile"], *TL["extra_profiles"]]


# every table of the study: one file per latency profile, listed by name (the claims read them all)
TL_TABLES = {
    name: expand(f"results/token_limit/{{profile}}/{name}.csv", profile=TL_PROFILES)
    for name in ("patient", "impatient", "tradeoff", "gamma_sweep")
}
# a figure's inputs: the main profile's table and each extra profile's as a labelled second curve
TL_FIGURE_DATA = {
    name: {
        f"{label}_{name}": f"results/token_limit/{p}/{name}.csv"
        for label, p in [
            ("main", TL["profile"]),
            *((p, p) for p in TL["extra_profiles"]),
        ]
    }
    for name in TL_TABLES
}


TL_SCENARIO = {
    "patient": dict(rate_per_s=TL["patient"]["rate_per_s"], patience_s=None),
    "impatient": dict(
        rate_per_s=TL["impatient"]["rate_per_s"],
        patience_s=TL["impatient"]["patience_s"],
    ),
}


rule token_limit_sweep:
    input:
        fit=lambda w: fit_inputs(config["latency_profiles"][w.profile]),
        code=step_code("llmqueue.studies.token_limit.steps:sweep"),
    output:
        "results/token_limit/{profile}/{scenario}.csv",
    log:
        "logs/token_limit/sweep_{profile}_{scenario}.log",
    benchmark:
        "logs/benchmarks/token_limit_sweep_{profile}_{scenario}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.token_limit.steps:sweep",
        tokens=TL["tokens"],
        limits=TL["limits"],
        rate_per_s=lambda w: TL_SCENARIO[w.scenario]["rate_per_s"],
        patience_s=lambda w: TL_SCENARIO[w.scenario]["patience_s"],
        # only the main profile is simulated; the others are drawn from their closed forms
        sim=lambda w: TL["simulation"] if w.profile == TL["profile"] else None,
        seed=config["seed"],
        # the interpolation's reading and the exact solver's grid (impatient users only)
        impatience=lambda w: (
            dict(TL["exact"], exp_reading=TL["impatience_exp_reading"])
            if w.scenario == "impatient"
            else None
        ),
        profile_cfg=lambda w: config["latency_profiles"][w.profile],
    script:
        "../../../../workflow/scripts/step.py"


rule token_limit_tradeoff:
    input:
        patient="results/token_limit/{profile}/patient.csv",
        impatient="results/token_limit/{profile}/impatient.csv",
        code=step_code("llmqueue.studies.token_limit.steps:tradeoff"),
    output:
        tradeoff="results/token_limit/{profile}/tradeoff.csv",
        gamma_sweep="results/token_limit/{profile}/gamma_sweep.csv",
    log:
        "logs/token_limit/tradeoff_{profile}.log",
    benchmark:
        "logs/benchmarks/token_limit_tradeoff_{profile}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.token_limit.steps:tradeoff",
        tokens=TL["tokens"],
        tradeoff=TL["tradeoff"],
    script:
        "../../../../workflow/scripts/step.py"


rule token_limit_claims:
    input:
        reference="src/llmqueue/studies/token_limit/reference_claims.csv",
        patient=TL_TABLES["patient"],
        impatient=TL_TABLES["impatient"],
        tradeoff=TL_TABLES["tradeoff"],
        gamma_sweep=TL_TABLES["gamma_sweep"],
        fits=[f for p in TL_PROFILES for f in fit_inputs(config["latency_profiles"][p])],
        code=step_code("llmqueue.studies.token_limit.steps:claims"),
    output:
        "results/claims/token_limit.csv",
    log:
        "logs/token_limit/claims.log",
    benchmark:
        "logs/benchmarks/token_limit_claims.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.token_limit.steps:claims",
        tokens=TL["tokens"],
        profiles={p: config["latency_profiles"][p] for p in TL_PROFILES},
        claim_limits=TL["claim_limits"],
        main_profile=TL["profile"],
        tolerances=config["claims"]["tolerances"],
    script:
        "../../../../workflow/scripts/step.py"


CLAIM_TABLES.append("results/claims/token_limit.csv")


# ---- figures (Fig. 4a-4d: the main profile, each extra profile as a labelled second curve;
# TL_FIGURE_DATA above)
TL_PLOT = dict(
    main_profile=TL["profile"],
    extra_profiles=TL["extra_profiles"],
    verdicts={p: config["latency_profiles"][p]["verdict"] for p in TL_PROFILES},
    tokens=TL["tokens"],
)
TL_IMPATIENT = dict(
    TL_PLOT,
    rate_per_s=TL["impatient"]["rate_per_s"],
    patience_s=TL["impatient"]["patience_s"],
)
TL_CATEGORY = "Token limit (Sec. III)"

declare_figure(
    "fig4a",
    study="token_limit",
    claims=[3],
    plot="fig4a_mg1_EW",
    data=TL_FIGURE_DATA["patient"],
    params=dict(TL_PLOT, rate_per_s=TL["patient"]["rate_per_s"]),
    category=TL_CATEGORY,
)
declare_figure(
    "fig4b",
    study="token_limit",
    claims=[4],
    plot="fig4b_mg1_EWqs",
    data=TL_FIGURE_DATA["impatient"],
    params=TL_IMPATIENT,
    category=TL_CATEGORY,
)
declare_figure(
    "fig4c",
    study="token_limit",
    claims=[4],
    plot="fig4c_mg1_pai",
    data=TL_FIGURE_DATA["impatient"],
    params=TL_IMPATIENT,
    category=TL_CATEGORY,
)
declare_figure(
    "fig4d",
    study="token_limit",
    claims=[3, 4, 5],
    plot="fig4d_tradeoff",
    data=TL_FIGURE_DATA["tradeoff"],
    params=dict(
        TL_PLOT,
        rate_per_s=TL["patient"]["rate_per_s"],
        patience_s=TL["impatient"]["patience_s"],
        alpha_patient=TL["tradeoff"]["alpha_patient"],
        alpha_impatient=TL["tradeoff"]["alpha_impatient"],
        loss_cost=TL["tradeoff"]["loss_cost"],
        paper_optimum_patient=TL["claim_limits"]["patient"],
        paper_optimum_impatient=TL["claim_limits"]["impatient"],
    ),
    category=TL_CATEGORY,
)
