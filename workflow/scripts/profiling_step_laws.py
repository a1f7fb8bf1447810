"""results/profiling/step_laws.csv: every config step_profiles entry resolved to its StepLaw."""

import pandas as pd

from llmqueue.io import read_json, write_csv
from llmqueue.profiles import resolve_step_profile

sm = snakemake  # noqa: F821
rows = []
for name, prof in sm.params.step_profiles.items():
    fit = None
    if prof.get("kind") == "fit":
        fit = read_json(f"results/profiling/{prof['source']}/{prof['model']}/fit.json")
    law = resolve_step_profile(name, prof, fit)
    st = fit.get(prof.get("variant", "step"), {}) if fit else {}
    rows.append(
        {
            "name": name,
            "source": prof.get("source", "config"),
            "model": prof.get("model", ""),
            "variant": prof.get("variant", "step") if fit else "fixed",
            "verdict": law.verdict,
            "c0_s": law.c0_s,
            "c_tok_s": law.c_tok_s,
            "c_ctx_s": law.c_ctx_s,
            "r2": st.get("r2", float("nan")),
            "n": st.get("n", 0),
            "max_abs_rel_residual": st.get("max_abs_rel_residual", float("nan")),
            "median_abs_rel_residual": st.get("median_abs_rel_residual", float("nan")),
            "step_b1_ctx1024_s": float(law.step(1, 0, 1024)),
            "step_b32_ctx32768_s": float(law.step(32, 0, 32 * 1024)),
            "description": prof.get("description", ""),
        }
    )
write_csv(pd.DataFrame(rows), sm.output[0])
