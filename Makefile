# The few commands a contributor needs (CONTRIBUTING.md, "Everyday commands"). Run them in the venv the
# README makes (. .venv/bin/activate). Make rather than nox or just: it is already on every machine and CI
# image, needs nothing installed, and each target is one line of what CI runs (.ci/run), so they cannot drift.

PYTHON ?= python3

.PHONY: help test-fast test lint bench-cpu docs-check

help:
	@echo "make test-fast   the inner loop, the tests not marked heavy (docs/testing.md; CI runs them all)"
	@echo "make test        the whole suite, as CI runs it (.ci/run; about 10 minutes on 2 cores)"
	@echo "make lint        ruff format --check, ruff check, mypy (strict, kictl/ and tests/)"
	@echo "make bench-cpu   the benchmark scripts that run on a CPU, at small sizes (benchmarks/README.md)"
	@echo "make docs-check  the README's commands and the docs' transcripts and records still hold"

test-fast:
	$(PYTHON) -m pytest -q -x -m "not heavy"

test:
	$(PYTHON) -m pytest -q -n 2 --dist loadscope

lint:
	ruff format --check .
	ruff check .
	mypy

bench-cpu:
	$(PYTHON) benchmarks/suite_speed.py --smoke --repeats 1
	$(PYTHON) benchmarks/validate_throughput.py --records 1000 --repeat 1
	$(PYTHON) benchmarks/rank_scale.py --runs 2000 --definitions 5
	$(PYTHON) benchmarks/rank_scale.py site --runs 500 --definitions 2

docs-check:
	$(PYTHON) -m pytest -q tests/test_readme.py tests/test_docs_commands.py tests/test_docs_records.py
