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

sm = snakemake  # noqa: F821
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

llama = {hw: next(f for f in fits if f["model"] == "llama2-7b-chat") for hw, fits in by_hw.items()}
t1 = table1_frame(table1, roof, prof, {hw: (data[hw][0], llama[hw]) for hw in data}, kprof)
write_csv(t1, sm.output.table1_csv)
labels = {hw: hardware_label(data[hw][2]) for hw in data}
gpu = {hw: is_gpu_source(data[hw][2]) for hw in data}
notes = table1_notes(
    llama, labels, {n: f for n, f in kfits.items() if f["model"] == "llama2-7b-chat"}, gpu
)
write_text(table1_markdown(t1, notes), sm.output.table1_md)
