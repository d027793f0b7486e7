# capsedu task runner. `make lab` opens the course, `make test` runs the whole suite.
# Both create .venv on first use and (re)install the project when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.capsedu-installed

.PHONY: install lab update author-lab test unit notebooks lint sync execute student grading class-report hub grade-all clean

install: $(STAMP)

# A learner needs the course's runtime and its workspace tools only (`make lab`: ".[course]", no
# nbgrader, no test or book tools);
# `make test` and the other development targets install the dev extras into the same .venv.
# uv (from PyPI) installs torch in seconds from its cache; plain pip is the fallback. Both
# compile the bytecode at install time (uv only when asked): where PYTHONDONTWRITEBYTECODE is set,
# as on the course machines, every kernel would otherwise compile torch anew (import torch
# 4.2 s instead of 2.1 s on 2 cores).
# NO_DEPS: packages installed without their dependencies. torchattacks (lesson 13's PGD) pins
# requests~=2.25.1, which JupyterLab's server cannot use, but never imports requests; what it
# does import (torch, torchvision, scipy, numpy, tqdm) pyproject.toml declares.
# (Harry24k/adversarial-attacks-pytorch#205)
NO_DEPS := torchattacks==3.5.1
define pip_install
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -m pip install --quiet --disable-pip-version-check uv; then \
		$(VENV)/bin/uv pip install --python $(PY) --compile-bytecode -e "$(1)" \
		&& $(VENV)/bin/uv pip install --python $(PY) --compile-bytecode --no-deps $(NO_DEPS); \
	else \
		$(PY) -m pip install -e "$(1)" && $(PY) -m pip install --no-deps $(NO_DEPS); \
	fi
endef

LEARNER_STAMP := $(VENV)/.capsedu-learner-installed
$(LEARNER_STAMP): pyproject.toml
	$(call pip_install,.[course])
	@touch $@

# Instructors who grade: nbgrader and nbgitpuller besides the learner's set.
CLASSROOM_STAMP := $(VENV)/.capsedu-classroom-installed
$(CLASSROOM_STAMP): pyproject.toml
	$(call pip_install,.[classroom])
	@touch $@ $(LEARNER_STAMP)

$(STAMP): pyproject.toml
	$(call pip_install,.[dev])
	@touch $@ $(LEARNER_STAMP)

# `make lab`: JupyterLab on the learner's workspace (workspace/, created on first use, ignored by
# git; see coursetools/workspace.py), opened at lesson 00.
# LAB_ARGS passes options to JupyterLab (e.g. LAB_ARGS="--no-browser --port 8899"); as root (a
# container, a cloud VM) it adds --allow-root, without which JupyterLab refuses to start.
LAB_ARGS ?=
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: $(LEARNER_STAMP)
	$(PY) -m coursetools.workspace lab $(ROOT_ARG) $(LAB_ARGS)

# Bring new and updated lessons into the workspace without opening JupyterLab (your edits stay).
update: $(LEARNER_STAMP)
	$(PY) -m coursetools.workspace update

# For course authors: JupyterLab on the course's own notebooks/ (saving changes them).
author-lab: install
	$(VENV)/bin/jupyter lab notebooks/ $(ROOT_ARG) $(LAB_ARGS)

# Every tier (tests/tiers.py), every notebook executed by nbval in the fast profile, on JOBS
# pytest-xdist workers: --dist loadgroup keeps each notebook's cells, with its handout run, on one
# worker and the browser tests on one (tests/conftest.py). DURATIONS: how many of the slowest
# tests to list at the end (0: all, as .ci/run does).
JOBS ?= 2
DURATIONS ?= 30
test: install
	CAPSEDU_FAST=1 $(PY) -m pytest tests notebooks --nbval-lax --nbval-current-env -p no:cacheprovider \
		-n $(JOBS) --dist loadgroup --durations=$(DURATIONS)

# The package's own in-process tests (the unit tier, under 2 minutes); `make test` runs every tier.
unit: install
	$(PY) -m pytest tests -m unit -p no:cacheprovider

notebooks: install
	CAPSEDU_FAST=1 $(PY) -m pytest notebooks --nbval-lax --nbval-current-env

lint: install
	$(VENV)/bin/ruff check capsedu coursetools tests benchmarks book/_ext notebooks classroom

# After editing a lesson's source notebooks/src/NN_name.py: update its .ipynb pair (keeps outputs;
# `make execute` re-runs what changed).
sync: install
	$(VENV)/bin/jupytext --sync notebooks/src/*.py

# Re-execute, in the learner profile, every lesson whose stored outputs are stale (its code, the
# capsedu modules or weights it uses changed); LESSONS="03 07" picks lessons. Needs the course's
# data: CAPSEDU_DATA with the complete MNIST (../shared/data/mnist-full on the course machines).
LESSONS ?=
execute: install
	$(PY) -m coursetools.execute $(if $(LESSONS),$(LESSONS),--stale)

# Handouts for a class: every lesson with its exercise solutions stubbed and outputs cleared.
student: $(LEARNER_STAMP)
	$(PY) -m coursetools.handouts --out build/student

# An nbgrader course (one assignment per lesson) for instructors who grade with nbgrader.
grading: $(CLASSROOM_STAMP)
	$(PY) -m coursetools.grading --out build/nbgrader

# What the class got wrong, after `nbgrader autograde`: per lesson, each check's verdicts counted
# (build/class-report/index.html and a CSV per lesson; anonymous unless REPORT_ARGS=--names).
# COURSE: the nbgrader course folder; LESSONS="01_squash" picks lessons (default: all autograded).
COURSE ?= build/nbgrader
REPORT_ARGS ?=
class-report: $(CLASSROOM_STAMP)
	$(PY) -m coursetools.class_report --course $(COURSE) --out build/class-report $(REPORT_ARGS) $(LESSONS)

# The class hub on one machine (as root, in a clone every account can read: classroom/README.md):
# state folder, exchange, proxy, learner repository served by git daemon, then JupyterHub until
# Ctrl+C. HUB_ARGS: see `python -m coursetools.hub_server --help`; tests/test_hub.py runs it.
HUB_ARGS ?=
hub: $(CLASSROOM_STAMP)
	$(PY) -m coursetools.hub_server $(HUB_ARGS)

# nbgrader's generate_assignment and autograde on every lesson (make test grades two): the
# released handout must score 0, a half-solved one in between, a solved one full marks.
grade-all: install
	CAPSEDU_GRADE_ALL=1 $(PY) -m pytest tests/test_nbgrader.py -s -p no:cacheprovider

clean:
	rm -rf $(VENV) .pytest_cache book/_build

# The course site: HTML from the committed notebooks (NOT re-executed) into book/_build/html.
# Always a clean build, so that every warning shows (-W: warnings are errors, -n: nitpicky).
# MathJax and the ipywidgets renderer come from npm (cached in ~/.cache/capsedu/book-assets).
.PHONY: book book-no-solutions
book: install
	rm -rf book/_build/html book/_build/.doctrees book/_build/jupyter_execute
	$(VENV)/bin/jupyter-book build book --warningiserror --nitpick --keep-going --all

# The edition for a class that grades the exercises: the same site with every solution left out
# (stubs in their place, as in the handouts; book/_ext/solutions.py), in
# book/_build/no-solutions/_build/html.
book-no-solutions: install
	rm -rf book/_build/no-solutions
	CAPSEDU_BOOK_SOLUTIONS=omit $(VENV)/bin/jupyter-book build book --path-output book/_build/no-solutions \
		--warningiserror --nitpick --keep-going --all
