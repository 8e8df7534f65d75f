#!/usr/bin/env bash
# Two jobs at once on one machine must not find each other: starts two `mpirun -np 2` of the
# given test binary at the same time and requires both to pass.
#   concurrent_jobs.sh MPIRUN "FLAGS" BINARY
set -u
mpirun="$1"
flags="$2"
binary="$3"
log_dir="$(mktemp -d)"
trap 'rm -rf "$log_dir"' EXIT

# shellcheck disable=SC2086
"$mpirun" $flags -np 2 "$binary" >"$log_dir/a.log" 2>&1 &
first=$!
# shellcheck disable=SC2086
"$mpirun" $flags -np 2 "$binary" >"$log_dir/b.log" 2>&1 &
second=$!

status=0
wait "$first" || status=1
wait "$second" || status=1
for job in a b; do
  echo "---- job $job ----"
  tail -n 5 "$log_dir/$job.log"
done
if [ $status -eq 0 ]; then echo "both concurrent jobs passed"; else echo "a concurrent job FAILED"; fi
exit $status
