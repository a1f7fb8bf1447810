"""Provenance of a build: git commit, config hash, package versions, hardware, the committed
profiling data's hardware, per-rule runtimes (Snakemake `benchmark:` files under
logs/benchmarks/) and the sha256 of every output shown in the report.
"""

import csv
import hashlib
import html
import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from llmqueue.io import write_json, write_text

sm = snakemake  # noqa: F821
KEY_PACKAGES = [
    "llmqueue",
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "numpy",
    "scipy",
    "pandas",
    "numba",
    "matplotlib",
    "seaborn",
    "papermill",
    "nbconvert",
    "torch",
    "transformers",
]


def run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def gpus() -> list[str]:
    if not shutil.which("nvidia-smi"):
        return []
    out = run(
        ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    )
    return [line.strip() for line in out.splitlines() if line.strip()]


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def benchmarks(root: Path) -> list[dict]:
    rows = []
    for path in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        try:
            with path.open() as fh:
                records = list(csv.DictReader(fh, delimiter="\t"))
        except (OSError, csv.Error):
            continue
        for rec in records[-1:]:
            rows.append(
                {
                    "job": str(path.relative_to(root).with_suffix("")),
                    "seconds": float(rec.get("s", "nan") or "nan"),
                    "max_rss_mb": rec.get("max_rss", ""),
                    "cpu_time_s": rec.get("cpu_time", ""),
                }
            )
    return rows


def profiling_meta() -> list[dict]:
    found = []
    for path in sorted(Path("data/profiling").glob("*/meta.json")):
        try:
            meta = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        found.append(
            {"path": str(path), **{k: v for k, v in meta.items() if not isinstance(v, dict | list)}}
        )
    return found


commit = sm.params.commit
dirty = run(["git", "status", "--porcelain", "--untracked-files=no"]) if commit != "unknown" else ""
prov = {
    "generated_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "git_commit": commit,
    "git_tracked_changes": bool(dirty),
    "config_file": sm.input.config,
    "config_sha256": sm.params.config_sha256,
    "python": sys.version.split()[0],
    "packages": {name: version(name) for name in KEY_PACKAGES},
    "all_packages": sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()),
    "hardware": {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": memory_gib(),
        "gpus": gpus(),
    },
    "profiling_data": profiling_meta(),
    "rule_runtimes": benchmarks(Path(sm.params.benchmarks_dir)),
    "outputs": {p: sha256(p) for p in sorted(set(sm.input)) if Path(p).is_file()},
}
write_json(prov, sm.output.json)


def table(rows: list[list[str]], head: list[str]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


hw = prov["hardware"]
sections = [
    "<h2>Build</h2>",
    table(
        [
            [
                "git commit",
                commit + (" (with uncommitted changes to tracked files)" if dirty else ""),
            ],
            ["config", f"{prov['config_file']} (sha256 {prov['config_sha256']})"],
            ["generated (UTC)", prov["generated_utc"]],
            ["python", prov["python"]],
        ],
        ["item", "value"],
    ),
    "<h2>Hardware of this build</h2>",
    table(
        [
            ["platform", hw["platform"]],
            ["CPU", f"{hw['cpu']} ({hw['logical_cpus']} logical CPUs)"],
            ["memory", f"{hw['memory_gib']} GiB"],
            ["GPUs", ", ".join(hw["gpus"]) or "none visible"],
        ],
        ["item", "value"],
    ),
    "<h2>Committed profiling data (measured elsewhere)</h2>",
    table(
        [
            [m.get("path", ""), json.dumps({k: v for k, v in m.items() if k != "path"})]
            for m in prov["profiling_data"]
        ],
        ["meta.json", "fields"],
    )
    if prov["profiling_data"]
    else "<p>None committed under data/profiling/.</p>",
    "<h2>Package versions</h2>",
    table([[k, v] for k, v in prov["packages"].items()], ["package", "version"]),
    "<details><summary>All installed distributions</summary><pre>"
    + html.escape("\n".join(prov["all_packages"]))
    + "</pre></details>",
    "<h2>Per-rule runtime (Snakemake benchmark files, logs/benchmarks/)</h2>",
    table(
        [
            [r["job"], f"{r['seconds']:.2f}", r["max_rss_mb"], r["cpu_time_s"]]
            for r in prov["rule_runtimes"]
        ],
        ["job", "wall s", "max RSS (MB)", "CPU s"],
    )
    if prov["rule_runtimes"]
    else "<p>No benchmark files yet.</p>",
    "<h2>Outputs (sha256)</h2>",
    table([[p, h] for p, h in prov["outputs"].items()], ["file", "sha256"]),
]
page = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>llmqueue provenance</title>'
    "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:.9em}"
    "th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left}th{background:#eee}</style>"
    "</head><body><h1>How these numbers were made</h1>" + "\n".join(sections) + "</body></html>\n"
)
write_text(page, sm.output.html)
