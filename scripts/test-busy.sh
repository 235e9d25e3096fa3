#!/usr/bin/env bash
# The suite on a busy machine (issue 36): the README's test command with every core kept busy by
# another process, as CI's machine and a person's are while anything else runs. A test that passes
# only on an idle machine (a sleep, a grace period, an ordering that load can change) fails here.
#
# One busy process (a shell spinning on `:`) per core is started beside `cargo test`, and stopped,
# by its pid, when the suite ends, whether it passed, failed or was interrupted. The suite is built
# first, with the machine as it is, so that what is measured is the tests, not the compiler; every
# test binary runs even after one fails (`--no-fail-fast`), so one round shows every flaky test.
#
# Arguments go to `cargo test` (e.g. `--test cli queue`). Environment: ICED_BUSY_PROCS (busy
# processes, default the number of cores), ICED_BUSY_ROUNDS (run the suite this many times in a row,
# stopping at the first failure; default 1). Prints each round's wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
procs="${ICED_BUSY_PROCS:-$(nproc)}"
rounds="${ICED_BUSY_ROUNDS:-1}"

cargo test --no-run "$@"

busy=()
stop_busy() {
  local pid
  for pid in "${busy[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${busy[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  busy=()
}
trap stop_busy EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 "$procs"); do
  (while :; do :; done) &
  busy+=("$!")
done
echo "test-busy: $procs busy process(es) beside the suite (pids ${busy[*]})" >&2

for round in $(seq 1 "$rounds"); do
  start=$(date +%s)
  status=0
  cargo test --no-fail-fast "$@" || status=$?
  elapsed=$(($(date +%s) - start))
  echo "test-busy: round $round of $rounds: exit $status in ${elapsed} s" >&2
  [ "$status" -eq 0 ] || exit "$status"
done
