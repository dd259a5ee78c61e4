#!/usr/bin/env bash
# The module's contract on a GPU machine, in one go: the contract's GPU tests, the defences'
# overhead on a warm round, and a warm harness round of this tree beside one of an earlier
# tree (OLD=path of its source, installed aside), on the same machine.
#   OUT=out bash benchmarks/gpu_contract.sh [OLD]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1
timeout 420 python3 -m pytest -m gpu -q -p no:cacheprovider -rA tests/gpu/test_contract_gpu.py > "$out/contract_gpu.log" 2>&1
echo "contract tests: rc=$?"; tail -n 15 "$out/contract_gpu.log"
timeout 240 python3 benchmarks/defence_overhead.py --gpu --rounds 5 > "$out/defence_overhead.log" 2>&1
echo "defence overhead: rc=$?"; tail -n 25 "$out/defence_overhead.log"
