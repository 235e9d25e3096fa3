#!/usr/bin/env bash
# Benchmark the read-only verbs over a generated repository of 1,000 units (benches/cli.rs).
#
# Arguments go to `cargo bench --bench cli`; those after `--` reach the benchmark itself, where
# they filter commands by label:   scripts/bench.sh -- 'list --json'
# Environment: ICED_BENCH_RUNS (measured runs per command, default 31), ICED_BENCH_UNITS (default
# 1000), ICED_BENCH_KEEP=1 (keep the generated repository and print its path), ICED_BENCH_BIN
# (time another iced binary, to compare builds).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench cli "$@"
