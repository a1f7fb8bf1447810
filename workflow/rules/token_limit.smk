# Token-limit study (paper Sec. III, V-B): Fig. 4a-4d and claims 3-5.
TL = config["token_limit"]
TL_PROFILES = [TL["profile"], *TL.get("extra_profiles", [])]
TL_CODE = lib(
    "tokens.py",
    "latency.py",
    "seeds.py",
    "analytic/mg1.py",
    "analytic/impatience.py",
    "analytic/tradeoff.py",
    "sim/mg1.py",
    "sim/stats.py",
    "studies/token_limit.py",
)


rule token_limit_sweep:
    input:
        fit=lambda w: latency_profile_inputs(w.profile),
        code=TL_CODE,
    output:
        "results/token_limit/{profile}/{scenario}.csv",
    log:
        "logs/token_limit/sweep_{profile}_{scenario}.log",
    benchmark:
        "logs/benchmarks/token_limit_sweep_{profile}_{scenario}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        section=TL,
        profile_cfg=lambda w: config["latency_profiles"][w.profile],
        simulate=lambda w: w.profile == TL["profile"],
        seed=config["seed"],
    script:
        "../scripts/token_limit_sweep.py"


rule token_limit_tradeoff:
    input:
        patient="results/token_limit/{profile}/patient.csv",
        impatient="results/token_limit/{profile}/impatient.csv",
        code=TL_CODE,
    output:
        tradeoff="results/token_limit/{profile}/tradeoff.csv",
        gamma_sweep="results/token_limit/{profile}/gamma_sweep.csv",
    log:
        "logs/token_limit/tradeoff_{profile}.log",
    benchmark:
        "logs/benchmarks/token_limit_tradeoff_{profile}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        section=TL,
    script:
        "../scripts/token_limit_tradeoff.py"


rule token_limit_claims:
    input:
        reference="data/reference/claims_token_limit.csv",
        patient=tl_tables("patient"),
        impatient=tl_tables("impatient"),
        tradeoff=tl_tables("tradeoff"),
        gamma_sweep=tl_tables("gamma_sweep"),
        fits=[f for p in TL_PROFILES for f in latency_profile_inputs(p)],
        code=TL_CODE + lib("claims.py"),
    output:
        "results/claims/token_limit.csv",
    log:
        "logs/token_limit/claims.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        section=TL,
        profiles={p: config["latency_profiles"][p] for p in TL_PROFILES},
        tolerances=config["claims"]["tolerances"],
    script:
        "../scripts/token_limit_claims.py"


# figure stem -> (tables it draws, shared plot helpers it imports besides plots/style.py)
TL_FIGURES = {
    "fig4a_mg1_EW": (["patient"], ["plots/_token_limit.py"]),
    "fig4b_mg1_EWqs": (["impatient"], ["plots/_token_limit.py", "plots/_impatient.py"]),
    "fig4c_mg1_pai": (["impatient"], ["plots/_token_limit.py", "plots/_impatient.py"]),
    "fig4d_tradeoff": (["tradeoff"], ["plots/_token_limit.py", "analytic/tradeoff.py"]),
}


for _stem, (_tables, _helpers) in TL_FIGURES.items():

    rule:
        name:
            f"plot_{_stem}"
        input:
            unpack(tl_figure_inputs(_tables)),
            code=lib(f"plots/{_stem}.py", "plots/style.py", *_helpers),
        output:
            pdf=f"figures/{_stem}.pdf",
            png=report(
                f"figures/{_stem}.png",
                caption=f"../report/{_stem}.rst",
                category="Token limit (Sec. III)",
            ),
        log:
            f"logs/figures/{_stem}.log",
        conda:
            "../../envs/analysis.yaml"
        params:
            module=_stem,
            main_profile=TL["profile"],
            extra_profiles=TL.get("extra_profiles", []),
            profiles={p: config["latency_profiles"][p] for p in TL_PROFILES},
            section=TL,
        script:
            "../scripts/plot_figure.py"


STUDY_TARGETS["token_limit"] = [f for stem in TL_FIGURES for f in figure(stem)]
CLAIM_TABLES.append("results/claims/token_limit.csv")
