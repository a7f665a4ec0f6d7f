# spikebench: `make sweep` runs the main job, `make test` the tests. Both install first.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel on this kind of machine; a machine whose python already has torch keeps its own.
TORCH_CPU := torch==2.13.0
ARGS ?=
SWEEP ?= sweeps/default.toml
STUDY ?= results/default

.PHONY: install test mutations sweep sweep-lr sweep-scale sweep-scale-stress sweep-scale-gpu precursors sweep-warning sweep-response sweep-cleaning bench report train lint clean example-report docs

install: $(STAMP)

$(STAMP): pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
	  if $(PY) -c "import torch" 2>/dev/null; then \
	    echo "using the torch of $(PY) (system site packages)"; \
	    $(PY) -m venv --system-site-packages $(VENV); \
	  else $(PY) -m venv $(VENV); fi; \
	fi
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q $(TORCH_CPU)
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

# Two passes: the tests on TEST_JOBS workers (pytest-xdist), then those marked serial, which
# judge measured timings, with nothing beside them. Exit status 5 is "none of ARGS's tests
# in this pass".
TEST_JOBS ?= 2
test: install
	$(BIN)/python -m pytest -n $(TEST_JOBS) -m "not serial" $(ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc
	$(BIN)/python -m pytest -m serial $(ARGS); rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ]

# Each named mutation of the package must make its guarding tests fail (tests/mutations.py).
mutations: install
	$(BIN)/python tests/mutations.py $(ARGS)

# The main job: run (or resume) the sweep, then write its report.
sweep: install
	$(BIN)/spikebench sweep $(SWEEP) $(ARGS)
	$(BIN)/spikebench report $(STUDY)

# The second scenario: spontaneous high-LR instability, LR sensitivity per strategy.
sweep-lr: install
	$(BIN)/spikebench sweep sweeps/lr-stability.toml $(ARGS)
	$(BIN)/spikebench report results/lr-stability

# The precursors' labelled set and its scorecard (docs/precursors.md): 36 runs in which
# spikes develop, a control (LR shock, bad batches) and spike-free runs, then each signal scored.
precursors: install
	$(BIN)/spikebench sweep sweeps/precursors.toml $(ARGS)
	$(BIN)/spikebench precursors results/precursors --json > results/precursors/scorecard.json
	$(BIN)/spikebench precursors results/precursors

# Does a strategy's effect transfer across model sizes? (docs/transfer.md) sweep-scale: the
# arms at three CPU sizes, 33x apart; sweep-scale-stress: the same at LR 0.3, where the
# largest breaks down; sweep-scale-gpu: at gpt-125m / 350m / 760m (CUDA).
sweep-scale: install
	$(BIN)/spikebench sweep sweeps/scale.toml $(ARGS)
	$(BIN)/spikebench report results/scale

sweep-scale-stress: install
	$(BIN)/spikebench sweep sweeps/scale-stress.toml $(ARGS)
	$(BIN)/spikebench report results/scale-stress

sweep-scale-gpu: install
	$(BIN)/spikebench sweep sweeps/scale-gpu.toml $(ARGS)
	$(BIN)/spikebench report results/scale-gpu

# Acting on the default early warning (lower the LR) against a rollback on the spike, where
# spikes come in clusters (docs/precursors.md).
sweep-warning: install
	$(BIN)/spikebench sweep sweeps/warning-response.toml $(ARGS)
	$(BIN)/spikebench report results/warning-response

# Responding to a spike: rollback, skip-step, ZClip vs fixed clipping, burst and LR shock.
sweep-response: install
	$(BIN)/spikebench sweep sweeps/response.toml $(ARGS)
	$(BIN)/spikebench report results/response
	$(BIN)/spikebench sweep sweeps/response-shock.toml $(ARGS)
	$(BIN)/spikebench report results/response-shock

# Cleaning the data: quality filters, MinHash dedup and the domain cap against a planted
# block of random bytes, of one repeated document and of another domain's text.
sweep-cleaning: install
	$(BIN)/spikebench sweep sweeps/cleaning.toml $(ARGS)
	$(BIN)/spikebench report results/cleaning
	$(BIN)/spikebench sweep sweeps/cleaning-repeat.toml $(ARGS)
	$(BIN)/spikebench report results/cleaning-repeat
	$(BIN)/spikebench sweep sweeps/cleaning-domain.toml $(ARGS)
	$(BIN)/spikebench report results/cleaning-domain

# Regression benchmarks: the CPU suite against benchmarks/baselines/cpu.json; exits 1 on a
# regression. ARGS="--update-baseline" records a new baseline, ARGS="--suite FILE" another.
bench: install
	$(BIN)/spikebench bench $(ARGS)

report: install
	$(BIN)/spikebench report $(STUDY) $(ARGS)

# The committed example report and the study it is written from, regenerated together: the
# default sweep in a temporary folder, then the files the report reads and the report.
EXAMPLE ?= reports/example-default
example-report: install
	tmp=$$(mktemp -d) && $(BIN)/spikebench sweep sweeps/default.toml --results $$tmp && \
	  $(BIN)/python -m spikebench.report.example $$tmp/default $(EXAMPLE) && rm -rf $$tmp

train: install
	$(BIN)/spikebench train $(ARGS)

lint: install
	$(BIN)/ruff check spikebench tests benchmarks

# The documentation site: the pages written from the code (the configuration reference, each
# command's --help, the public API, the layout), then `mkdocs build --strict` into site/
# (git-ignored). The docs extra is installed where MkDocs is missing.
docs: install
	@$(BIN)/python -c "import mkdocs, material" 2>/dev/null || $(BIN)/pip install -q -e '.[docs]'
	$(BIN)/python -m spikebench.doc_pages
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
