# The course's commands. Each sets up what it needs on a fresh machine:
# a virtual environment in .venv with the pinned versions of constraints.txt.
#   make test    the whole test suite (library, notebooks, book, grading, browser)
#   make bench   speed and memory ratios, measured side by side in one run
#   make lint    ruff
#   make lock    rewrite constraints.txt from the current environment

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test bench lint lock

$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

lint: $(STAMP)
	$(PY) -m ruff check .

test: lint
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/run.py

lock: $(STAMP)
	$(PY) -m pip freeze --exclude-editable | sed 's/+cpu$$//' > constraints.txt
