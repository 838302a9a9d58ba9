#!/bin/sh
# Bootstrap .venv from nothing: torch first (CUDA build where a GPU is present, the pinned
# CPU build elsewhere), then the course package with its dev tools, then the local copies of
# the JavaScript that offline slide decks need. Safe to run again.
set -eu
PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TORCH_CPU_PIP=${TORCH_CPU_PIP:-}
BIN=.venv/bin

say() { printf '\n== %s\n' "$*"; }

if [ ! -x "$BIN/python" ]; then
    say "creating .venv with $($PYTHON --version 2>&1)"
    "$PYTHON" -m venv .venv
fi
"$BIN/python" -m pip install --quiet --upgrade pip

gpu=no
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=yes; fi

if "$BIN/python" -c "import torch" >/dev/null 2>&1; then
    say "torch $("$BIN/python" -c 'import torch; print(torch.__version__)') already installed"
elif [ "$gpu" = yes ]; then
    say "NVIDIA GPU found: installing torch $TORCH_VERSION with CUDA"
    "$BIN/pip" install --no-compile "torch==$TORCH_VERSION"
else
    say "no NVIDIA GPU: installing the CPU build of torch $TORCH_VERSION"
    # shellcheck disable=SC2086 # TORCH_CPU_PIP holds several words on purpose
    "$BIN/pip" install --no-compile "torch==$TORCH_VERSION" $TORCH_CPU_PIP
fi

say "installing course_lib and its tools (and Triton for lesson 14 where a Linux wheel exists)"
"$BIN/pip" install --quiet --no-compile -e ".[dev]"
if ! "$BIN/python" -c "import triton" >/dev/null 2>&1; then
    echo "note: Triton is not installed (it has Linux wheels only): lesson 14 shows its kernels without running them"
fi
if [ "$gpu" = yes ]; then
    "$BIN/pip" install --quiet --no-compile -e ".[dev,gpu]" || echo "warning: CuPy / numba-cuda did not install; lessons fall back to NumPy and the CUDA simulator (see README: environment.yml)"
fi

# jsonschema's "format-nongpl" extra (which jupyter-events asks for) brings rfc3987-syntax, which
# builds a parser when it is imported: 3.4 s of CPU in every process that imports jsonschema
# (nbformat, nbgrader, each Jupyter server, `course` itself; measured on the course's 2-core
# machine). Without it jsonschema skips one format check ("iri") that nothing here uses.
"$BIN/pip" uninstall --quiet -y rfc3987-syntax >/dev/null 2>&1 || true

# Bytecode for everything installed, compiled on every core at once: pip compiles each package's
# files one by one (about 40 of the set-up's 130 s on a 2-core machine), and it must be done here,
# because where PYTHONDONTWRITEBYTECODE is set (many container images) no later import writes it.
# A file that does not compile (some packages ship Python 2 examples) is skipped, as pip skips it.
"$BIN/python" -m compileall -qq -j 0 "$("$BIN/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true

say "local copies of reveal.js, require.js, jQuery and MathJax for offline slides"
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "npm not found: installing Debian's nodejs and npm"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if command -v npm >/dev/null 2>&1; then
    (cd slides && npm ci --no-audit --no-fund --loglevel=error)
    # configurable-http-proxy, JupyterHub's proxy, for `make hub` (hub/README.md)
    (cd hub && npm ci --no-audit --no-fund --loglevel=error)
else
    echo "warning: npm (Node.js) is not installed, so offline slide decks cannot be built."
    echo "         Install Node.js, then run 'make setup' again. Everything else works."
fi

say "bubblewrap (sandbox for grading) and Chromium (browser tests of the slides)"
sh scripts/system_packages.sh

say "setup done: $("$BIN/python" --version), $("$BIN/python" -c 'import torch; print("torch", torch.__version__)'), $("$BIN/python" -c 'import triton; print("triton", triton.__version__)' 2>/dev/null || echo "no triton")"
