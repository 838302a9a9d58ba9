# GPU computing for deep learning: two commands for everyone.
#   make course   set up .venv (first time only), then build and verify every lesson
#   make test     set up .venv (first time only), then run the whole test suite
# Setup is idempotent: it reruns only when pyproject.toml or the slide packages change.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.course-setup
TORCH_VERSION := 2.13.0
# Extra pip options for the CPU build of torch on machines without CUDA. Empty here (this
# machine's pip serves the CPU build); elsewhere pass PyTorch's CPU wheel index, e.g.
#   make TORCH_CPU_PIP="--index-url https://download.pytorch.org/whl/cpu" course
TORCH_CPU_PIP ?=
# Workers for the test suite (pytest-xdist): units of tests (a file, or one lesson's tests of a
# heavy file) per worker, the slowest first (conftest.py). Three keep both cores busy: much of
# the suite waits on processes, sleeps and timeouts.
TEST_WORKERS ?= 3
LESSONS ?=
# Extra arguments for JupyterLab, e.g. make lab LAB_ARGS="--port 9999 --no-browser"
LAB_ARGS ?=
# The course's own modules compiled to bytecode before a build or a test run: where
# PYTHONDONTWRITEBYTECODE is set (as in many container images, and in the grading sandbox), no
# process writes .pyc files, so every one of the hundreds of kernels, checkers and workers would
# compile course_lib and course_tools from source again (about 5 % of the CPU of three grading
# test files: 85 -> 81 CPU-s, A/B twice on the 2-core machine). Only changed files are recompiled;
# a file that does not compile is left to the build or the tests, which name it and its line.
COMPILE := $(BIN)/python -m compileall -q course_lib course_tools tests scripts >/dev/null || true

.PHONY: setup course test lab slides bench doctor clean hub

setup: $(STAMP)

$(STAMP): pyproject.toml slides/package.json slides/package-lock.json hub/package.json hub/package-lock.json scripts/setup.sh scripts/system_packages.sh
	TORCH_VERSION=$(TORCH_VERSION) TORCH_CPU_PIP="$(TORCH_CPU_PIP)" PYTHON=$(PYTHON) sh scripts/setup.sh
	@touch $(STAMP)

course: setup
	@$(COMPILE)
	$(BIN)/course doctor
	$(BIN)/course build $(if $(LESSONS),--lessons $(LESSONS))

# system_packages.sh: bubblewrap and Chromium (apt-get as root; otherwise their tests skip, saying why)
test: setup
	@sh scripts/system_packages.sh
	@$(COMPILE)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# JupyterLab on the course, opened on release/ (the student versions; written first if missing),
# without the news pop-up or nbgrader's instructor tools (formgrader), as the hub gives students.
# As root it passes --allow-root itself.
lab: setup
	$(BIN)/course lab $(LAB_ARGS)

slides: setup
	$(BIN)/course slides $(LESSONS)

bench: setup
	$(BIN)/course bench

doctor: setup
	$(BIN)/course doctor

# JupyterHub for a class on this machine, as root (hub/README.md). Default: a try-out on
# 127.0.0.1:8000 with one shared password (on one account, every server run as you, where
# other accounts cannot run .venv's Python; it says so); for a class, e.g.
#   sudo make hub HUB_ARGS="--instructors alice --students bob,carol"   (PAM passwords)
HUB_ARGS ?= --tryout
hub: setup
	$(BIN)/python hub/run_hub.py $(HUB_ARGS)

clean:
	rm -rf build release submitted autograded feedback gradebook.db
