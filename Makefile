# dprelease — `make run` (release flow on the bundled OSHA data), `make test` (the test suite).
# Both create the virtual environment on first use. Nothing is downloaded at run time.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Prefect settings live in prefect.toml; the offline switches in src/dprelease/offline.py.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION := false
MLFLOW_URI ?= sqlite:///mlflow.db

.PHONY: env run compare audit tune tune-grid retrain simulate ledger serve serve-trigger serve-status serve-stop test \
        gpp test-fast faults repro rotate-key ui screenshots bench clean

env: $(STAMP)

# torch first and pinned: an unpinned torch would pull several GB of CUDA packages.
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

run: env
	$(PY) -m flows.release $(ARGS)

compare: env
	$(PY) -m flows.compare $(ARGS)

audit: env
	$(PY) -m flows.audit $(ARGS)

# NVDP (issue 11): token-state cache, GLUE + OSHA grids, probe, sanitizer release-nvdp/ -> reports/nvdp/
.PHONY: nvdp
nvdp: env
	$(PY) -m flows.nvdp $(ARGS)

tune: env
	$(PY) -m flows.tune --mode search $(ARGS)

tune-grid: env
	$(PY) -m flows.tune --mode grid $(ARGS)

# Gaussian Privacy Protector (issue 12): digits + OSHA, centralized and on Flower → reports/gpp/, release-gpp/
gpp: env
	$(PY) -m flows.gpp $(ARGS)

# a new extract: `make retrain SNAPSHOT=path/to/extract.csv`; three growing EventDate windows: `make simulate`
retrain: env
	$(PY) -m flows.retrain $(SNAPSHOT) $(ARGS)

simulate: env
	$(PY) -m flows.retrain --simulate $(ARGS)

# the privacy ledger's per-version figures (aggregates only): ε, records, published, overlaps, cumulative ε now
ledger: env
	$(PY) -m flows.retrain --ledger

# a Prefect server on 127.0.0.1 (database in .prefect/), work pools, the scheduled deployment and a worker
serve: env
	$(PY) -m flows.serve start

serve-trigger: env
	$(PY) -m flows.serve trigger

serve-status: env
	$(PY) -m flows.serve status

serve-stop: env
	$(PY) -m flows.serve stop

test: env
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: env
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# the fault-injection suite alone (also part of `make test`), one line per case
faults: env
	$(PY) -m pytest tests/flows/test_faults.py -v $(PYTEST_ARGS)

# the signing stages list the agency's public key as an input: make it (once) before DVC checks inputs
repro: env
	source $(VENV)/bin/activate && dprelease key init && dvc repro

# key rotation, one command: retire the agency key, make a new one, re-sign the release folders
rotate-key: env
	$(VENV)/bin/dprelease key rotate $(ARGS)

# MLflow 3.17 opens on its GenAI view unless the URL asks for model training: the printed link does
ui: env
	@$(PY) -c "import sqlite3; r = sqlite3.connect('mlflow.db').execute(\"select experiment_id from experiments where name='dprelease'\").fetchone(); print('open http://127.0.0.1:5000/#/experiments/%s/runs?workflowType=machine_learning' % (r[0] if r else '0'))" 2>/dev/null || true
	$(VENV)/bin/mlflow ui --backend-store-uri $(MLFLOW_URI) --workers 1

# headless Chromium (apt-get install chromium) screenshots of the runs table and the newest run → reports/ui/
screenshots: env
	$(PY) scripts/mlflow_screenshots.py $(ARGS)

bench: env
	$(PY) benchmarks/bench_release.py
	$(PY) benchmarks/bench_epsilon.py
	$(PY) benchmarks/bench_dpsgd.py
	$(PY) benchmarks/bench_flows.py compare
	$(PY) benchmarks/bench_flows.py tune-grid
	$(PY) benchmarks/bench_audit.py

clean:
	rm -rf artifacts release release-selected release-gpp metrics plots reports runs .prefect mlflow.db mlartifacts \
	       .dprelease.lock .mlflow.lock .mlflow-pending.json
