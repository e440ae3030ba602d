# iclr25 — the README documents two commands: `make check` (the main job) and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BUDGET ?= full
JOBS   ?= 1
METHODS ?=
FRESH  ?=
ARGS   ?=
REPORT ?= $(lastword $(sort $(wildcard reports/*)))

LOCK   := requirements.lock
KVPRESS := kvpress==0.5.5
KVPRESS_IMPORTS := datasets==5.2.0 cachetools==5.5.2 fire==0.6.0

.PHONY: setup check test lint format report lock clean

setup: $(STAMP)  ## build .venv with the pinned torch, then the package with every extra, at the locked versions

# Re-run only when the project's dependencies change (the stamp is newer than pyproject.toml or the lock).
# Every package is installed at the exact version requirements.lock records (`make lock` regenerates it).
$(STAMP): pyproject.toml $(LOCK) Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(BIN)/python -m pip install -q -c $(LOCK) -e '.[all,dev]'
	@# kvpress declares transformers<5.3; its presses run against the pinned transformers (a test checks),
	@# so it installs without its own pins, next to the packages it imports at load time
	$(BIN)/python -m pip install -q -c $(LOCK) $(KVPRESS_IMPORTS)
	$(BIN)/python -m pip install -q --no-deps $(KVPRESS)
	@# gense synthesises its speech with espeak-ng (a Debian package); without it, its tests skip
	@if command -v espeak-ng >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		(apt-get install -y -q espeak-ng || (apt-get update -q && apt-get install -y -q espeak-ng)) >/dev/null 2>&1 \
			|| echo "apt-get could not install espeak-ng: gense's speech tests will skip"; \
	else echo "espeak-ng not found (Debian: sudo apt-get install espeak-ng): gense's speech tests will skip"; fi
	@touch $(STAMP)

# Resumes the newest unfinished run of this budget (same commit) unless FRESH=1; METHODS="pal ftct" selects.
check: setup  ## run every claim at the full budget and write reports/<run-id>/
	$(BIN)/iclr25 check $(if $(strip $(METHODS)),$(METHODS),--all) --budget $(BUDGET) --jobs $(JOBS) \
		$(if $(FRESH),,--resume latest) $(ARGS)

test: setup  ## unit, contract and CLI tests, every claim at the smoke budget; the GPU suite where there is a GPU
	$(BIN)/python -m pytest -q
	$(BIN)/python -m pytest -q -m gpu tests/test_gpu.py

lint: setup
	$(BIN)/ruff check src tests experiments
	$(BIN)/ruff format --check src tests experiments

format: setup
	$(BIN)/ruff format src tests experiments
	$(BIN)/ruff check --fix src tests experiments

report: setup  ## re-render the newest report and refresh the README tables from it
	@test -n "$(REPORT)" || { echo "no report under reports/; run make check first"; exit 2; }
	$(BIN)/iclr25 report $(REPORT) --update-readme

# Resolve pyproject.toml's ranges afresh in a throwaway environment and record the exact versions.
lock:  ## regenerate requirements.lock (then commit it; make setup installs from it)
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install -q --upgrade pip
	.venv-lock/bin/python -m pip install -q torch==2.14.1 torchvision==0.29.1
	.venv-lock/bin/python -m pip install -q '.[all,dev]'
	{ echo "# Exact versions make setup installs; regenerate with: make lock"; \
	  .venv-lock/bin/python -m pip freeze --exclude-editable | grep -v '^iclr25[=@ ]'; } > $(LOCK)
	rm -rf .venv-lock build src/*.egg-info

clean:
	rm -rf $(VENV) .venv-lock reports .pytest_cache .ruff_cache
