# dprelease — `make run` (release flow on the bundled OSHA data), `make test` (the test suite).
# Both create the virtual environment on first use. Nothing is downloaded at run time.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Prefect settings live in prefect.toml; the offline switches in src/dprelease/core/offline.py.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION := false
MLFLOW_URI ?= sqlite:///mlflow.db
MODEL ?= oiics-autocoder

.DEFAULT_GOAL := help

.PHONY: help env run compare audit tune tune-grid retrain simulate ledger serve serve-trigger serve-status serve-stop lint test \
        gpp test-fast test-durations faults audit-tight repro rotate-key ui serve-model screenshots bench clean chromium dvc-remote dag exps \
        epsilon-sensitivity flow results audit-replay frontier

help:  ## this list
	@echo "make TARGET — dprelease (README: what each does; ARGS=... passes options to a flow)"
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)$$/  \1\t\2/' | expand -t 18

env: $(STAMP)  ## create .venv and install the pinned requirements (run by every target that needs it)

# torch first and pinned: an unpinned torch would pull several GB of CUDA packages.
$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

run: env  ## the release flow on the bundled OSHA data (ARGS=... for flows.release options)
	$(PY) -m flows.release $(ARGS)

compare: env  ## SWAG-PPM vs non-private training vs DP-SGD → reports/compare/
	$(PY) -m flows.compare $(ARGS)

audit: env  ## membership-inference and canary privacy audit of every arm → reports/privacy/
	$(PY) -m flows.audit $(ARGS)

# the frontier: utility against ε for every mechanism at declared levels, chosen on validation (docs/frontier.md)
frontier: env  ## the honest frontier (every mechanism, declared ε grid, ≥ 3 secret seeds) → reports/frontier/
	$(PY) -m flows.run frontier $(ARGS)

# the replay audit: the standard adversary (public seed, D∖{x}) re-fits the released mechanism; the operator's view
audit-replay: env  ## replay audit of the release (the standard adversary re-fits it) → metrics/audit_replay.json
	$(PY) -m flows.run audit-replay $(ARGS)

# the tight multi-run audit (a benchmark, not in `make test`): 120,000 DP-SGD runs with or without one
# gradient canary, the planted bugs; needs the training embeddings (make run or make audit first)
audit-tight: env  ## tight multi-run audit of DP-SGD and the planted bugs → reports/privacy_tight/ (+ audit.csv)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) benchmarks/audit_tight.py $(ARGS)

# NVDP (issue 11): token-state cache, GLUE + OSHA grids, probe, sanitizer release-nvdp/ -> reports/nvdp/
.PHONY: nvdp
nvdp: env  ## NVDP experiments (GLUE + OSHA grids), sanitizer release → reports/nvdp/
	$(PY) -m flows.nvdp $(ARGS)

# any plug-in's flow by name (the stage graph gives its order): make flow FLOW=gpp; `make flow` lists them
flow: env  ## a plug-in's flow by name, from the stage graph: make flow FLOW=NAME (no FLOW: the list)
	$(PY) -m flows.run $(if $(FLOW),$(FLOW),--list) $(ARGS)

tune: env  ## diagnostic-driven search over c and fine-tuning epochs → reports/tune/
	$(PY) -m flows.tune --mode search $(ARGS)

tune-grid: env  ## the full (c, epochs) grid → reports/tune/
	$(PY) -m flows.tune --mode grid $(ARGS)

# Gaussian Privacy Protector (issue 12): digits + OSHA, centralized and on Flower → reports/gpp/, release-gpp/
gpp: env  ## Gaussian Privacy Protector, centralized and on Flower → reports/gpp/
	$(PY) -m flows.gpp $(ARGS)

# a new extract: `make retrain SNAPSHOT=path/to/extract.csv`; three growing EventDate windows: `make simulate`
retrain: env  ## one retrain on a new extract: make retrain SNAPSHOT=path/to/extract.csv
	$(PY) -m flows.retrain $(SNAPSHOT) $(ARGS)

simulate: env  ## three retrains on growing EventDate windows of the bundled data
	$(PY) -m flows.retrain --simulate $(ARGS)

# the privacy ledger's per-version figures (aggregates only): ε, records, published, overlaps, cumulative ε now
ledger: env  ## the privacy ledger's per-version figures (aggregates only)
	$(PY) -m flows.retrain --ledger

# a Prefect server on 127.0.0.1 (database in .prefect/), work pools, the scheduled deployment (a run due while one
# runs is cancelled, not queued), the current release registered in MLflow (once), then a worker
serve: env  ## Prefect server on 127.0.0.1, work pools, the scheduled deployment, the current release registered, a worker (CRON="0 3 * * 1" for another schedule)
	$(PY) -m flows.serve start $(if $(CRON),--cron "$(CRON)")

serve-trigger: env  ## run the scheduled retrain now and wait for it
	$(PY) -m flows.serve trigger

serve-status: env  ## the serving processes and the scheduled deployment's runs by state
	$(PY) -m flows.serve status

serve-stop: env  ## stop the worker, the server and the model server (make serve-model) by PID
	$(PY) -m flows.serve stop

# the MLflow UI test renders the runs table in headless Chromium: installed here when missing and possible
# (root with apt-get), else that one test is skipped with the reason
chromium:  ## install headless Chromium for the MLflow UI test when missing (root + apt-get)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	    { apt-get update -q >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; } || \
	  echo "note: no Chromium (apt-get install -y chromium chromium-driver): the MLflow UI test will be skipped"

# the suite in TEST_WORKERS processes (pytest-xdist), each module's tests in one of them, the longest modules
# first (tests/longest_first.py); one torch thread each, so the workers do not fight over the cores. Three on
# two cores: the served-retrain tests spend a minute or two waiting for a cron's minute and for servers, and
# a third process keeps both cores busy meanwhile (docs/benchmarks.md, "The test suite")
TEST_WORKERS ?= 3
XDIST = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
lint: env  ## ruff: the format (120 columns) and the lint (pyflakes, syntax, sorted absolute imports); `make test` runs it first
	$(PY) -m ruff format --check --no-cache .
	$(PY) -m ruff check --no-cache .

test: env chromium lint  ## the whole test suite, after the linter (PYTEST_ARGS=... for pytest options)
	OMP_NUM_THREADS=1 $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: env  ## the test suite without the end-to-end tests marked slow
	OMP_NUM_THREADS=1 $(PY) -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

test-durations: env chromium  ## the whole suite, recording each module's seconds for the order (tests/durations.json)
	OMP_NUM_THREADS=1 $(PY) -m pytest $(XDIST) --record-durations $(PYTEST_ARGS)

# the fault-injection suite alone (also part of `make test`), one line per case
faults: env  ## the fault-injection suite alone, one line per case
	$(PY) -m pytest tests/flows/test_faults.py tests/flows/test_faults_kill.py -v $(PYTEST_ARGS)

# DVC's default remote for this clone (.dvc/config.local, not committed): a private local folder, owner-only;
# `make dvc-remote DVC_REMOTE=/srv/office/dvc` for another. Retrains push their snapshots there; `dvc push`
# sends the release pipeline's data and moments (what `make run` recorded in dvc.lock), `dvc pull` brings them
# into another clone. The randomness key is never in it (the `secret` stage's output is cache: false).
DVC_REMOTE ?= $(HOME)/.local/share/dprelease/dvc-remote
dvc-remote: env  ## DVC's default remote: a private local folder (DVC_REMOTE=path to choose another)
	mkdir -p "$(DVC_REMOTE)" && chmod 700 "$(DVC_REMOTE)"
	$(VENV)/bin/dvc remote add --local --default --force private "$(DVC_REMOTE)"
	@test -n "$$(ls -A "$(DVC_REMOTE)")" || echo "note: $(DVC_REMOTE) is empty: dvc pull needs the remote dvc.lock's outputs were pushed to (DVC_REMOTE=that folder) and the keys (dprelease key import-private; docs/operations.md)"

dag: env  ## the DVC pipeline (dvc.yaml) as a Mermaid flowchart (dvc dag --md; the ASCII drawing is ~550 columns)
	$(VENV)/bin/dvc dag --md

# the headline columns only (metrics/headline.json: ε, its interval, T̂, F1s, records) and ppm.c; `release` stays
# because DVC 3.67 fails dropping two columns of one name (the `release` param and the `release` folder input)
exps: env  ## DVC experiments side by side: ppm.c, ε and the weighted/macro F1 (dvc exp show --md, headline columns)
	$(VENV)/bin/dvc exp show --md --drop \
	  '^(?!Experiment$$|ppm\.c$$|release$$|metrics/headline\.json:|epsilon_ci_|weighted_f1$$|macro_f1$$|temperature$$|records$$).*'

# the signing stages list the agency's public key as an input: make it (once) before DVC checks inputs
repro: env  ## dvc repro: every stage of dvc.yaml (makes the agency's signing key first if missing; NEW_KEY=1: accept new keys)
	source $(VENV)/bin/activate && dprelease key init $(if $(NEW_KEY),--new-key) && \
	  $(if $(NEW_KEY),DPRELEASE_NEW_KEY=1) dvc repro

rotate-key: env  ## key rotation, one command: retire the agency signing key, make a new one, re-sign the releases
	$(VENV)/bin/dprelease key rotate $(ARGS)

# MLflow's UI with first-visit defaults (src/dprelease/pipeline/mlflow_app.py): the model-training view, the headline
# figures (ε, F1, …) as runs-table columns, no assistant panel
ui: env  ## the MLflow UI on 127.0.0.1:5000, opening on the model-training view with ε and F1 columns
	@echo "open http://127.0.0.1:5000 (experiment dprelease: its runs table shows ε and F1)"
	$(VENV)/bin/mlflow ui --backend-store-uri $(MLFLOW_URI) --workers 1 --app-name dprelease

# the production model over HTTP (port 5001): MLflow's scoring server (models serve's app, in this environment)
# behind a front that bounds each request (MAX_BATCH narratives, default 1000: above, HTTP 413 in one line) and takes
# {"inputs": [strings]} too; POST JSON to /invocations; its pid in .prefect/serve/model.json (make serve-stop).
# First, one line: the registry holds the model (else what to run first) and its release's signature checks out,
# with the agency's own public key pinned (DPRELEASE_AGENCY_KEY, unless already set; DPRELEASE_NO_SIGNATURE_CHECK=1 skips)
AGENCY_KEY ?= $(wildcard $(abspath artifacts/keys/agency.pub))
SERVE_ENV = MLFLOW_TRACKING_URI=$(MLFLOW_URI) $(if $(AGENCY_KEY),DPRELEASE_AGENCY_KEY="$${DPRELEASE_AGENCY_KEY:-$(AGENCY_KEY)}")
serve-model: env  ## the production model over HTTP on 127.0.0.1:5001 (MLflow's scoring server; MAX_BATCH=N narratives per request)
	@$(SERVE_ENV) MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false $(PY) -m dprelease.pipeline.service.pyfunc_model "models:/$(MODEL)@production"
	$(SERVE_ENV) MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false $(PY) -m dprelease.pipeline.service.model_server \
	    "models:/$(MODEL)@production" --host 127.0.0.1 --port 5001 $(if $(MAX_BATCH),--max-batch $(MAX_BATCH))

# headless Chromium (apt-get install chromium) screenshots of the runs table, the newest run and the registry
# → reports/ui/
screenshots: env  ## headless-Chromium screenshots of the MLflow UI → reports/ui/
	$(PY) scripts/mlflow_screenshots.py $(ARGS)

epsilon-sensitivity: env  ## ε over a grid of SWAG lr × prior λ × seeds (+ rank, epochs) → reports/epsilon_sensitivity/ (after make run; ~30 min)
	$(PY) benchmarks/epsilon_sensitivity.py $(ARGS)

results: env  ## the result tables, rendered from metrics/ and reports/ → docs/results.md (ARGS="--root DIR --out FILE")
	$(PY) -m dprelease.compare.reports.results $(ARGS)

bench: env  ## the benchmark scripts (speed figures)
	$(PY) benchmarks/bench_release.py
	$(PY) benchmarks/bench_epsilon.py
	$(PY) benchmarks/bench_dpsgd.py
	$(PY) benchmarks/bench_flows.py compare
	$(PY) benchmarks/bench_flows.py tune-grid
	$(PY) benchmarks/bench_audit.py
	$(PY) benchmarks/bench_embed.py

clean:  ## remove every output (artifacts, releases, reports, runs, .prefect, mlflow.db, mlartifacts)
	rm -rf artifacts release release-selected release-gpp metrics plots reports runs .prefect mlflow.db mlartifacts \
	       .dprelease.lock .mlflow.lock .mlflow-pending.json
