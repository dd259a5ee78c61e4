#!/usr/bin/env bash
# A harness round of this tree beside one of an earlier tree, on the same machine, one after the
# other: OLD is a folder holding the earlier tree's source (cuda_agent_cli, tools, sandbox,
# skills, benchmarks, pyproject.toml), installed aside so each run imports its own package.
#   OUT=out bash benchmarks/round_compare.sh OLD [harness_round.py arguments: --gpu, or --device cpu]
set -uo pipefail
cd "$(dirname "$0")/.."
old=$(cd "$1" && pwd); shift
out=${OUT:-$PWD/gpu-results}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/old-site "$old" > "$out/old_install.log" 2>&1 \
  || { echo "the earlier tree did not install"; tail -5 "$out/old_install.log"; exit 3; }
# Each run's benchmarks from a folder of their own, so the script's own sys.path entry (its
# parent folder) holds no package: the installed one is imported.
mkdir -p /tmp/bench-old/b /tmp/bench-new/b
cp "$old"/benchmarks/harness_round.py "$old"/benchmarks/harness_tasks.py /tmp/bench-old/b/
cp benchmarks/harness_round.py benchmarks/harness_tasks.py /tmp/bench-new/b/
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/new-site . > "$out/new_install.log" 2>&1 \
  || { echo "this tree did not install"; tail -5 "$out/new_install.log"; exit 3; }
for side in old new; do
  PYTHONPATH=/tmp/$side-site:${PYTHONPATH:-} XDG_CACHE_HOME=/tmp/cache-$side timeout 270 \
    python3 /tmp/bench-$side/b/harness_round.py "$@" > "$out/round_$side.log" 2>&1
  echo "== $side: rc=$?"; tail -n 14 "$out/round_$side.log"
done
