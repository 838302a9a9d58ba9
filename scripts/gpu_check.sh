#!/usr/bin/env bash
# The course on a GPU machine: `course doctor`, the tests marked `gpu`, every notebook executed
# in a fresh kernel; a JSON summary with, per notebook, ok, seconds and the device of every
# measurement (scripts/gpu_check.py describes the fields).
#
# With network and the course's .venv (make setup):   bash scripts/gpu_check.sh [--lessons 00,03]
#
# On a GPU machine WITHOUT network, e.g. a lent H100 whose image has Python 3.12 with torch (CUDA),
# CuPy, numba + numba-cuda, NumPy, SciPy, matplotlib, scikit-learn and pytest, but no Jupyter stack:
#   1. Here, with network, in the repository root:
#        bash scripts/gpu_check.sh --fetch-wheels
#      downloads wheels of the Jupyter stack (nbclient, nbformat, ipykernel, ipywidgets, nbval,
#      nbconvert, pytest-timeout and what they need) for CPython 3.12 on manylinux x86_64 into
#      build/gpu-wheels/ (git-ignored), and the NumPy named by GPU_NUMPY (default numpy==2.3.5:
#      numba-cuda 0.30 compiles no kernel on NumPy 2.5, see the gpu extra in pyproject.toml).
#      PY_VERSION=3.11 fetches for another Python.
#   2. Carry the repository with build/gpu-wheels/ to the GPU machine (the device tool of this
#      project: carry ["build/gpu-wheels"]), and there, in the repository root:
#        bash scripts/gpu_check.sh [--lessons 00,03] [--budget 540]
#      The carried wheels are installed into build/gpu-site/ (pip --no-index: no network, the
#      image's own packages untouched), which goes first on PYTHONPATH; a `python3` Jupyter
#      kernel spec is written there too (JUPYTER_PATH); COURSE_OFFLINE=1 keeps the lessons from
#      trying to download MNIST. One device-tool command may run 10 minutes: --budget 540 (the
#      default) stops starting notebooks after 9; run the rest with --lessons in a second call.
#   3. The summary is $OUT/gpu_check.json when OUT is set (the device tool sets it), else
#      build/gpu-check/gpu_check.json; NN_<notebook>.txt beside it hold every cell's output.
# Without a usable GPU the same run works: the gpu tests are skipped and the lessons fall back.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=build/gpu-wheels
SITE=build/gpu-site
GPU_NUMPY=${GPU_NUMPY:-numpy==2.3.5}
JUPYTER_STACK="nbclient nbformat ipykernel<7 ipywidgets nbval nbconvert pytest-timeout"
if [ -x .venv/bin/python ]; then PY=${PYTHON:-.venv/bin/python}; else PY=${PYTHON:-python3}; fi

if [ "${1:-}" = "--fetch-wheels" ]; then
    PY_VERSION=${PY_VERSION:-3.12}
    mkdir -p "$WHEELS"
    # shellcheck disable=SC2086 # JUPYTER_STACK is a list of names on purpose
    "$PY" -m pip download --quiet --only-binary=:all: --dest "$WHEELS" \
        --python-version "$PY_VERSION" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any \
        $JUPYTER_STACK "$GPU_NUMPY"
    echo "gpu_check: $(ls "$WHEELS" | wc -l) wheels ($(du -sh "$WHEELS" | cut -f1)) in $WHEELS"
    exit 0
fi

if [ -d "$WHEELS" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    if [ ! -e "$SITE/.installed" ]; then
        "$PY" -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl
        touch "$SITE/.installed"
    fi
    export PYTHONPATH="$PWD:$PWD/$SITE${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="$PWD/$SITE/bin:$PATH"
    # the kernel spec goes into build/gpu-site too, found through JUPYTER_PATH: nothing in ~
    "$PY" -m ipykernel install --prefix "$PWD/$SITE" --name python3 >/dev/null
    export JUPYTER_PATH="$PWD/$SITE/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
    export COURSE_OFFLINE=${COURSE_OFFLINE:-1}
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$PY" -c "import nbclient, nbformat, ipykernel" 2>/dev/null; then
    echo "gpu_check: no Jupyter stack here and no wheels in $WHEELS; see the header of $0" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L || echo "gpu_check: nvidia-smi not found"
exec "$PY" scripts/gpu_check.py --out "${OUT:-build/gpu-check}" "$@"
