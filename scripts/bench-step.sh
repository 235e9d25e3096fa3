#!/usr/bin/env bash
# Benchmark `iced implement step --json` against recorded histories of 10, 1,000 and 10,000 steps
# (benches/step.rs): (a) nothing to do, (b) one step recorded; with the history where SPEC 21.2
# puts it (history.jsonl, events.jsonl) and, for comparison, inside state.json.
#
# Arguments go to `cargo bench --bench step`. Environment: ICED_BENCH_RUNS (measured calls per
# cell, default 31), ICED_BENCH_KEEP=1 (keep the generated repository and print its path),
# ICED_BENCH_BIN (time another iced binary, to compare builds).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench step "$@"
