"""The profiling study's rule steps (the fits of Table I, the measurements, roofline and kernels,
Fig. 2's data and claims 1-2): one function per rule, run by workflow/scripts/step.py on the job
(docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def fit_table1(sm: Any) -> None:
    """Least-squares fit of Table I (paper, A100) rows with a fixed input length: S = a*N + b0."""
    import pandas as pd

    from llmqueue.io import write_json
    from llmqueue.latency_fits import fit_linear_latency

    table = pd.read_csv(sm.input.table)
    rows = table[table["input_tokens"] == sm.params.input_tokens].drop_duplicates()
    fit = fit_linear_latency(rows["output_tokens"], rows["latency_s"])
    write_json(
        {
            "source": "paper",
            "model": "llama2-7b-chat",
            "label": "paper (A100, Table I)",
            "verdict": "reference",
            "hardware": "NVIDIA A100 (paper, Table I)",
            "description": f"Table I rows with input {sm.params.input_tokens} tokens ({len(rows)} rows)",
            "x": "output tokens N",
            "y": "latency S (s)",
            "points": rows[["output_tokens", "latency_s"]].to_dict(orient="list"),
            "linear": fit.to_dict(),
        },
        sm.output[0],
    )


def claims(sm: Any) -> None:
    """Claims 1 (Table I) and 2 (KV-cache limit) of the profiling study: one row per distinct Table I
    cell from the best source (the first committed GPU measurement of profiling.measured, else the
    first kernel profile measured on an A100), the others in its note; the roofline as a bound; Table
    I's slope and intercept; the KV limit and its bound (llmqueue.studies.profiling.claims)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.hardware.roofline import roofline
    from llmqueue.io import read_json, write_csv
    from llmqueue.profiling.fits import is_gpu_source
    from llmqueue.studies.profiling.claims import (
        composition_caveat,
        kernel_table1_claims,
        kv_limit_claims,
        measured_gpu_table1_claims,
        restate_table1,
        roofline_table1_claims,
        table1_shape_claims,
    )

    rp = sm.params.roofline
    gpu = rp["batch_gpu_for_fig5"]
    book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), sm.params.tolerances)
    r = roofline(
        "llama2-7b-chat", gpu, rp["dtype"], rp["bandwidth_efficiency"], rp["flops_efficiency"]
    )
    label = read_json(next(p for p in sm.input.roofline if f"roofline-{gpu}/" in p))["label"]
    table1 = pd.read_csv(sm.input.table1)
    rows = roofline_table1_claims(book, table1, r.request_time, label)
    table1_ours = pd.read_csv(sm.input.table1_ours)
    by_source = {}  # source -> (rows, column of figures/table1.csv, label, why not the paper's GPU)
    for hw, meta_path, fit_path in zip(
        sm.params.measured, sm.input.meta, sm.input.measured_fits, strict=True
    ):
        meta = read_json(meta_path)
        if is_gpu_source(meta):
            gpu_name = str(meta.get("environment", {}).get("gpu", "an unnamed GPU"))
            by_source[hw] = (
                measured_gpu_table1_claims(
                    book, table1_ours, hw, meta, composition_caveat(read_json(fit_path))
                ),
                f"{hw}_composed_s",
                f"the times measured on {gpu_name}",
                ""
                if "A100" in gpu_name.upper()
                else f"measured on {gpu_name}, not the paper's A100",
            )
    kfits = {f["source"]: f for f in (read_json(p) for p in sm.input.kernel_fits)}
    kernels = [n for n in sm.params.kernels if kfits[n]["model"] == "llama2-7b-chat"]
    for name in sorted(kernels, key=lambda n: not str(kfits[n]["gpu"]["name"]).startswith("a100")):
        a100 = str(kfits[name]["gpu"]["name"]).startswith("a100")
        by_source[name] = (
            kernel_table1_claims(book, table1_ours, name, kfits[name]),
            f"{name}_kernels_s",
            f"the kernel sums of {name}",
            "" if a100 else f"kernels measured on another GPU than the paper's A100 ({name})",
        )
    primary = next(iter(by_source))
    rows += restate_table1(book, {k: v[0] for k, v in by_source.items()}, primary)
    _, column, source_label, incomparable = by_source[primary]
    rows += table1_shape_claims(book, table1, table1_ours[column], source_label, incomparable)
    rows += kv_limit_claims(book, pd.read_csv(sm.input.kv, dtype={"id": str}).set_index("id"))
    write_csv(claims_frame(rows), sm.output[0])


def figure_data(sm: Any) -> None:
    """Fig. 2a / 2b data, the composition check and Table I (figures/table1.{csv,md})."""
    from pathlib import Path

    import pandas as pd

    from llmqueue.io import read_json, write_csv, write_text
    from llmqueue.profiling.fits import hardware_label, is_gpu_source, read_measured
    from llmqueue.profiling.kernels import load_kernel_profile
    from llmqueue.studies.profiling.tables import (
        composition_frame,
        fig2a_data,
        fig2b_data,
        table1_frame,
        table1_markdown,
        table1_notes,
    )

    prof = sm.params.profiling
    table1 = pd.read_csv(sm.input.table1)
    paper_fit = read_json(sm.input.paper_fit)
    roof = [read_json(p) for p in sm.input.roofline]
    mfits = [read_json(p) for p in sm.input.measured]
    data = {hw: read_measured(Path(f"data/profiling/{hw}")) for hw in sm.params.measured}
    by_hw = {hw: [f for f in mfits if f["source"] == hw] for hw in data}
    kcfg = prof.get("kernel_profiles", {})
    kfits = {f["source"]: f for f in (read_json(p) for p in sm.input.kernel_fits)}
    kprof = {name: load_kernel_profile(name, c, prof) for name, c in kcfg.items()}

    pts, lines = fig2a_data(
        table1,
        paper_fit,
        roof,
        {hw: (d[1], d[2], by_hw[hw]) for hw, d in data.items()},
        int(prof["fig2a"]["max_output_tokens"]),
        list(kfits.values()),
    )
    write_csv(pts, sm.output.fig2a_points)
    write_csv(lines, sm.output.fig2a_lines)
    pts, lines = fig2b_data(
        roof,
        {hw: (d[0], d[2], by_hw[hw]) for hw, d in data.items()},
        prof,
        prof["roofline"]["batch_gpu_for_fig5"],
        {k: (kprof[k], kfits[k]) for k in prof["fig2b"].get("kernel_sources", [])},
    )
    write_csv(pts, sm.output.fig2b_points)
    write_csv(lines, sm.output.fig2b_lines)
    write_csv(
        composition_frame({hw: (d[0], d[1]) for hw, d in data.items()}, prof["models"]),
        sm.output.composition,
    )

    llama = {
        hw: next(f for f in fits if f["model"] == "llama2-7b-chat") for hw, fits in by_hw.items()
    }
    t1 = table1_frame(table1, roof, prof, {hw: (data[hw][0], llama[hw]) for hw in data}, kprof)
    write_csv(t1, sm.output.table1_csv)
    labels = {hw: hardware_label(data[hw][2]) for hw in data}
    gpu = {hw: is_gpu_source(data[hw][2]) for hw in data}
    notes = table1_notes(
        llama, labels, {n: f for n, f in kfits.items() if f["model"] == "llama2-7b-chat"}, gpu
    )
    write_text(table1_markdown(t1, notes), sm.output.table1_md)


def kernel_fit(sm: Any) -> None:
    """fit.json of a kernel-profile source (kernels measured by others + roofline attention)."""
    from llmqueue.io import read_json, write_json
    from llmqueue.profiling.fits import kernel_fit_json
    from llmqueue.profiling.kernels import load_kernel_profile

    kcfg = sm.params.kernel
    if kcfg["model"] != sm.wildcards.pmodel:
        raise ValueError(f"{sm.wildcards.ksrc} profiles {kcfg['model']}, not {sm.wildcards.pmodel}")
    kp = load_kernel_profile(sm.wildcards.ksrc, kcfg, sm.params.profiling)
    write_json(kernel_fit_json(kp, read_json(sm.input.meta), sm.params.profiling), sm.output[0])


def kv_limit(sm: Any) -> None:
    """Claim 2: KV-cache batch limit under each configured reading."""
    import pandas as pd

    from llmqueue.hardware.kvcache import kv_limit
    from llmqueue.io import write_csv

    kv = sm.params.profiling["kv_limit"]
    rows = []
    for r in kv["readings"]:
        lim = kv_limit(
            kv["model"],
            r["gpu"],
            int(kv["sequence_tokens"]),
            r["weights_dtype"],
            r["kv_dtype"],
            float(r["overhead_gib"]),
        )
        rows.append({"id": r["id"], **lim.to_dict()})
    write_csv(pd.DataFrame(rows), sm.output[0])


def measured_fit(sm: Any) -> None:
    """fit.json of one model from a committed measurement folder data/profiling/<hw>/."""
    from pathlib import Path

    from llmqueue.io import write_json
    from llmqueue.profiling.fits import (
        depth_source,
        measured_fit_json,
        read_measured,
        read_step_law,
    )

    prof = sm.params.profiling
    model = sm.wildcards.pmodel
    folder = Path(sm.input.timing).parent
    timing, e2e, meta = read_measured(folder)
    step = read_step_law(folder)  # None when the folder has no step_law.csv
    fit = measured_fit_json(
        sm.wildcards.hw,
        model,
        timing,
        e2e,
        meta,
        prof,
        depth_from=depth_source(model, prof["hardware"]["cpu"].get("depth_models", [])),
        depth_tolerance=float(prof.get("depth_tolerance", 0.1)),
        step=step,
    )
    write_json(fit, sm.output[0])


def roofline_fit(sm: Any) -> None:
    """Roofline-predicted fit.json of one model on one GPU spec (verdict 'predicted')."""
    from llmqueue.io import write_json
    from llmqueue.profiling.fits import roofline_fit_json

    write_json(
        roofline_fit_json(sm.wildcards.pmodel, sm.wildcards.gpu, sm.params.profiling), sm.output[0]
    )


def step_laws(sm: Any) -> None:
    """results/profiling/step_laws.csv: every config step_profiles entry resolved to its StepLaw."""
    import pandas as pd

    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import resolve_step_profile

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
