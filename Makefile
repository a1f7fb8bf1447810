# llmqueue: `make reproduce` rebuilds the whole study, `make test` runs the tests.
# Both create .venv with python3 -m venv and install the exact pins first (skipped when the
# install stamp is newer than the pins and pyproject.toml).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.llmqueue-installed
CORES ?= all
# `make reproduce PROFILE=slurm` runs on a cluster through profiles/slurm instead of local cores.
PROFILE ?=
SNAKEMAKE := $(BIN)/snakemake $(if $(PROFILE),--profile profiles/$(PROFILE),--cores $(CORES)) --rerun-incomplete --printshellcmds
REPORT := results/report.html

# One target per figure of the paper: `make fig4a` rebuilds figures/fig4a_mg1_EW.{pdf,png} only.
fig = figures/$(1).pdf figures/$(1).png
FIG_fig2a := $(call fig,fig2a_time_token_line)
FIG_fig2b := $(call fig,fig2b_throughput)
FIG_table1 := figures/table1.csv figures/table1.md
FIG_fig3a := $(call fig,fig3a_EL_Hb)
FIG_fig3b := $(call fig,fig3b_miub)
FIG_fig4a := $(call fig,fig4a_mg1_EW)
FIG_fig4b := $(call fig,fig4b_mg1_EWqs)
FIG_fig4c := $(call fig,fig4c_mg1_pai)
FIG_fig4d := $(call fig,fig4d_tradeoff)
FIG_fig5 := $(call fig,fig5_junyun_llama) $(call fig,fig5_junyun_alpaca) $(call fig,fig5_junyun_chatglm)
FIG_fig6a := $(call fig,fig6a_fix_bsz)
FIG_fig6b := $(call fig,fig6b_dy_bmax)
FIGURE_TARGETS := fig2a fig2b table1 fig3a fig3b fig4a fig4b fig4c fig4d fig5 fig6a fig6b

.PHONY: reproduce report report-if-stale verify test install unlock clean-results $(FIGURE_TARGETS)

install: $(STAMP)

$(STAMP): envs/requirements.txt envs/requirements-profiling.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r envs/requirements.txt -r envs/requirements-profiling.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# Clear a stale lock (left by a killed run) only when no Snakemake runs in this directory.
unlock: $(STAMP)
	@$(BIN)/python workflow/scripts/unlock_if_stale.py --snakemake $(BIN)/snakemake

# The whole study, then the HTML report (rewritten only when an output or caption changed, so a
# run with nothing to do stays fast).
reproduce: $(STAMP) unlock
	$(SNAKEMAKE)
	@$(MAKE) --no-print-directory report-if-stale

# One self-contained HTML file: every figure with its caption, the claims, the notebooks and the
# provenance (git commit, config hash, package versions, hardware, per-rule runtimes).
report: $(STAMP) unlock
	$(BIN)/snakemake --report $(REPORT)
	@echo "report: $(REPORT)"

report-if-stale: $(STAMP)
	@if [ ! -f $(REPORT) ] || [ -n "$$(find results figures workflow/report -type f -newer $(REPORT) -print -quit 2>/dev/null)" ]; then \
	  $(BIN)/snakemake --report $(REPORT) && echo "report: $(REPORT)"; \
	else echo "report: $(REPORT) (up to date)"; fi

# Rebuild the study in a second directory and compare sha256 of every computed CSV in results/.
verify: $(STAMP) unlock
	$(BIN)/python workflow/scripts/verify_checksums.py --cores $(CORES)

test: $(STAMP)
	$(BIN)/python -m pytest

$(FIGURE_TARGETS): %: $(STAMP) unlock
	$(SNAKEMAKE) $(FIG_$*)

clean-results:
	rm -rf results logs
