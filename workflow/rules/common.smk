# Shared helpers: code dependencies, study targets, claim tables, latency-profile inputs.
from pathlib import Path

LIB = Path("src/llmqueue")

# Each study appends its final outputs (figures, tables) and its claims CSV here.
STUDY_TARGETS = {}
CLAIM_TABLES = []


def lib(*modules):
    """Library source files a rule depends on: touching one reruns the rule."""
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


wildcard_constraints:
    profile="[A-Za-z0-9_\-]+",
    scenario="patient|impatient",
