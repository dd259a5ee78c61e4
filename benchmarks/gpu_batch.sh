#!/usr/bin/env bash
# Run the `gpu` test tier and the GPU benchmarks in one go on an offline CUDA machine.
#
# Expects the project's wheels (and bubblewrap's .deb files) in .whl/, made on a machine with a
# package registry by:  bash path/to/wheels-script   (python 3.12 wheels; see docs/benchmarks.md)
# Writes logs to $OUT (or ./gpu-results) and prints a short summary table last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}

if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
  if ! command -v bwrap >/dev/null; then
    for d in .whl/*.deb; do dpkg -x "$d" /tmp/bw; done
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/bw/usr/lib/x86_64-linux-gnu:/tmp/bw/lib/x86_64-linux-gnu exec /tmp/bw/usr/bin/bwrap "$@"\n' > /usr/local/bin/bwrap
    chmod +x /usr/local/bin/bwrap
  fi
fi
# The console script, without touching the network or the image's packages.
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 \
  || echo "note: editable install failed (see install.log); using python -m cuda_agent_cli"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$out/gpu.txt" 2>&1

declare -A status
run() {  # run NAME CMD...: log to $out/NAME.log, remember the exit code
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  status[$name]="rc=$? $((SECONDS - start))s"
  tail -n 25 "$out/$name.log"
}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests benchmarks)
n=0
for step in "${steps[@]}"; do
  n=$((n + 1))
  case $step in
    tests) run gpu_tests python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests ;;
    benchmarks)
      for b in benchmarks/*.py; do
        name=$(basename "$b" .py)
        if grep -q -- '--gpu' "$b"; then run "bench_$name" python3 "$b" --gpu; fi
      done ;;
    *)  # a command line: named by its position and the script or program it runs
      words=($step)
      label=${words[0]}
      for w in "${words[@]}"; do case $w in *.py|*.sh) label=$w; break ;; esac; done
      label=${label##*/}
      run "step${n}_${label//[^A-Za-z0-9_.-]/_}" bash -c "$step" ;;
  esac
done
echo; echo "== summary ($(cat "$out/gpu.txt"))"
for k in "${!status[@]}"; do printf '%-28s %s\n' "$k" "${status[$k]}"; done | sort
