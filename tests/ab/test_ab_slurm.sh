#!/usr/bin/env bash
# End to end through a real one-node Slurm cluster: `tessera ab --executor slurm` on a small
# sweep, one array task killed (scancel) while it is inside an item, `tessera ab resume`, and
# the deterministic verdicts equal those of `--executor local`. Skips (77) without Slurm.
#
#   test_ab_slurm.sh TESSERA_BINARY SOURCE_DIR PLUGIN_DIR
#
# No step depends on timing: the killed task is held inside its first simulator run by a
# device lock this script holds, and every wait is on a state with a generous deadline.
set -euo pipefail
tessera=$1 source=$2 plugins=$3
for program in slurmctld slurmd sbatch squeue scancel sacct; do
  command -v "$program" >/dev/null || { echo "SKIP: $program is not installed (scripts/bootstrap.sh installs it)"; exit 77; }
done
# A chroot without sysfs (no /sys) cannot run slurmd: an environment without Slurm, not a failure.
[ -d /sys/devices/system/cpu ] || { echo "SKIP: /sys/devices/system/cpu is missing, so slurmd cannot find the CPUs (mount sysfs)"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-ab-slurm.XXXXXX")
cluster=$work/cluster
cleanup() {
  exec 9>&- 2>/dev/null || true
  "$source/scripts/slurm-dev-cluster" stop "$cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Waits until `$@` succeeds, for at most 300 s (a loaded machine is slow, not wrong).
wait_for() {
  local what=$1; shift
  for _ in $(seq 1500); do "$@" && return 0; sleep 0.2; done
  fail "waited 300 s for $what"
}

"$source/scripts/slurm-dev-cluster" start "$cluster"
export SLURM_CONF=$cluster/slurm.conf

sed -e "s#../targets/#$source/configs/targets/#" -e "s#../../build/plugins#$plugins#" \
  "$source/configs/pipelines/small.yaml" > "$work/base.yaml"
cat > "$work/suite.yaml" <<SUITE
suite: slurm-e2e
slurm: {time: "30:00"}
models:
  - {model: $source/configs/models/mlp-small.yaml, target: $source/configs/targets/t16.yaml}
  - {model: $source/configs/models/mlp-small-f16.yaml, target: $source/configs/targets/t16.yaml}
SUITE
sweep=(--base "$work/base.yaml" --suite "$work/suite.yaml" --arm greedy= --arm "in-order=$source/configs/suites/arms/in-order.yaml"
       --repeat 1 --quiet)

"$tessera" ab "${sweep[@]}" --executor local --jobs 2 --results "$work/local" --json "$work/local.json" 9>&- ||
  fail "the local sweep failed"

# Hold the device lock the tasks' simulator runs take, so task 1 stops inside its first item.
lock=$work/device.lock
exec 9>>"$lock"
flock 9
"$tessera" ab "${sweep[@]}" --executor slurm --results "$work/slurm" --lock "$lock" > "$work/submit.out" 9>&- ||
  fail "the submission failed: $(cat "$work/submit.out")"
cat "$work/submit.out"
array=$(jq -r '.submissions[0].array_job' "$work/slurm/slurm/submissions.json")
report=$(jq -r '.submissions[0].report_job' "$work/slurm/slurm/submissions.json")
grep -q "array job $array (2 tasks), report job $report" "$work/submit.out" || fail "the job ids are not printed"
first=$(jq -r '.submissions[0].tasks[0][0]' "$work/slurm/slurm/submissions.json")
# The suite's sbatch options reach the jobs (the command line's would win).
[ "$(jq -r '.submissions[0].sbatch.time' "$work/slurm/slurm/submissions.json")" = "30:00" ] ||
  fail "the suite's slurm: {time} was not used"
[ "$(squeue -h -j "$report" -o %l)" = "30:00" ] || fail "the report job did not get --time=30:00"

run_log=$work/slurm/logs/$first/greedy/repeat-0.run.log
waiting() { grep -qs "waiting for device ownership" "$run_log"; }
wait_for "task 1 to wait for the device" waiting
"$tessera" ab status "$work/slurm" 9>&- | tee "$work/status-running.out"
grep -q "^running  $first greedy repeat=0" "$work/status-running.out" || fail "status does not show task 1's item running"
scancel "${array}_1" 9>&-
gone() { [ -z "$(squeue -h -r -j "${array}_1" 2>/dev/null)" ]; }
wait_for "task 1 to end" gone
exec 9>&-  # release the device: task 2 finishes, then the report job runs (afterany)

report_done() { [ -z "$(squeue -h -j "$report" 2>/dev/null)" ] && [ -s "$work/slurm/slurm/submission-1/report.out" ]; }
wait_for "the report job" report_done
cat "$work/slurm/slurm/submission-1/report.out"
# The killed item left no record, and the report names every item of the killed task.
[ ! -e "$work/slurm/records/$first/greedy/repeat-0.json" ] || fail "the killed item left a record"
grep -q "missing item model=$first arm=greedy repeat=0" "$work/slurm/slurm/submission-1/report.out" ||
  fail "the report job does not name the missing item"
"$tessera" ab status "$work/slurm" | tee "$work/status-killed.out"
grep -q "items: 3 of 6 done, 0 failed, 0 running, 0 pending, 3 missing" "$work/status-killed.out" ||
  fail "status does not count the killed task's items as missing"
grep -q "CANCELLED=1" "$work/status-killed.out" || fail "status does not show the cancelled task (sacct)"

"$tessera" ab resume "$work/slurm" > "$work/resume.out" || fail "resume failed: $(cat "$work/resume.out")"
cat "$work/resume.out"
jq -e '.submissions[1].tasks == [["'"$first"'"]]' "$work/slurm/slurm/submissions.json" >/dev/null ||
  fail "resume did not resubmit only the killed task's model"
report=$(jq -r '.submissions[1].report_job' "$work/slurm/slurm/submissions.json")
report_done() { [ -z "$(squeue -h -j "$report" 2>/dev/null)" ] && [ -s "$work/slurm/slurm/submission-2/report.out" ]; }
wait_for "the resumed report job" report_done
"$tessera" ab status "$work/slurm" | tee "$work/status-done.out"
grep -q "items: 6 of 6 done" "$work/status-done.out" || fail "resume did not finish every item"
"$tessera" ab resume "$work/slurm" | grep -q "nothing to resume" || fail "a second resume found work"

# The deterministic comparisons (everything but times and memory) equal the local executor's.
verdicts() { jq -S '[.comparisons[] | select(.metric | test("_ms$|_kib$") | not) | {arm, model, metric, value, baseline, verdict}] | sort_by(.arm, .model, .metric)' "$1"; }
verdicts "$work/local.json" > "$work/local.verdicts"
verdicts "$work/slurm/report.json" > "$work/slurm.verdicts"
[ "$(jq length "$work/local.verdicts")" -gt 0 ] || fail "no verdicts to compare"
diff "$work/local.verdicts" "$work/slurm.verdicts" || fail "the Slurm sweep's verdicts differ from the local executor's"

# tessera tune through the same executor: each round a job array, ranked once its report job ended.
cat > "$work/space.yaml" <<SPACE
space:
  - {slot: exchange_scheduler, plugins: [in-order, greedy]}
SPACE
tune=(--base "$work/base.yaml" --suite "$work/suite.yaml" --space "$work/space.yaml" --eta 2 --repeat 1 --quiet
      --history "$work/history.sqlite")
"$tessera" tune "${tune[@]}" --executor slurm --results "$work/tune-slurm" > "$work/tune-slurm.out" ||
  fail "tune through Slurm failed: $(cat "$work/tune-slurm.out")"
"$tessera" tune "${tune[@]}" --jobs 2 --results "$work/tune-local" > "$work/tune-local.out" || fail "tune on this machine failed"
grep -q "submitted to Slurm: array job" "$work/tune-slurm.out" || fail "tune did not submit its rounds to Slurm"
for where in slurm local; do
  [ "$(jq -r '.best.configuration' "$work/tune-$where/tune.json")" = c02 ] || fail "tune ($where) did not pick greedy (c02)"
done
diff <(jq -S '.rungs[].standings' "$work/tune-slurm/tune.json") <(jq -S '.rungs[].standings' "$work/tune-local/tune.json") ||
  fail "tune's standings through Slurm differ from the local executor's"
echo "PASS: $(jq length "$work/local.verdicts") deterministic comparisons equal; tune through Slurm picks what it picks locally"
