"""results/figures.tsv: the figure registry (target, study, plot module, caption, claims, files)."""

from llmqueue.io import write_text

sm = snakemake  # noqa: F821
columns = ["target", "study", "module", "caption", "claims", "outputs"]
lines = ["\t".join(columns), *("\t".join(map(str, row)) for row in sm.params.rows)]
write_text("\n".join(lines) + "\n", sm.output[0])
