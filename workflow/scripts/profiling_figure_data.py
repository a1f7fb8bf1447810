"""Fig. 2a / 2b data, the composition check and Table I (figures/table1.{csv,md})."""

from pathlib import Path

import pandas as pd

from llmqueue.io import read_json, write_csv, write_text
from llmqueue.profiling.fits import hardware_label, read_measured
from llmqueue.profiling.tables import (
    composition_frame,
    fig2a_data,
    fig2b_data,
    table1_frame,
    table1_markdown,
)

sm = snakemake  # noqa: F821
prof = sm.params.profiling
table1 = pd.read_csv(sm.input.table1)
paper_fit = read_json(sm.input.paper_fit)
roof = [read_json(p) for p in sm.input.roofline]
mfits = [read_json(p) for p in sm.input.measured]
data = {hw: read_measured(Path(f"data/profiling/{hw}")) for hw in sm.params.measured}
by_hw = {hw: [f for f in mfits if f["source"] == hw] for hw in data}

pts, lines = fig2a_data(
    table1,
    paper_fit,
    roof,
    {hw: (d[1], d[2], by_hw[hw]) for hw, d in data.items()},
    int(prof["fig2a"]["max_output_tokens"]),
)
write_csv(pts, sm.output.fig2a_points)
write_csv(lines, sm.output.fig2a_lines)
pts, lines = fig2b_data(
    roof,
    {hw: (d[0], d[2], by_hw[hw]) for hw, d in data.items()},
    prof,
    prof["roofline"]["batch_gpu_for_fig5"],
)
write_csv(pts, sm.output.fig2b_points)
write_csv(lines, sm.output.fig2b_lines)
write_csv(
    composition_frame({hw: (d[0], d[1]) for hw, d in data.items()}, prof["models"]),
    sm.output.composition,
)

llama = {hw: next(f for f in fits if f["model"] == "llama2-7b-chat") for hw, fits in by_hw.items()}
t1 = table1_frame(table1, roof, prof, {hw: (data[hw][0], llama[hw]) for hw in data})
write_csv(t1, sm.output.table1_csv)
notes = [
    "paper_a100_s: the paper's Table I (LLaMA-2-7B-chat, NVIDIA A100; (128, 512) appears twice, as in the paper).",
    "roofline-<gpu>_predicted_s: PREDICTED by the roofline (fp16 weights read once per token, KV cache read; no "
    "framework overhead), a lower bound, never a measurement; T = t1 + sum of n - 1 decode steps.",
]
for hw, f in llama.items():
    lab = hardware_label(data[hw][2])
    d = f.get("depth", {})
    if d:
        depth = (
            f"depth check at batch {d['batch']}, input {d['input_tokens']}, layers {d['layers']}: max relative "
            f"residual t1 {d['t1']['max_rel_residual']:.0%}, t2 {d['t2']['max_rel_residual']:.0%} (tolerance "
            f"{d['tolerance']:.0%}); "
            + (
                f"extrapolated to full depth: {f['full_depth']['method']}"
                if d["linear_ok"]
                else "time NOT linear in layers within tolerance on this shared machine, so no full-depth "
                "extrapolation is given (n/a)"
            )
        )
    else:
        depth = "full depth"
    notes.append(
        f"{hw}_*: {lab}, random-weight model, {f['layers']} of {f['full_layers']} layers, composed as "
        f"T = t1(s) + (n - 1) t2(s) from short decodes at batch 1; {depth}. A CPU never stands in for the A100."
    )
write_text(table1_markdown(t1, notes), sm.output.table1_md)
