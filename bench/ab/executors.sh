#!/usr/bin/env bash
# Wall time of one A/B sweep with `--executor local --jobs 1`, `--jobs 2` and `--executor slurm`
# on a one-node dev cluster (scripts/slurm-dev-cluster), that their deterministic verdicts are
# identical, Slurm's overhead per item, and the time to resume after a task is killed.
#
#   bench/ab/executors.sh [BUILD_DIR] [REPEAT] [MODELS]      (defaults: build, 1, 3)
#
# The sweep, on t16: greedy against in-order and greedy-longest-first. With MODELS=3 the models
# are mlp-small, mlp-small-f16 and transformer-small; with more, MODELS generated MLPs of 2 to 4
# layers, batch 1 to 4, widths 32 to 160, every fourth with float16 weights.
set -euo pipefail
source=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$source/build}" && pwd)
repeat=${2:-1}
models=${3:-3}
tessera=$build/tools/tessera
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-ab-executors.XXXXXX")
cleanup() { exec 9>&- 2>/dev/null || true; "$source/scripts/slurm-dev-cluster" stop "$work/cluster" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
now_ms() { date +%s%3N; }
wait_gone() {  # until squeue no longer lists job $1 (at most 1 hour)
  for _ in $(seq 18000); do [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0; sleep 0.2; done
  echo "job $1 still queued after an hour" >&2; exit 1
}

sed -e "s#../targets/#$source/configs/targets/#" -e "s#../../build/plugins#$build/plugins#" \
  "$source/configs/pipelines/small.yaml" > "$work/base.yaml"
# Writes model $1 (index) as $work/models/gen-$1.yaml: a seeded MLP whose shape varies with $1.
generate_model() {
  local i=$1 widths=(32 48 64 96 128 160) batch=$(( 1 << ($1 % 3) )) layers=$(( 2 + $1 % 3 ))
  local dtype=float32 f=$work/models/gen-$1.yaml prev width ops="" tensors=""
  [ $(( i % 4 )) -eq 3 ] && dtype=float16
  prev=${widths[$(( i % 6 ))]}
  tensors="  - {name: x, shape: [$batch, $prev], dtype: float32, kind: input, scale: 1.0}"$'\n'
  local input=x
  for l in $(seq 0 $(( layers - 1 ))); do
    width=${widths[$(( (i * 7 + l * 5) % 6 ))]}
    tensors+="  - {name: w$l, shape: [$prev, $width], dtype: $dtype, kind: weight, scale: $(awk "BEGIN{printf \"%.6f\", 1/sqrt($prev)}")}"$'\n'
    tensors+="  - {name: b$l, shape: [$width], dtype: $dtype, kind: weight, scale: 0.1}"$'\n'
    ops+="  - {op: matmul, inputs: [$input, w$l], output: h$l}"$'\n'
    ops+="  - {op: add, inputs: [h$l, b$l], output: a$l}"$'\n'
    ops+="  - {op: relu, inputs: [a$l], output: y$l}"$'\n'
    input=y$l prev=$width
  done
  printf 'model: gen-%d\nseed: %d\ntensors:\n%sops:\n%soutputs: [%s]\n' "$i" "$(( 100 + i ))" "$tensors" "$ops" "$input" > "$f"
  echo "$f"
}
mkdir -p "$work/models"
{
  echo "suite: executors"
  echo "models:"
  if [ "$models" -eq 3 ]; then
    for m in mlp-small mlp-small-f16 transformer-small; do
      echo "  - {model: $source/configs/models/$m.yaml, target: $source/configs/targets/t16.yaml}"
    done
  else
    for i in $(seq 0 $(( models - 1 ))); do
      echo "  - {model: $(generate_model "$i"), target: $source/configs/targets/t16.yaml}"
    done
  fi
} > "$work/suite.yaml"
sweep=(--base "$work/base.yaml" --suite "$work/suite.yaml" --arm greedy= --arm "in-order=$source/configs/suites/arms/in-order.yaml"
       --arm "longest-first=$source/configs/suites/arms/greedy-longest-first.yaml"
       --repeat "$repeat" --quiet)
verdicts() { jq -S '[.comparisons[] | select(.metric | test("_ms$|_kib$") | not) | {arm, model, metric, value, baseline, verdict}] | sort_by(.arm, .model, .metric)' "$1"; }
export TESSERA_PLUGIN_PATH=
declare -A wall

for jobs in ${LOCAL_JOBS:-1 2}; do  # LOCAL_JOBS=2 skips the one-job run of a long sweep
  start=$(now_ms)
  "$tessera" ab "${sweep[@]}" --jobs "$jobs" --results "$work/local-$jobs" 2>/dev/null
  wall[$jobs]=$(( $(now_ms) - start ))
  echo "local_jobs_$jobs wall_ms=${wall[$jobs]} items=$(jq '.items.present' "$work/local-$jobs/report.json")"
  verdicts "$work/local-$jobs/report.json" > "$work/local-$jobs.verdicts"
done

"$source/scripts/slurm-dev-cluster" start "$work/cluster" >/dev/null
export SLURM_CONF=$work/cluster/slurm.conf
start=$(now_ms)
"$tessera" ab "${sweep[@]}" --executor slurm --results "$work/slurm" 2>/dev/null >/dev/null
submitted=$(now_ms)
wait_gone "$(jq -r '.submissions[0].report_job' "$work/slurm/slurm/submissions.json")"
end=$(now_ms)
items=$(jq '.items.present' "$work/slurm/report.json")
verdicts "$work/slurm/report.json" > "$work/slurm.verdicts"
# Per item: from the submission to its record on disk, less the compile and run it waited for.
child_ms=$(jq -s '[.[] | .compile.process.wall_ms + .run.process.wall_ms] | add' $(find "$work/slurm/records" -name '*.json'))
echo "slurm wall_ms=$(( end - start )) prepare_and_submit_ms=$(( submitted - start )) items=$items child_wall_ms=${child_ms%.*}"
echo "slurm_overhead_per_item_ms=$(( (end - start - wall[2]) / items )) (slurm wall - local --jobs 2 wall, per item; 2 CPUs each)"
same=1
for jobs in ${LOCAL_JOBS:-1 2}; do cmp -s "$work/local-$jobs.verdicts" "$work/slurm.verdicts" || same=0; done
[ "$same" -eq 1 ] &&
  echo "verdicts identical: $(jq length "$work/slurm.verdicts") deterministic comparisons" || { echo "verdicts DIFFER"; exit 1; }

# Resume: task 1 killed while it waits inside its first simulator run (this script holds the
# device lock), then `tessera ab resume` until its report job has ended.
exec 9>>"$work/device.lock"; flock 9
"$tessera" ab "${sweep[@]}" --executor slurm --results "$work/killed" --lock "$work/device.lock" 2>/dev/null >/dev/null 9>&-
array=$(jq -r '.submissions[0].array_job' "$work/killed/slurm/submissions.json")
first=$(jq -r '.submissions[0].tasks[0][0]' "$work/killed/slurm/submissions.json")
for _ in $(seq 18000); do grep -qs "waiting for device ownership" "$work/killed/logs/$first/greedy/repeat-0.run.log" && break; sleep 0.2; done
scancel "${array}_1"
for _ in $(seq 18000); do [ -z "$(squeue -h -r -j "${array}_1")" ] && break; sleep 0.2; done
exec 9>&-
wait_gone "$(jq -r '.submissions[0].report_job' "$work/killed/slurm/submissions.json")"
start=$(now_ms)
"$tessera" ab resume "$work/killed" >/dev/null 2>&1
wait_gone "$(jq -r '.submissions[1].report_job' "$work/killed/slurm/submissions.json")"
echo "resume_after_kill wall_ms=$(( $(now_ms) - start )) redone_models=$(jq '.submissions[1].tasks | length' "$work/killed/slurm/submissions.json") items_done=$(jq '.items.present' "$work/killed/report.json") of $(jq '.items.expected' "$work/killed/report.json")"
verdicts "$work/killed/report.json" | cmp -s - "$work/slurm.verdicts" && echo "resumed verdicts identical" || { echo "resumed verdicts DIFFER"; exit 1; }
