#!/usr/bin/env bash
# One lent-GPU session in one call (the device tool): wheels the device image lacks travel in .whl/ and are
# installed first; then bench/gpu_all.py runs every GPU test and benchmark, writing into $OUT when it is set.
set -u
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
exec python3 bench/gpu_all.py "$@"
