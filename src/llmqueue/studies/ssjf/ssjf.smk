# SSJF study (issue 14; Qiu et al., arXiv 2404.08509): the queue ordered by a predicted output
# length under no, dynamic and continuous batching; claim 10 (llmqueue.studies.ssjf). The learned
# predictor trains on the first part of the trace; every simulation draws from the held-out rest.
# Claim 10's rows come in three groups: SSJF's own inputs and protocol served as their simulator
# serves (a) and as this engine serves (b), and the Azure trace with the learned predictor (c).
SSJF = config["ssjf"]
SSJF_OFFICIAL = SSJF["official"]
SSJF_OFFICIAL_FILES = {f["name"]: f["file"] for f in SSJF_OFFICIAL["predictions"]}


# the fit.json files the settings' named batch and step profiles are read from
SSJF_FITS = sorted(
    {
        path
        for cfg in SSJF["settings"].values()
        for key in ("batch", "step")
        for path in setting_fit_paths(cfg[key], key, config)
    }
)
SSJF_KINDS = list(SSJF["learned"]["kinds"])
SSJF_MODEL = SSJF["learned"]["ssjf_model"]
# what every job that reads the trace and the settings gets
SSJF_TRACE = dict(
    columns=SSJF["columns"],
    train_fraction=SSJF["train_fraction"],
)
SSJF_SETTINGS = dict(
    settings=SSJF["settings"],
    batch_profiles=config["batch_profiles"],
    step_profiles=config["step_profiles"],
)


wildcard_constraints:
    ssjf_kind="|".join(["regressor", "classifier"]),
    ssjf_arrivals="poisson|replay",


rule ssjf_train:
    """A learned output-length predictor, trained on the first part of the trace."""
    input:
        trace=SSJF["trace"],
        code=step_code("llmqueue.studies.ssjf.steps:train"),
    output:
        model="results/ssjf/models/{ssjf_kind}.model",
        score="results/ssjf/models/{ssjf_kind}.json",
    log:
        "logs/ssjf/train_{ssjf_kind}.log",
    benchmark:
        "logs/benchmarks/ssjf_train_{ssjf_kind}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        step="llmqueue.studies.ssjf.steps:train",
        learned=SSJF["learned"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_predictors:
    """Every predictor scored on the held-out rows (accuracy, Kendall tau, MAE)."""
    input:
        trace=SSJF["trace"],
        models=expand("results/ssjf/models/{kind}.model", kind=SSJF_KINDS),
        code=step_code("llmqueue.studies.ssjf.steps:predictors"),
    output:
        "results/ssjf/predictors.csv",
    log:
        "logs/ssjf/predictors.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        step="llmqueue.studies.ssjf.steps:predictors",
        kinds=SSJF_KINDS,
        predictors=SSJF["quality"]["predictors"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_capacity:
    """FCFS capacity of every (setting, batching mode): the loads are fractions of it."""
    input:
        trace=SSJF["trace"],
        fits=SSJF_FITS,
        code=step_code("llmqueue.studies.ssjf.steps:capacity"),
    output:
        "results/ssjf/capacity.csv",
    log:
        "logs/ssjf/capacity.log",
    benchmark:
        "logs/benchmarks/ssjf_capacity.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:capacity",
        requests=SSJF["capacity_requests"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_jct:
    """FCFS / SJF / SSJF (with and without the guard) against load: Poisson or trace replay."""
    input:
        trace=SSJF["trace"],
        fits=SSJF_FITS,
        capacity="results/ssjf/capacity.csv",
        model=f"results/ssjf/models/{SSJF_MODEL}.model",
        code=step_code("llmqueue.studies.ssjf.steps:jct"),
    output:
        "results/ssjf/jct_{ssjf_arrivals}.csv",
    log:
        "logs/ssjf/jct_{ssjf_arrivals}.log",
    benchmark:
        "logs/benchmarks/ssjf_jct_{ssjf_arrivals}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:jct",
        loads=SSJF["loads"],
        sim=lambda w: (
            SSJF["poisson"] if w.ssjf_arrivals == "poisson" else SSJF["replay"]
        ),
        guard_s=SSJF["guard_s"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_quality:
    """JCT gain over FCFS against predictor quality, per batching mode."""
    input:
        trace=SSJF["trace"],
        fits=SSJF_FITS,
        capacity="results/ssjf/capacity.csv",
        models=expand("results/ssjf/models/{kind}.model", kind=SSJF_KINDS),
        code=step_code("llmqueue.studies.ssjf.steps:quality"),
    output:
        "results/ssjf/quality.csv",
    log:
        "logs/ssjf/quality.log",
    benchmark:
        "logs/benchmarks/ssjf_quality.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:quality",
        kinds=SSJF_KINDS,
        quality=SSJF["quality"],
        sim=SSJF["poisson"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_starvation:
    """Mean vs max wait of SJF and SSJF with each starvation guard."""
    input:
        trace=SSJF["trace"],
        fits=SSJF_FITS,
        capacity="results/ssjf/capacity.csv",
        model=f"results/ssjf/models/{SSJF_MODEL}.model",
        code=step_code("llmqueue.studies.ssjf.steps:starvation"),
    output:
        "results/ssjf/starvation.csv",
    log:
        "logs/ssjf/starvation.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:starvation",
        starvation=SSJF["starvation"],
        sim=SSJF["poisson"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_protocol:
    """SSJF's own evaluation: runs of 50 jobs arriving in whole-second slots."""
    input:
        trace=SSJF["trace"],
        fits=SSJF_FITS,
        capacity="results/ssjf/capacity.csv",
        model=f"results/ssjf/models/{SSJF_MODEL}.model",
        code=step_code("llmqueue.studies.ssjf.steps:protocol"),
    output:
        "results/ssjf/protocol.csv",
    log:
        "logs/ssjf/protocol.log",
    benchmark:
        "logs/benchmarks/ssjf_protocol.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_TRACE,
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:protocol",
        protocol=SSJF["protocol"],
        guard_s=SSJF["guard_s"],
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_official_predictors:
    """SSJF's published proxy-model classes scored against the true lengths."""
    input:
        files=list(SSJF_OFFICIAL_FILES.values()),
        code=step_code("llmqueue.studies.ssjf.steps:official_predictors"),
    output:
        "results/ssjf/official_predictors.csv",
    log:
        "logs/ssjf/official_predictors.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.ssjf.steps:official_predictors",
        official=SSJF_OFFICIAL,
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_official:
    """SSJF's protocol on SSJF's inputs, served as their simulator and as this engine serves."""
    input:
        predictions=SSJF_OFFICIAL_FILES[SSJF_OFFICIAL["ssjf_predictor"]],
        fits=SSJF_FITS,
        code=step_code("llmqueue.studies.ssjf.steps:official"),
    output:
        "results/ssjf/official.csv",
    log:
        "logs/ssjf/official.log",
    benchmark:
        "logs/benchmarks/ssjf_official.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:official",
        official=SSJF_OFFICIAL,
        protocol=SSJF["protocol"],
        guard_s=SSJF["guard_s"],
        seed=config["seed"],
        sweep=False,
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_official_sweep:
    """Group a's continuous batching on SSJF's inputs at every batch size SSJF's run script
    sweeps (claims 10a5, 10a6)."""
    input:
        predictions=SSJF_OFFICIAL_FILES[SSJF_OFFICIAL["ssjf_predictor"]],
        fits=SSJF_FITS,
        code=step_code("llmqueue.studies.ssjf.steps:official"),
    output:
        "results/ssjf/official_sweep.csv",
    log:
        "logs/ssjf/official_sweep.log",
    benchmark:
        "logs/benchmarks/ssjf_official_sweep.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        **SSJF_SETTINGS,
        step="llmqueue.studies.ssjf.steps:official",
        official=SSJF_OFFICIAL,
        protocol=SSJF["protocol"],
        guard_s=SSJF["guard_s"],
        seed=config["seed"],
        sweep=True,
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_groups:
    """Claim 10's three groups read as SSJF's evaluation reads them, with CIs over runs."""
    input:
        official="results/ssjf/official.csv",
        protocol="results/ssjf/protocol.csv",
        predictors="results/ssjf/predictors.csv",
        official_predictors="results/ssjf/official_predictors.csv",
        code=step_code("llmqueue.studies.ssjf.steps:groups"),
    output:
        "results/ssjf/groups.csv",
    log:
        "logs/ssjf/groups.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.ssjf.steps:groups",
        claim_settings=SSJF["claim_settings"],
        ssjf_model=SSJF_MODEL,
        ssjf_predictor=SSJF_OFFICIAL["ssjf_predictor"],
    script:
        "../../../../workflow/scripts/step.py"


rule ssjf_claims:
    input:
        reference="src/llmqueue/studies/ssjf/reference_claims.csv",
        groups="results/ssjf/groups.csv",
        sweep="results/ssjf/official_sweep.csv",
        protocol="results/ssjf/protocol.csv",
        poisson="results/ssjf/jct_poisson.csv",
        predictors="results/ssjf/predictors.csv",
        code=step_code("llmqueue.studies.ssjf.steps:claims"),
    output:
        "results/claims/ssjf.csv",
    log:
        "logs/ssjf/claims.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.ssjf.steps:claims",
        claim_settings=SSJF["claim_settings"],
        ssjf_model=SSJF_MODEL,
        claim_load=SSJF["claim_load"],
        protocol=SSJF["protocol"],
        official=SSJF_OFFICIAL,
        guard_s=SSJF["guard_s"],
        tolerances=config["claims"]["tolerances"],
    script:
        "../../../../workflow/scripts/step.py"


CLAIM_TABLES.append("results/claims/ssjf.csv")

# ---- figures
SSJF_CATEGORY = "SSJF (arXiv 2404.08509)"
SSJF_JCT_PANELS = [f"{a}_{s}" for a in ("poisson", "replay") for s in SSJF["settings"]]
declare_figure(
    "fig_ssjf_jct",
    study="ssjf",
    claims=[10],
    plot="fig_ssjf_jct",
    panels=SSJF_JCT_PANELS,
    data=lambda panel: {"data": f"results/ssjf/jct_{panel.split('_', 1)[0]}.csv"},
    params=dict(
        setting=lambda panel: panel.split("_", 1)[1],
        description=lambda panel: SSJF["settings"][panel.split("_", 1)[1]][
            "description"
        ],
    ),
    category=SSJF_CATEGORY,
)
declare_figure(
    "fig_ssjf_predictor",
    study="ssjf",
    claims=[10],
    plot="fig_ssjf_predictor",
    data={"data": "results/ssjf/quality.csv"},
    params=dict(ssjf_model=SSJF_MODEL),
    category=SSJF_CATEGORY,
)
declare_figure(
    "fig_ssjf_groups",
    study="ssjf",
    claims=[10],
    plot="fig_ssjf_groups",
    data={
        "data": "results/ssjf/groups.csv",
        "reference": "src/llmqueue/studies/ssjf/reference_claims.csv",
    },
    params=dict(
        claim_settings=SSJF["claim_settings"],
        rate_per_s=SSJF["protocol"]["rate_per_s"],
        jct_tolerance=config["claims"]["tolerances"]["ssjf_jct_range"]["value"],
        thr_tolerance=config["claims"]["tolerances"]["ssjf_throughput_range"]["value"],
    ),
    category=SSJF_CATEGORY,
)
declare_figure(
    "fig_ssjf_starvation",
    study="ssjf",
    claims=[10],
    plot="fig_ssjf_starvation",
    data={"data": "results/ssjf/starvation.csv"},
    category=SSJF_CATEGORY,
)
