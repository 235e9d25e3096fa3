#!/usr/bin/env bash
# What the loop costs at scale (issue 16, item 3): for each N given (default: 10 100; 1000 only
# when asked, e.g. `bash scripts/bench-scale.sh 1000`), a throwaway repository holds an approved
# project of N independent approved children, built with `iced build <project> --json` as one run:
# `pace.lanes` 8, `land.mode: none` (each lane ends delivered on its branch; no merge, no remote),
# `verify.independent` false and no definition-of-done command, and the built-in scripted agent
# (fixtures/fake-agent, the file `iced demo` embeds) as every implementer, answering at once
# (`commit src/{lane}.txt ...`, `report-ok E1 E2`). So what is left is the loop's own cost. The
# repository is packed (`git gc`) before the build, as a clone is.
#
# Printed, per N:
# - wall: the build's wall time, and divided by N (per lane). With agents that answer at once the
#   one driver steps the lanes in turn and they hardly overlap, so this is the loop's own time a
#   lane, whatever `pace.lanes` says.
# - git: git processes started, per lane, split into the loop's (iced and its supervisors) and
#   the agents' (the fake agent's `git add`/`commit`, told apart by ICED_ROLE in their
#   environment), and the loop's most frequent subcommands (first two words after git's global
#   options). A `git` wrapper first on PATH appends a line per process and runs the real git.
# - where the time goes: the loop's git processes' time summed, a lane, in all and for the kinds
#   that took the most; and the time before each line `build --json` printed (the step it
#   reports, or the wait before it) by stage and action.
# - worktrees: how many git lists at the end (with `land.mode: none` a delivered lane's worktree is
#   a spare the run's next lane takes, so about `pace.lanes` of them and the checkout).
# - state.json: its size at its largest, sampled every 0.1 s while the run goes, and at the end.
# - step latency: while the build runs, a probe times one `iced implement step --json` a second
#   (drivers of one run take turns, so a probe steps the run like the build does and waits its
#   turn); printed, over the probes that did the most frequent kind of step (writing a brief,
#   mostly): the median of the first against the median of the last (10, or a third of them;
#   the issue's goal: the end within 1.5 times the start). Probes contend with the build, so
#   they are noisy; the build's own time a lane, first lanes to end against the last (from its
#   timestamped lines), is printed too. The probe's own git calls are counted apart and left out
#   of the git figures.
# The wrapper (a bash script) starts a bash beside every git: on this 2-core machine it adds 100 to
# 150 ms a lane (of 43 git calls) and hides how the loop's own time grows with the run. So run
# twice: once for the counts, once with ICED_BENCH_COUNT_GIT=0 (no wrapper, no git figures) for
# the wall time and the growth. The probe adds about a step a second. Compare figures from this
# script only.
#
# Environment: ICED_BENCH_BIN (the iced to measure; default: a release build of this checkout),
# ICED_BENCH_DRIVERS (`build.drivers`, the threads the build steps the run with; default: iced's),
# ICED_BENCH_KEEP=1 (keep the work directory and print its path: per N, the repository, the
# build's lines with their times, the git logs and the probes' answers), ICED_BENCH_TIMEOUT (seconds a
# build may take before it is stopped and reported as such, default 900). Needs git and python3.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
sizes=("$@")
[ "${#sizes[@]}" -gt 0 ] || sizes=(10 100)
for n in "${sizes[@]}"; do
  case "$n" in '' | *[!0-9]* | 0) echo "N must be a positive number, not \`$n\`" >&2; exit 2 ;; esac
done

if [ -n "${ICED_BENCH_BIN:-}" ]; then
  iced="$(realpath "$ICED_BENCH_BIN")"
else
  cargo build --quiet --release --manifest-path "$here/Cargo.toml"
  iced="$(realpath "${CARGO_TARGET_DIR:-$here/target}/release/iced")"
fi
real_git="$(command -v git)"

work="$(mktemp -d)"
# The person's config for this benchmark alone: agents run confined (SPEC 24.12), and may write the
# work directory, where the counting git's default log is (an agent's git logs there too).
export XDG_CONFIG_HOME="$work/config"
mkdir -p "$XDG_CONFIG_HOME/iced"
printf '{"agents": {"writable": ["%s"]}}\n' "$work" >"$XDG_CONFIG_HOME/iced/config.json"
cleanup() {
  if [ "${ICED_BENCH_KEEP:-}" = 1 ]; then
    echo "work directory: $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# The counting git: one line per process, "<who> <subcommand> <its first argument>", to
# $ICED_BENCH_GITLOG (set for the build; the probe sets its own) or, in an agent's environment
# (iced passes agents only PATH and a few others), the default log: "n <who> <subcommand> <its
# first argument>" before the real git (run as a child, to time it), "t <who> <microseconds>" after
# it (absent when iced killed it: `blob_at` kills its `cat-file --batch` once it has read).
mkdir -p "$work/bin"
cat >"$work/bin/git" <<GIT
#!/usr/bin/env bash
who=loop
[ -n "\${ICED_ROLE:-}" ] && who=agent
words=() skip=0
for a in "\$@"; do
  if [ "\$skip" = 1 ]; then skip=0; continue; fi
  case "\$a" in
    -C | -c | --git-dir | --work-tree | --namespace | --exec-path) skip=1 ;;
    -*) [ "\${#words[@]}" -gt 0 ] && words+=("\$a") ;;
    *) words+=("\$a") ;;
  esac
  [ "\${#words[@]}" -ge 2 ] && break
done
log="\${ICED_BENCH_GITLOG:-$work/git-default.log}"
printf 'n %s %s\n' "\$who" "\${words[*]:-?}" >>"\$log"
t0="\$EPOCHREALTIME"
"$real_git" "\$@"
rc=\$?
t1="\$EPOCHREALTIME"
printf 't %s %s %s\n' "\$who" "\$(( \${t1/./} - \${t0/./} ))" "\${words[*]:-?}" >>"\$log"
exit "\$rc"
GIT
chmod +x "$work/bin/git"

for n in "${sizes[@]}"; do
  repo="$work/n$n/repo"
  mkdir -p "$repo"
  # The project: N children, each holding a contract that lints clean, all approved and committed.
  project="$(python3 - "$iced" "$repo" "$n" "$here/fixtures/fake-agent" <<'PY'
import json, os, subprocess, sys
iced, repo, n, agent = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
BODY = "\n# Scale\n\n" + open(os.path.join(os.path.dirname(agent), "..", "scripts", "unit-body.md")).read()

def run(*args):
    return subprocess.run(args, cwd=repo, check=True, capture_output=True, text=True).stdout

def git(*args):
    run("git", *args)

def with_body(uid):
    path = os.path.join(repo, "intent", uid, "iced.md")
    text = open(path).read()
    end = text.index("\n---\n", 3) + 5
    with open(path, "w") as f:
        f.write(text[:end] + BODY)

def approve(uid):
    with_body(uid)
    run(iced, "approve", uid, "--yes", "--json")

git("init", "-q", "-b", "main", ".")
git("config", "user.name", "bench")
git("config", "user.email", "bench@example.invalid")
git("config", "commit.gpgsign", "false")
open(os.path.join(repo, "README.md"), "w").write("bench\n")
git("add", ".")
git("commit", "-q", "-m", "init")
run(iced, "init")
project = json.loads(run(iced, "new", "project: scale benchmark", "--json"))["id"]
kind = json.loads(run(iced, "status", project, "--json"))["type"]
if kind != "project":
    sys.exit(f"`iced new \"project: ...\"` made a unit of type {kind}, not a project")
approve(project)
for i in range(n):
    child = json.loads(run(iced, "child", project, f"child {i + 1}", "--json"))["id"]
    approve(child)
script = os.path.join(os.path.dirname(repo), "agent.txt")
lenses = os.environ.get("ICED_BENCH_LENSES", "none")
if lenses not in ("none", "one", "three"):
    sys.exit(f"ICED_BENCH_LENSES must be none, one or three, not `{lenses}`")
PASS = ('{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "src/{lane}.txt"}, '
        '{"id": "E2", "result": "pass", "evidence": "src/{lane}.txt"}], "failures": [{"id": "F1", "triggered": false, '
        '"evidence": "nobody is signed out"}], "constraints": [{"id": "C1", "violated": false, "evidence": "untouched"}]}')
# The `failures` lens of the three finds a blocking finding the refuter refutes: every lane is
# validated by three lenses and refuted once, and delivered after its first attempt.
FAIL = ('{"verdict": "fail", "expectations": [{"id": "E1", "result": "pass", "evidence": "src/{lane}.txt"}], '
        '"findings": [{"file_path": "src/{lane}.txt", "criterion_ref": "E1", "finding_category": "correctness", '
        '"severity": "S2-major", "summary": "a poll counts as activity", "failure_scenario": {"inputs": "a polling tab", '
        '"expected": "the session ends", "actual": "it never ends"}}]}')
REFUTED = '{"findings": [{"finding_id": "{lane}-F1", "decision": "refuted", "reason": "the poll is not activity"}]}'
with open(script, "w") as f:
    f.write("role implementer\ncommit src/{lane}.txt the work of {lane}\nreport-ok E1 E2\n")
    if lenses == "one":
        f.write(f"role validator\nreport {PASS}\n")
    elif lenses == "three":
        f.write(f"role validator\nlens failures\nreport {FAIL}\nlens *\nrole validator\n"
                f"lens expectations\nreport {PASS}\nlens rules\nreport {PASS}\n"
                f"lens *\nrole refuter\nreport {REFUTED}\n")
    f.write("role *\n")
    # The agent's own CPU time, its script's and its children's (bash's `times`), a line each.
    f.write(f"times {os.path.join(os.path.dirname(repo), 'agent-times.log')}\n")
path = os.path.join(repo, ".iced", "config.json")
config = json.load(open(path))
config["verify"]["independent"] = lenses != "none"
config["verify"]["commands"] = []
config["runners"] = {"scripted": {"kind": "command", "argv": ["bash", agent, script, "{output_file}"],
                                  "timeoutSec": 120}}
config["roles"] = {"implementer": {"runner": "scripted"}}
if lenses != "none":
    config["roles"]["validator"] = {"runner": "scripted"}
    config["verify"]["lenses"] = ["full"] if lenses == "one" else ["expectations", "failures", "rules"]
    config["verify"]["refute"] = lenses == "three"
    config["verify"]["reviewers"] = []
config["land"] = {"mode": "none"}
config["pace"] = {"lanes": 8}
if os.environ.get("ICED_BENCH_DRIVERS"):
    config.setdefault("build", {})["drivers"] = int(os.environ["ICED_BENCH_DRIVERS"])
with open(path, "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
run(iced, "trust")
git("add", "-A")
git("commit", "-q", "-m", f"approve {project} and its {n} children")
# Packed, as a clone of a real repository is: each lane's `worktree add` reads the base's blobs,
# and 2N loose ones (this setup's approvals) would make it measure the setup, not the loop.
git("gc", "-q")
print(project)
PY
)"
  # The build, the state sampler and the step probe, in one python process that reads the logs.
  python3 - "$iced" "$repo" "$n" "$work/bin" "$work/n$n" "$project" "${ICED_BENCH_TIMEOUT:-900}" <<'PY'
import collections, json, os, re, resource, statistics, subprocess, sys, threading, time
iced, repo, n, bindir, out, project, timeout = sys.argv[1:8]
n, timeout = int(n), float(timeout)
state = os.path.join(repo, ".iced", "run", "state.json")
build_log, probe_log = os.path.join(out, "git-build.log"), os.path.join(out, "git-probe.log")
counting = os.environ.get("ICED_BENCH_COUNT_GIT", "1") != "0"
path = (bindir + os.pathsep if counting else "") + os.environ["PATH"]
env = dict(os.environ, PATH=path, ICED_BENCH_GITLOG=build_log)
probe_env = dict(env, ICED_BENCH_GITLOG=probe_log)
default_log = os.path.join(os.path.dirname(out), "git-default.log")
# Only this N's agents write the default log from now on.
open(default_log, "w").close()

def size():
    try:
        return os.stat(state).st_size
    except OSError:
        return 0

def children_cpu():
    # The CPU time of this process's children that have ended and been waited for, with theirs.
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime

largest, probes, next_probe, probe_cpu = 0, [], time.monotonic() + 1.0, 0.0
cpu_before = children_cpu()
start = time.monotonic()
build = subprocess.Popen([iced, "build", project, "--json"], cwd=repo, env=env,
                         stdout=subprocess.PIPE, text=True,
                         stderr=open(os.path.join(out, "build.err"), "w"))
lines = []  # (seconds since the start, the step's line) as the build prints them

def reader():
    for line in build.stdout:
        if line.strip():
            lines.append((time.monotonic() - start, json.loads(line)))

threading.Thread(target=reader, daemon=True).start()
timed_out = False
while build.poll() is None:
    largest = max(largest, size())
    now = time.monotonic()
    if now - start > timeout:
        build.kill()
        timed_out = True
        break
    if now >= next_probe:
        t0, c0 = time.monotonic(), children_cpu()
        p = subprocess.run([iced, "implement", "step", "--json"], cwd=repo, env=probe_env,
                           capture_output=True, text=True)
        ms = (time.monotonic() - t0) * 1000
        probe_cpu += children_cpu() - c0
        if build.poll() is None:
            try:
                answer = json.loads(p.stdout)
                kind = f"{answer.get('stage')} {answer.get('action')}"
            except ValueError:
                kind = "?"
            probes.append((ms, p.returncode, size(), kind))
            with open(os.path.join(out, "probes.txt"), "a") as f:
                f.write(f"{ms:.1f} ms, exit {p.returncode}, state {size()} bytes: {p.stdout.strip()}\n")
        next_probe = time.monotonic() + 1.0
        continue
    time.sleep(0.1)
wall = time.monotonic() - start
build.wait()
build_cpu = children_cpu() - cpu_before - probe_cpu
largest = max(largest, size())

time.sleep(0.2)  # the reader's last line
with open(os.path.join(out, "build.jsonl"), "w") as f:
    for t, line in lines:
        f.write(f"{t:.3f} {json.dumps(line)}\n")
last = lines[-1][1] if lines else {}
status = "timed out" if timed_out else last.get("status", f"exit {build.returncode}")

def read(path):
    try:
        return [l.split(" ", 2) for l in open(path).read().splitlines() if l.count(" ") >= 2]
    except OSError:
        return []

calls = read(build_log) + read(default_log)
def words(w):
    # A revision or a path in second place is not a kind of call: `rev-parse <rev>`.
    sub, _, arg = w.strip().partition(" ")
    if arg and not arg.startswith("-") and not re.fullmatch(r"[A-Za-z][A-Za-z.]*", arg):
        arg = "<arg>"
    return f"{sub} {arg}".strip()

loop = collections.Counter(words(w) for kind, who, w in calls if kind == "n" and who == "loop")
# `t <who> <microseconds> <words>`: a process's time, with what it was.
timed = [(who, *rest.partition(" ")[::2]) for kind, who, rest in calls if kind == "t"]
loop_ms = sum(int(us) for who, us, _ in timed if who == "loop") / 1000
loop_time = collections.Counter()
for who, us, w in timed:
    if who == "loop" and not w.startswith("cat-file --batch"):
        loop_time[words(w)] += int(us) / 1000
agent = sum(1 for kind, who, _ in calls if kind == "n" and who == "agent")
probe_git = sum(1 for kind, _, _ in read(probe_log) if kind == "n")
total_loop = sum(loop.values())
print(f"N={n}: {status} in {wall:.1f} s, {wall / n * 1000:.0f} ms a lane (pace.lanes 8, build.drivers {os.environ.get('ICED_BENCH_DRIVERS') or 'default'})")
if status != "delivered":
    # Why it stopped: the build's lines that blocked a lane or refused (with their `next` and
    # `missing`), and the probes that did not answer a step, so a run that stopped says why.
    why = [l for _, l in lines if l.get("stage") == "blocked" or l.get("action") in ("blocked", "refused") or "code" in l or "refused" in l]
    for line in why[:5]:
        print(f"  why: {json.dumps(line)[:800]}")
    for ms, code, _, kind in probes:
        if code not in (0, 4):
            print(f"  a probe exited {code} ({kind})")
    # A refusal is on the build's stderr.
    for line in open(os.path.join(out, "build.err")).read().strip().splitlines()[-4:]:
        print(f"  stderr: {line[:800]}")
if counting:
    print(f"  git: {(total_loop + agent) / n:.1f} processes a lane: the loop's {total_loop / n:.1f}, "
          f"the agents' {agent / n:.1f} (the probe's {probe_git} left out)")
    top = ", ".join(f"{w} {c / n:.1f}" for w, c in loop.most_common(8))
    print(f"  loop's git a lane, most frequent: {top}")
    print(f"  loop's git time: {loop_ms / n:.0f} ms a lane (git processes end to end, summed; "
          f"the killed `cat-file --batch` left out)")
    top_time = ", ".join(f"{w} {ms / n:.1f}" for w, ms in loop_time.most_common(8))
    print(f"  loop's git time a lane, ms, the most: {top_time}")
else:
    print("  git: not counted (ICED_BENCH_COUNT_GIT=0)")
# CPU: the build's whole tree (iced, the supervisors, every git, the agents: each waited for by
# its parent), less what the agents' scripts say they and their children took.
def seconds(field):
    m = re.fullmatch(r"(\d+)m([\d.]+)s", field)
    return int(m.group(1)) * 60 + float(m.group(2)) if m else 0.0
try:
    agent_lines = open(os.path.join(out, "agent-times.log")).read().split()
except OSError:
    agent_lines = []
agents_cpu = sum(seconds(f) for f in agent_lines)
print(f"  CPU (user and system, summed over the cores): the build's processes {build_cpu / n * 1000:.0f} ms a lane; "
      f"the agents' {agents_cpu / n * 1000:.0f} ({len(agent_lines) // 4} reported), "
      f"the loop's {(build_cpu - agents_cpu) / n * 1000:.0f}")
# Where the driver's time goes: the time before each line it printed, by the line's stage and
# action (the step that line reports, or the wait before it).
spent, before = collections.Counter(), 0.0
for t, line in lines:
    if "lane" in line:
        spent[f"{line.get('stage')} {line.get('action')}"] += t - before
    before = t
top = ", ".join(f"{k} {v / n * 1000:.0f}" for k, v in spent.most_common(6))
print(f"  the build's time before each line it printed, ms a lane: {top}")
# The same, a lane: the time before each of its lines, summed; lanes in the order they ended.
per_lane, before = {}, 0.0
for t, line in lines:
    if "lane" in line:
        per_lane[line["lane"]] = per_lane.pop(line["lane"], 0.0) + t - before
    before = t
ended = list(per_lane.values())
if len(ended) >= 4:
    k = min(10, len(ended) // 3)
    first, end = statistics.median(ended[:k]), statistics.median(ended[-k:])
    # Lines printed at once by several drivers leave a lane next to no time of its own: the
    # ratio then says nothing, and is not printed.
    ratio = f": {end / first:.2f} times" if first >= 0.001 else " (the first too close to 0 to compare)"
    print(f"  the build's time a lane: median of the first {k} lanes to end {first * 1000:.0f} ms, "
          f"of the last {k} {end * 1000:.0f} ms{ratio}")
print(f"  state.json: largest {largest / 1024:.1f} KB, at the end {size() / 1024:.1f} KB")
# Worktrees git knows at the end, the person's checkout among them: git's own `worktree add`,
# `branch` and `checkout` read every one, so they must not grow with the lanes delivered.
listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=repo,
                        capture_output=True, text=True).stdout
print(f"  worktrees at the end: {sum(1 for l in listed.splitlines() if l.startswith('worktree '))}")
# A probe does whatever step is next (write a brief, check a receipt, or wait out another
# call's step), so only probes that did the same kind of step, the most frequent, are compared.
ok = [p for p in probes if p[1] == 0]
kind = collections.Counter(p[3] for p in ok).most_common(1)[0][0] if ok else None
same = [p for p in ok if p[3] == kind]
if len(same) >= 2:
    k = min(10, max(1, len(same) // 3))
    first = statistics.median(p[0] for p in same[:k])
    end = statistics.median(p[0] for p in same[-k:])
    print(f"  implement step ({len(same)} of {len(ok)} probes answered `{kind}`): median of the "
          f"first {k} {first:.0f} ms (state {same[0][2] / 1024:.0f} KB), of the last {k} "
          f"{end:.0f} ms (state {same[-1][2] / 1024:.0f} KB): {end / first:.2f} times")
else:
    print(f"  implement step: {len(ok)} probe(s) answered while the build ran: too short a run")
if len(ok) < len(probes):
    print(f"  ({len(probes) - len(ok)} probe(s) refused)")
sys.exit(0 if status == "delivered" else 1)
PY
done
