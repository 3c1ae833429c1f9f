#!/usr/bin/env bash
# One lent-GPU session in one call (device tool): the GPU tests, then the GPU benchmarks.
# Results land in $OUT (or bench/results/ when OUT is unset). Wheels the image lacks travel in .whl/.
set -u
OUT=${OUT:-bench/results}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PARALAB_RESULTS=$OUT PYTHONUNBUFFERED=1
PHASE=${1:-all}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__); from lab.backend import gpu_available; print('gpu_available', gpu_available())"
} 2>&1 | tee $OUT/env.txt
if [ "$PHASE" = all ] || [ "$PHASE" = tests ]; then
  timeout ${TEST_S:-240} python3 -m pytest -m gpu tests/ -q -rfE -p no:cacheprovider -p pytest_timeout --timeout 120 \
    --continue-on-collection-errors ${PYTEST_ARGS:-} 2>&1 | tee $OUT/gpu_tests.log | tail -40
fi
if [ "$PHASE" = all ] || [ "$PHASE" = bench ]; then
  timeout 100 python3 -m lab bench codecs --device cuda -b 256K -e 256M -f 4 --repeats 10 2>&1 | tail -45
  timeout 50 python3 -m lab bench dropout --device cuda 2>&1 | tail -30
  timeout 40 python3 -m lab bench augment --device cuda 2>&1 | tail -12
  timeout 70 python3 -m lab bench transfer --pcie --target-s 0.1 2>&1 | tail -15
fi
ls -la $OUT
