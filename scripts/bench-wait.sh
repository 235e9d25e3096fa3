#!/usr/bin/env bash
# What waiting costs (issue 10): the CPU time iced's own processes spend while one lane's agent
# sleeps. A throwaway repository holds one approved unit whose implementer is `fixtures/fake-agent`
# with `sleep <seconds>` (default 60), and `iced build <id> --json` drives it to delivery.
#
# Measured, for iced's own processes only (the driver and its supervisors; never the agent, git or
# anything else iced starts), so that any iced binary, old or new, is measured the same way:
# - waiting: the CPU time the driver and the agent's supervisor spend while the agent sleeps, from a
#   second after it started to about three seconds before it ends, read from
#   /proc/<pid>/task/*/schedstat and scaled to a minute. Issue 10 bounds this: 30 ms a minute.
# - whole build: user + system time of every iced process of the build, taken by the process itself
#   with getrusage(RUSAGE_SELF) as it exits (an LD_PRELOAD library built here from a few lines of
#   C). It adds what a build costs however long its agent takes (admit, brief, worktree, delivery).
# Printed: each run's figures, then the medians.
#
# Environment: ICED_BENCH_BIN (the iced to measure; default: a release build of this checkout),
# ICED_BENCH_RUNS (runs, default 3), ICED_BENCH_SLEEP (the agent's sleep in seconds, default 60),
# ICED_BENCH_KEEP=1 (keep the work directory and print its path). Needs cc, git and python3.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
runs="${ICED_BENCH_RUNS:-3}"
sleep_s="${ICED_BENCH_SLEEP:-60}"
if [ "$sleep_s" -lt 5 ]; then
  echo "ICED_BENCH_SLEEP must be at least 5: the wait is measured from 1 s after the agent" \
    "starts to about 3 s before it ends" >&2
  exit 2
fi

if [ -n "${ICED_BENCH_BIN:-}" ]; then
  iced="$(realpath "$ICED_BENCH_BIN")"
else
  cargo build --quiet --release --manifest-path "$here/Cargo.toml"
  iced="$(realpath "${CARGO_TARGET_DIR:-$here/target}/release/iced")"
fi

work="$(mktemp -d)"
driver_pid=""
cleanup() {
  # A build cut short (Ctrl-C, a failed step here) must not outlive the script.
  [ -n "$driver_pid" ] && kill "$driver_pid" 2>/dev/null && wait "$driver_pid" 2>/dev/null
  if [ "${ICED_BENCH_KEEP:-}" = 1 ]; then
    echo "work directory: $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# The measuring library: at exit, a process whose executable is $ICED_BENCH_EXE appends
# "<role> <pid> <user+system microseconds>" to $ICED_BENCH_RUSAGE. The agent never loads it: its
# environment is the one its spec names, which has no LD_PRELOAD.
cat >"$work/rusage.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

__attribute__((destructor)) static void iced_bench_report(void) {
  const char *out = getenv("ICED_BENCH_RUSAGE"), *want = getenv("ICED_BENCH_EXE");
  char exe[4096], cmdline[4096], line[256];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (!out || !want || n <= 0) return;
  exe[n] = 0;
  if (strcmp(exe, want) != 0) return;
  const char *role = "driver";
  int fd = open("/proc/self/cmdline", O_RDONLY);
  if (fd >= 0) {
    ssize_t m = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    if (m > 0) {
      cmdline[m] = 0;
      size_t first = strlen(cmdline);
      if ((ssize_t)first + 1 < m && strcmp(cmdline + first + 1, "__supervise") == 0)
        role = "supervisor";
    }
  }
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return;
  long us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L + ru.ru_utime.tv_usec +
            ru.ru_stime.tv_usec;
  int len = snprintf(line, sizeof line, "%s %d %ld\n", role, (int)getpid(), us);
  fd = open(out, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd >= 0) {
    if (write(fd, line, (size_t)len) < 0) {}
    close(fd);
  }
}
C
cc -shared -fPIC -O2 -o "$work/rusage.so" "$work/rusage.c"

# A repository with one approved unit whose implementer sleeps, then commits and reports.
setup() {
  local repo="$1"
  mkdir -p "$repo"
  cd "$repo"
  git init -q -b main .
  git config user.name bench
  git config user.email bench@example.invalid
  git config commit.gpgsign false
  echo bench >README.md
  git add . && git commit -q -m init
  "$iced" init >/dev/null
  local id
  id="$("$iced" new "session timeout" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
  local unit="intent/$id/iced.md"
  head -n "$(grep -n '^---$' "$unit" | sed -n 2p | cut -d: -f1)" "$unit" >"$unit.new"
  { printf '\n# Session timeout\n\n'; cat "$here/scripts/unit-body.md"; } >>"$unit.new"
  mv "$unit.new" "$unit"
  "$iced" approve "$id" --yes >/dev/null
  printf 'sleep %s\ncommit src/session.rs fixed\nreport-ok E1 E2\n' "$sleep_s" >"$repo.agent"
  python3 - "$here/fixtures/fake-agent" "$repo.agent" "$((sleep_s + 120))" <<'PY'
import json, sys
agent, script, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(".iced/config.json") as f:
    config = json.load(f)
config["verify"]["independent"] = False
config["verify"]["commands"] = []
config["runners"] = {"fake": {"kind": "command", "argv": ["bash", agent, script, "{output_file}"],
                              "timeoutSec": timeout}}
config["roles"] = {"implementer": {"runner": "fake"}}
with open(".iced/config.json", "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
PY
  "$iced" trust >/dev/null
  git add -A && git commit -q -m "approve $id"
  echo "$id"
}

# Nanoseconds on a CPU so far of every thread of process $1 (/proc/<pid>/task/*/schedstat); 0 once
# it has gone (an agent that ends at once).
cpu_ns() {
  { cat /proc/"$1"/task/*/schedstat 2>/dev/null || true; } | awk '{ s += $1 } END { printf "%d\n", s }'
}

median() {
  sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

window=$((sleep_s - 4))
waits=() totals=()
for i in $(seq 1 "$runs"); do
  repo="$work/repo-$i"
  id="$(setup "$repo")"
  usage="$work/rusage-$i.txt"
  start=$(date +%s.%N)
  (cd "$repo" && LD_PRELOAD="$work/rusage.so" ICED_BENCH_RUSAGE="$usage" ICED_BENCH_EXE="$iced" \
    exec "$iced" build "$id" --json >"$work/build-$i.jsonl") &
  driver_pid=$!
  # The wait: from a second after the agent started until shortly before it ends, the driver's
  # and the supervisor's CPU time, read from /proc while they run.
  child=""
  for _ in $(seq 300); do
    child="$(find "$repo/.iced/run" -path '*/activities/implement-1/child.json' 2>/dev/null | head -n 1 || true)"
    [ -n "$child" ] && break
    sleep 0.1
  done
  [ -n "$child" ] || { echo "the agent did not start within 30 s" >&2; exit 1; }
  supervisor_pid="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' \
    "$(dirname "$child")/supervisor.json")"
  sleep 1
  d0=$(cpu_ns "$driver_pid") s0=$(cpu_ns "$supervisor_pid")
  sleep "$window"
  d1=$(cpu_ns "$driver_pid") s1=$(cpu_ns "$supervisor_pid")
  wait "$driver_pid"
  driver_pid=""
  end=$(date +%s.%N)
  # The supervisor may still be writing its line after the driver saw its outcome.
  for _ in $(seq 50); do
    grep -q '^supervisor ' "$usage" 2>/dev/null && break
    sleep 0.1
  done
  status="$(tail -n 1 "$work/build-$i.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')"
  read -r wait_driver wait_supervisor per_minute < <(awk -v d="$((d1 - d0))" -v s="$((s1 - s0))" -v w="$window" \
    'BEGIN { printf "%.1f %.1f %.1f\n", d / 1e6, s / 1e6, (d + s) / 1e6 * 60 / w }')
  read -r driver supervisors count < <(awk '
    $1 == "driver" { d += $3 } $1 == "supervisor" { s += $3; n++ }
    END { printf "%.1f %.1f %d\n", d / 1000, s / 1000, n }' "$usage")
  total=$(awk -v a="$driver" -v b="$supervisors" 'BEGIN { printf "%.1f", a + b }')
  waits+=("$per_minute") totals+=("$total")
  printf 'run %d: %s in %.1f s, %d lines of --json\n' "$i" "$status" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$(wc -l <"$work/build-$i.jsonl")"
  printf '  waiting %d s: driver %s ms, supervisor %s ms: %s ms per minute\n' \
    "$window" "$wait_driver" "$wait_supervisor" "$per_minute"
  printf '  whole build: driver %s ms, %d supervisor(s) %s ms, total %s ms\n' \
    "$driver" "$count" "$supervisors" "$total"
done
printf 'median over %d run(s), agent sleeping %s s: waiting %s ms per minute; whole build %s ms\n' \
  "$runs" "$sleep_s" "$(printf '%s\n' "${waits[@]}" | median)" "$(printf '%s\n' "${totals[@]}" | median)"
