# Shared by every rule file (the job environment, library dependencies, fit inputs, study targets,
# claim tables) and the figure registry (declare_figure; figures.smk makes its rules). It names
# no study: a study's own helpers live in its rule files (llmqueue.studies.STUDIES lists them).
import json
import os
import sys
from pathlib import Path

# The environment, set once for the whole workflow:
# - this Snakemake process and its jobs (and the notebooks' kernels) import this checkout's
#   llmqueue (sys.path here, PYTHONPATH for the jobs), whatever llmqueue the interpreter has
#   installed: also inside a conda env (--sdm conda), on a cluster node, or in the second build
#   directory of `make verify`;
# - PATH: `shell:` rules that call `python` get the interpreter running Snakemake (.venv), not
#   whatever `python` comes first on the caller's PATH (a conda env, activated for a job, still
#   comes first).
SRC = str(Path(workflow.basedir) / "src")
if SRC not in sys.path[:1]:
    sys.path.insert(0, SRC)
os.environ.update(
    PYTHONPATH=os.pathsep.join(p for p in [SRC, os.environ.get("PYTHONPATH", "")] if p),
    PATH=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    ),
)

from llmqueue.importgraph import graph as import_graph
from llmqueue.profiles import fit_json_path, setting_fit_paths
from llmqueue.studies import study as study_record

# Each study appends its final outputs (figures, tables, fits) and its claims CSV here.
STUDY_TARGETS = {}
CLAIM_TABLES = []
# The generated blocks of the documentation (docs.smk renders and splices them). A study declares
# its own in its .smk file as DOC_BLOCKS["<name>"] = doc_block("<kind>", inputs, **options),
# <kind> naming a render_<kind> function of its docs module (llmqueue.studies.Study.docs).
DOC_BLOCKS = {}
# the blocks of a study the config leaves out (its .smk file appends their names); their pages
# keep them as they are
DOC_SKIPPED = []


def doc_block(kind, inputs, **options):
    """One generated block: its renderer (llmqueue.docgen.RENDERERS), the files it is rendered
    from by role ({role: path | [paths] | {key: path}}) and the renderer's options."""
    return dict(kind=kind, inputs=inputs, options=options)


# The library code a job runs is derived from the import graph (llmqueue.importgraph, read once
# at parse time): a job depends on every library file its script imports, directly or not, so
# editing any of them reruns exactly the jobs that import it. No rule lists files by hand.
IMPORTS = import_graph(SRC)


def script_code(*scripts):
    """The library files that workflow/scripts/<script> (one or more) import, at any depth."""
    paths = [Path(workflow.basedir) / "workflow" / "scripts" / s for s in scripts]
    return IMPORTS.code_of(*paths, root=workflow.basedir)


def step_code(target):
    """The library files that running study step `target` ("package.module:function", through
    workflow/scripts/step.py) runs: the runner's, and the function's own (its module's top
    level and what the function imports, at any depth; ImportGraph.function_code)."""
    own = IMPORTS.function_code(target, root=workflow.basedir)
    return sorted(set(script_code("step.py")) | set(own))


def module_code(module):
    """The library files that importing `module` (e.g. llmqueue.cli) runs."""
    return IMPORTS.module_code(module, root=workflow.basedir)


def notebook_code(path):
    """The library files a notebook's code cells import, at any depth."""
    return IMPORTS.code_of(Path(workflow.basedir) / path, root=workflow.basedir)


def notebook_source(study):
    """A study's notebook before it runs: the committed notebooks/<study>.ipynb, or, for a study
    without one, the template's notebook (its package's docstring as its intro)."""
    committed = f"notebooks/{study}.ipynb"
    return (
        committed
        if Path(committed).is_file()
        else f"results/notebooks/source/{study}.ipynb"
    )


def notebook_source_code(study):
    """The library files a study's notebook imports: those of its source's code cells; for a
    source the template writes, those of a committed notebook's (every notebook has the
    template's code cells, only its introduction and parameters differ), whether or not it is
    written yet (an empty or stale one is never parsed)."""
    path = notebook_source(study)
    if not path.startswith("notebooks/"):
        path = min(str(p) for p in Path("notebooks").glob("*.ipynb"))
    return notebook_code(path)


def matrix_group_files(folder, group):
    """The committed files of a validation-matrix group folder the comparison reads: its JSON and
    calibration, and the request table and step log of every run its meta.json lists (judged
    runs and capacity bursts; llmqueue.studies.validation.matrix_spec.GROUP_FILES)."""
    from llmqueue.studies.validation.matrix_spec import GROUP_FILES, PROBE_FILE

    path = Path(folder) / group
    meta = path / "meta.json"
    runs = json.loads(meta.read_text())["runs"] if meta.is_file() else {}
    tables = [f"{kind}_{r}.csv" for r in runs for kind in ("requests", "steps")]
    probes = [PROBE_FILE] if (path / PROBE_FILE).is_file() else []
    return [str(path / n) for n in (*GROUP_FILES, *tables, *probes)]


def matrix_compare_params(section, engine):
    """The comparison settings of one engine's matrix (config validation.matrix_compare;
    MatrixCompareSettings.from_config)."""
    from llmqueue.studies.validation.matrix_spec import engine_section

    return engine_section(section, engine)


def matrix_results(matrices, engine, name):
    """results/validation/matrix/<engine>/<group>/<name> for every group of the engine."""
    return [
        f"results/validation/matrix/{engine}/{g}/{name}"
        for g in matrices[engine]["groups"]
    ]


def all_targets():
    return [t for targets in STUDY_TARGETS.values() for t in targets]


def fit_inputs(profile_cfg):
    """The fit.json a profile (latency or batch) of kind 'fit' is read from; none if fixed."""
    path = fit_json_path(profile_cfg)
    return [path] if path else []


# ---- the figure registry ------------------------------------------------------------------------
# Every figure and table of every study is declared once, by declare_figure in its study's rule
# file. From the registry come: the plot rule(s) and a target rule named after the figure
# (figures.smk; `make fig4d` forwards to it), the study's final outputs (rule all), the figures
# each study notebook shows, the claim numbers each caption's verdict lists, and the list
# `make figures` prints (results/figures.tsv).
FIGURES = {}


# the caption of a figure with no caption file of its own: its plot module's docstring
PLOT_CAPTION = "workflow/report/figure.rst"


def plot_docstring(module):
    """The docstring of plot module `module` (dotted, under src/), read without importing it."""
    import ast

    path = Path(workflow.basedir, "src", *module.split(".")).with_suffix(".py")
    if not path.is_file():
        path = path.with_suffix("") / "__init__.py"
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def declare_figure(
    target,
    *,
    study,
    claims=(),
    plot=None,
    plot_module=None,
    data=None,
    params=None,
    panels=None,
    category=None,
    outputs=None,
):
    """Register figure (or table) `target` (e.g. "fig4d"; also its make and Snakemake target).

    A plotted figure names its `plot`: the stem of its files (figures/<plot>.{pdf,png}) and, unless
    `plot_module` says otherwise, its plot module in its study's package (<package>/<plot>.py;
    `plot_module` in relative-import notation: ".x" for <package>/x.py, "." for the package itself);
    its caption is <package folder>/<plot>.rst, or without one the module's docstring through
    PLOT_CAPTION. It also names its
    `data`: {input name: path} (a dict; for `panels`, a
    function of the panel returning one). `params`: {name: value} passed to the plot, one value
    per key, so editing one config key reruns only the plots that read it (a function of the
    panel where it differs per panel). The library files the plot imports come from the import
    graph.
    `panels`: names of the panels drawn as separate files <plot>_<panel>.{pdf,png}.
    A table written by a study rule instead names its `outputs` (caption
    <package folder>/<target>.rst).
    `claims`: the paper's claim numbers (docs/figures.md) whose verdicts its caption shows.
    """
    if target in FIGURES:
        raise ValueError(f"figure {target!r} is declared twice")
    if (plot is None) == (outputs is None):
        raise ValueError(
            f"figure {target!r}: give a plot module or the outputs of a table"
        )
    if plot is None:
        stems = [target]
        files = list(outputs)
    else:
        stems = [f"{plot}_{p}" for p in panels] if panels else [plot]
        files = [f"figures/{s}.{ext}" for s in stems for ext in ("pdf", "png")]
    record = study_record(study)
    caption = f"{record.folder}/{plot or target}.rst"
    if plot is not None:
        plot_module = record.package + (
            f".{plot}" if plot_module is None else plot_module.rstrip(".")
        )
        if not (Path(workflow.basedir) / caption).is_file():
            # no caption file of its own: its plot module's docstring, through the shared caption
            caption = PLOT_CAPTION
    FIGURES[target] = {
        "target": target,
        "study": study,
        "claims": list(claims),
        "module": plot_module,
        "caption": caption,
        "data": data or {},
        "params": params or {},
        "panels": list(panels or []),
        "category": category or study,
        "stems": stems,
        "outputs": files,
    }
    STUDY_TARGETS.setdefault(study, []).extend(files)


def figures_of(study):
    """Stems of a study's figures and tables, in declaration order."""
    return [s for f in FIGURES.values() if f["study"] == study for s in f["stems"]]


def figure_claims():
    """{stem: claim numbers} of every figure whose caption shows verdicts."""
    return {s: f["claims"] for f in FIGURES.values() if f["claims"] for s in f["stems"]}


def study_claims(study):
    """The claim numbers a study's figures report (its notebook shows their rows)."""
    return sorted(
        {c for f in FIGURES.values() if f["study"] == study for c in f["claims"]}
    )


# ---- the plot rules of a registered figure (figures.smk)
def _plot_inputs(fig, panel):
    data = fig["data"](panel) if callable(fig["data"]) else fig["data"]
    code = sorted(set(script_code("plot_figure.py")) | set(module_code(fig["module"])))
    return dict(data, code=code)


def _plot_params(fig, panel):
    values = {k: (v(panel) if callable(v) else v) for k, v in fig["params"].items()}
    if panel is not None:
        values["panel"] = panel
    if fig["caption"] == PLOT_CAPTION:
        # the text PLOT_CAPTION shows (plot_figure.py drops it from the plot's params)
        values["caption"] = plot_docstring(fig["module"])
    return {"module": fig["module"], **values}
