# Shared helpers: code dependencies, study targets, claim tables, latency-profile inputs.
from pathlib import Path

LIB = Path("src/llmqueue")

# Each study appends its final outputs (figures, tables) and its claims CSV here.
STUDY_TARGETS = {}
CLAIM_TABLES = []


def lib(*modules):
    """Library source files a job depends on (touching one reruns the job)."""
    return [str(LIB / m) for m in modules]


def all_targets():
    return [t for targets in STUDY_TARGETS.values() for t in targets]


def figure(stem):
    """The PDF and PNG of a figure stem, e.g. figure('fig4a_mg1_EW')."""
    return [f"figures/{stem}.pdf", f"figures/{stem}.png"]


def latency_profile_inputs(name):
    """The fit.json a latency profile needs (none for a fixed profile)."""
    prof = config["latency_profiles"][name]
    if prof["kind"] == "fit":
        return [f"results/profiling/{prof['source']}/{prof['model']}/fit.json"]
    return []


# ---- token-limit study (workflow/rules/token_limit.smk; TL is defined there)
def tl_tables(name):
    return expand(f"results/token_limit/{{profile}}/{name}.csv", profile=TL_PROFILES)


def tl_figure_inputs(scenario_tables):
    def inputs(wildcards):
        files = {}
        for name in scenario_tables:
            files[f"main_{name}"] = f"results/token_limit/{TL['profile']}/{name}.csv"
            for p in TL.get("extra_profiles", []):
                files[f"{p}_{name}"] = f"results/token_limit/{p}/{name}.csv"
        return files

    return inputs


# ---- batching study (workflow/rules/batching.smk; BAT, BPROF are defined there)
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
