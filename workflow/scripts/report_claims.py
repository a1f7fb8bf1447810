"""Render results/claims.csv for the report: an HTML table, an RST summary for the report's
front page and one RST verdict snippet per figure (included by its caption).

Robust to what is not there yet: a study without claim rows gets a line saying so, and columns
beyond the standard ones are shown as they come.
"""

import html
import re
from pathlib import Path

import pandas as pd

from llmqueue.claims import CLAIM_COLUMNS as COLUMNS
from llmqueue.io import write_text

sm = snakemake  # noqa: F821
COLOURS = {
    "reproduced": "#d8f0d8",
    "not_reproduced": "#f6d5d5",
    "conditional": "#dde8f6",
    "back_solved": "#f8ecc8",
}


def claim_number(claim_id: str) -> int | None:
    m = re.match(r"\s*(\d+)", str(claim_id))
    return int(m.group(1)) if m else None


def rst_text(value: object) -> str:
    """One table cell as plain RST text: escape inline markup, keep it on one line."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    text = " ".join(str(value).split())
    return re.sub(r"([\\*`|_])", r"\\\1", text)


def list_table(rows: pd.DataFrame, columns: list[str], title: str) -> str:
    lines = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    lines.append("   * - " + "\n     - ".join(columns))
    for _, row in rows.iterrows():
        cells = [rst_text(row.get(c, "")) or "--" for c in columns]
        lines.append("   * - " + "\n     - ".join(cells))
    return "\n".join(lines) + "\n"


claims = pd.read_csv(sm.input.claims, dtype=str, keep_default_na=False)
columns = [c for c in COLUMNS if c in claims.columns] + [
    c for c in claims.columns if c not in COLUMNS
]
claims["_number"] = [claim_number(i) for i in claims.get("id", pd.Series(dtype=str))]
verdicts = claims["verdict"].value_counts() if "verdict" in claims else pd.Series(dtype=int)
counts = ", ".join(f"{n} {v}" for v, n in verdicts.items()) or "no rows yet"

# Per-figure verdict snippets.
short = [
    c for c in ["id", "claim", "paper", "ours", "unit", "verdict", "scope", "note"] if c in columns
]
for stem, numbers in sm.params.figure_claims.items():
    out = next(p for p in sm.output.verdicts if Path(p).name == f"verdict_{stem}.rst")
    rows = claims[claims["_number"].isin(numbers)]
    wanted = ", ".join(str(n) for n in numbers)
    if rows.empty:
        text = (
            f"No rows for claim {wanted} in ``results/claims.csv`` yet: the study that "
            "computes them has not registered its claims table.\n"
        )
    else:
        tally = rows["verdict"].value_counts() if "verdict" in rows else pd.Series(dtype=int)
        text = f"Claim {wanted}: " + ", ".join(f"{n} {v}" for v, n in tally.items()) + ".\n\n"
        text += list_table(rows, short, f"Claims {wanted} (paper vs ours)")
    write_text(text, out)

# Front-page summary (included by workflow/report/workflow.rst).
summary = f"Claims table: {len(claims)} rows ({counts}).\n\n"
if not claims.empty:
    summary += list_table(claims, columns, "Every claim of the paper beside our number")
write_text(summary, sm.output.summary)

# The claims as one Markdown table (results/claims.md; docs/results.md carries its generated copy).


def md_cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


md = [f"Claims: {len(claims)} rows ({counts}); source `results/claims.csv`.", ""]
if not claims.empty:
    md.append("| " + " | ".join(columns) + " |")
    md.append("|" + "---|" * len(columns))
    for _, row in claims.iterrows():
        md.append("| " + " | ".join(md_cell(row.get(c, "")) for c in columns) + " |")
write_text("\n".join(md) + "\n", sm.output.markdown)

# Stand-alone HTML table.
head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
body = []
for _, row in claims.iterrows():
    colour = COLOURS.get(str(row.get("verdict", "")), "#ffffff")
    cells = "".join(f"<td>{html.escape(str(row.get(c, '')))}</td>" for c in columns)
    body.append(f'<tr style="background:{colour}">{cells}</tr>')
page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>llmqueue claims</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
th, td {{ border: 1px solid #bbb; padding: 0.3em 0.5em; vertical-align: top; }}
th {{ background: #eee; }}
</style></head><body>
<h1>The paper's claims beside the rebuilt numbers</h1>
<p>{html.escape(counts)}. Verdicts: <b>reproduced</b> (independent inputs, within the tolerance
fixed in config), <b>not_reproduced</b> (the note gives the reason), <b>back_solved</b> (a
parameter was chosen to hit this number). Source: <code>results/claims.csv</code>.</p>
<table><thead><tr>{head}</tr></thead><tbody>
{chr(10).join(body)}
</tbody></table></body></html>
"""
write_text(page, sm.output.table)
