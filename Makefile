# nodescaler — every target bootstraps what it needs: a virtualenv from the hash-locked
# requirements/lock.txt and the CDK CLI pinned in package-lock.json.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_READY := $(VENV)/.ready
NODE_READY := node_modules/.ready
KUBECTL_READY := .tools/kubectl.ready
PROMETHEUS_READY := .tools/prometheus.ready
OTHER_CDK_READY := out/other-cdk/.ready
SCENARIO ?=
# The other aws-cdk-lib the construct's test synthesizes with (requirements/other-cdk.txt)
OTHER_CDK := $(shell sed -n 's/^aws-cdk-lib==\([0-9.]*\).*/\1/p' requirements/other-cdk.txt)
# The tests on every core (pytest-xdist), a file's tests on one worker: what a module makes
# once (a fault run, a server, the sandbox's runs, the templates) is made once. Files go in
# collection order, slowest suites first (tests/conftest.py), not xdist's by test count.
WORKERS ?= auto
PARALLEL := -n $(WORKERS) --dist loadfile --no-loadscope-reorder
# When this make began: `make test` ends with its wall time.
STARTED := $(shell date +%s)
# The Node.js LTS package.json pins, first on the PATH for the tests' in-process synths, as
# npx puts it first for `npx cdk`: jsii then runs on a supported Node and warns of nothing.
# Each target's output kept whole under -j (GNU make 4; the 3.81 of macOS has no such flag)
OUTPUT_SYNC := $(if $(filter 3.%,$(MAKE_VERSION)),,--output-sync=target)
TEST_ENV := PATH="$(CURDIR)/node_modules/.bin:$$PATH"

.DEFAULT_GOAL := help
.PHONY: help setup test test-fast lint synth demo bench mutate lock clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@printf "  make %-10s %s\n" "test-SUITE" "One suite of make test: $(SUITES)"

# What a user needs to run the demo and deploy; what only the tests need (kubectl, the other
# aws-cdk-lib) comes with make test.
setup: $(PY_READY) $(NODE_READY) $(PROMETHEUS_READY) ## Create .venv and node_modules from the lock files, fetch Debian's prometheus
	$(if $(filter setup,$(MAKECMDGOALS)),@echo "$(NEXT)")
NEXT := setup: done; next: make demo (the scenarios on a local sandbox, 4 to 12 min), then the README's Deploy
TEST_TOOLS := $(KUBECTL_READY) $(OTHER_CDK_READY)

$(PY_READY): requirements/lock.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("nodescaler needs Python 3.11+, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	@echo "setup: .venv with the $$(grep -c '==' requirements/lock.txt) Python packages pinned in requirements/lock.txt (2 to 8 minutes the first time, by how busy the machine is)"
	@start=$$SECONDS; $(PYTHON) -m venv $(VENV) \
		&& $(BIN)/pip install --quiet --require-hashes -r requirements/lock.txt \
		&& $(BIN)/pip install --quiet --no-deps --no-build-isolation -e . \
		&& echo "setup: .venv ready in $$((SECONDS - start)) s"
	@touch $@

$(NODE_READY): package.json package-lock.json
	@echo "setup: the CDK CLI pinned in package-lock.json, for synth and the stack's tests"
	@start=$$SECONDS; npm ci --no-audit --no-fund --loglevel=error \
		&& echo "setup: node_modules ready in $$((SECONDS - start)) s"
	@touch $@

# Another aws-cdk-lib than the lock's, apart in out/, for the construct's test in a user's app
$(OTHER_CDK_READY): requirements/other-cdk.txt | $(PY_READY)
	@echo "setup: aws-cdk-lib $(OTHER_CDK) apart in out/other-cdk, for the construct's test"
	@start=$$SECONDS; rm -rf out/other-cdk \
		&& $(BIN)/pip install --quiet --require-hashes --no-deps --target out/other-cdk -r $< \
		&& echo "setup: aws-cdk-lib $(OTHER_CDK) ready in $$((SECONDS - start)) s" && touch $@

# Debian's kubectl (its pinned version in that module) unpacked into .tools/, for the tests
# that check the loopback API server with it; where apt can't fetch it, those tests say how.
$(KUBECTL_READY): tools/nodescaler_sandbox/kube/kubectl.py | $(PY_READY)
	@echo "setup: Debian's kubectl unpacked into .tools/, for the tests against the API server"
	-@start=$$SECONDS; $(BIN)/python -m nodescaler_sandbox.kube.kubectl \
		&& echo "setup: kubectl ready in $$((SECONDS - start)) s" && touch $@

# Debian's Prometheus server (pinned in that module) unpacked into .tools/, for the tests
# and scenarios of the Prometheus metric; where apt can't fetch it, those tests say how.
$(PROMETHEUS_READY): tools/nodescaler_sandbox/prometheus.py | $(PY_READY)
	@echo "setup: Debian's Prometheus server unpacked into .tools/, for the demo and its tests"
	-@start=$$SECONDS; $(BIN)/python -m nodescaler_sandbox.prometheus \
		&& echo "setup: Prometheus ready in $$((SECONDS - start)) s" && touch $@

lint: $(PY_READY) ## ruff (lint + format check) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

SUITES := unit integration e2e faults infra sandbox tools
.PHONY: $(addprefix test-,$(SUITES))
$(addprefix test-,$(SUITES)): test-%: setup $(TEST_TOOLS)
	$(TEST_ENV) $(BIN)/pytest -q $(PARALLEL) -m $*

# Ends with the ten slowest tests and the wall time of the whole make test. Lint and the
# tests' own tools are made side by side: mypy keeps one core busy, the unpacking another.
test: setup ## Lint, type-check and run every test suite (~11 min; what CI runs)
	@$(MAKE) --no-print-directory -j2 $(OUTPUT_SYNC) lint $(TEST_TOOLS)
	@$(TEST_ENV) $(BIN)/pytest -q $(PARALLEL) --durations=10; status=$$?; \
		took=$$(( $$(date +%s) - $(STARTED) )); \
		echo "make test: $$((took / 60)) min $$((took % 60)) s wall time (lint, types, every suite)"; \
		exit $$status

# The pure core needs Python alone: no CDK CLI, kubectl or Prometheus to fetch first.
test-fast: $(PY_READY) ## The unit and property suites, tests/unit (~15 s)
	$(BIN)/pytest -q $(PARALLEL) tests/unit

synth: setup ## Synthesize the stack with the real CDK CLI (builds the layers, runs cdk-nag)
	$(TEST_ENV) npx cdk synth --quiet --no-notices --no-version-reporting

# The demo needs Python and the Prometheus server its Prometheus scenario scrapes, not the
# CDK CLI or kubectl.
demo: $(PY_READY) $(PROMETHEUS_READY) ## Run the scenarios on the local sandbox (SCENARIO=file.yaml for one, SEEDS=5 for five seeds)
	$(BIN)/nodescaler simulate$(if $(SCENARIO), $(SCENARIO))$(if $(SEEDS), --seeds $(SEEDS))

bench: setup ## Measure speed and memory; figures in out/bench/results.json
	$(BIN)/python -m nodescaler_bench

mutate: setup ## Mutation-test domain/ and the state claim (mutmut); the score in out/mutate
	$(BIN)/python -m nodescaler_bench.mutation

lock: ## Re-resolve requirements/lock.txt, then the Lambda layer's pins from it (needs the network)
	$(BIN)/pip install --quiet uv
	cd requirements && ../$(BIN)/uv pip compile ../pyproject.toml --extra dev --generate-hashes \
		--python-version 3.11 --universal -o lock.txt
	for layer in deps kubernetes; do (cd layers/$$layer && ../../$(BIN)/uv pip compile \
		requirements.in -c ../../requirements/lock.txt --generate-hashes --python-version 3.14 \
		--python-platform aarch64-manylinux2014 --no-header -o requirements.txt) || exit 1; done

clean: ## Remove generated outputs (out/, cdk.out/)
	rm -rf out cdk.out .pytest_cache .mypy_cache .ruff_cache
