#!/usr/bin/env bash
# Make the compatibility fixtures of fixtures/compat/ (issue 10, item 2): what one release of iced
# wrote in the middle of real runs, so that a later iced is tested on reading and resuming it
# (tests/cli/compat.rs). Run it only to remake the fixtures on purpose, with the iced whose files
# they must hold: the fixtures are meant to stay as an older release wrote them.
#
#   scripts/make-compat-fixture.sh [fixture...]     (default: every fixture)
#
# It builds iced from this checkout (`cargo build`, honouring CARGO_TARGET_DIR) and refuses to run
# when `src/`, `Cargo.toml` or `Cargo.lock` differ from HEAD, so the commit in each fixture.json is
# exactly the code that wrote the files. (ICED_BIN=<path> uses that binary instead and skips the
# check: fixture.json then still names this checkout's HEAD, so say in the commit which iced it was.) For each
# fixture it makes a real git repository in a temporary directory, drives a real run to a stopping
# point (as the host, or with `fixtures/fake-agent` under the process driver) and saves, under
# fixtures/compat/<name>/:
#
#   repo.bundle    `git bundle --branches` of the repository: main and the lane branch
#   run/           `.iced/run/` as the loop left it: state.json, events.jsonl, and the run folder
#                  (briefs, reports, kept copies, validator prompts and answers, activity files,
#                  history.jsonl). Not `lock` (empty when free) nor `.gitignore` (`*`, which would
#                  make git ignore the fixture; the test writes it back as the loop wrote it).
#   claims/        the claims of `<git common dir>/iced/claims/`
#   agent.txt      the fake agent's script, for a process-driven fixture
#   fixture.json   the run, its unit, the lane worktrees (and validator sandboxes) to recreate, and
#                  the commit of iced that made it
#
# What depends on the machine is replaced by a placeholder the test substitutes back:
#   @DIR@                the temporary directory holding `repo/` (the repository),
#                        `repo.iced-worktrees/` (the lane worktrees), `bin/`, `home/`, `agent.txt`
#   @SHA256:<path>@      the sha256 of a saved file whose bytes name @DIR@ (a brief, a prompt, an
#                        activity's spec), <path> relative to @DIR@: the bytes change with the
#                        directory, so the hash does too, and the loop checks it (a brief must
#                        still render to the bytes it recorded)
# After the substitution no saved file may name the temporary directory: the script checks it.
#
# Pinned: ICED_NOW, the author and committer of every commit (names and dates, the fake agent's
# commits too, through its wrapper), TZ and the locale, so the repository's own commits and the
# agent's are the same on every remake. Run ids, nonces, pids and iced's own commits (which name the
# run) differ from one remake to the next: a remade fixture is a new fixture, to be reviewed as one.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd -P)"
out="$here/fixtures/compat"
fake_agent="$here/fixtures/fake-agent"

if [ -z "${ICED_BIN:-}" ]; then
  if ! git -C "$here" diff --quiet HEAD -- src Cargo.toml Cargo.lock; then
    echo "make-compat-fixture: src/, Cargo.toml or Cargo.lock differ from HEAD; commit first, so the fixture names the code that wrote it" >&2
    exit 2
  fi
  cargo build --quiet --manifest-path "$here/Cargo.toml" --bin iced
  ICED_BIN="${CARGO_TARGET_DIR:-$here/target}/debug/iced"
fi
made_by="$(git -C "$here" rev-parse HEAD)"
version="$("$ICED_BIN" --version)"

work="$(mktemp -d "${TMPDIR:-/tmp}/iced-compat.XXXXXX")"
work="$(cd "$work" && pwd -P)"
trap 'rm -rf "$work"' EXIT

# A PATH that names nothing of this machine beyond the system's directories (it is recorded in the
# activities' specs): the usual ones, and where git, jq and perl are when elsewhere.
tools="/usr/local/bin:/usr/bin:/bin"
for program in git jq perl bash; do
  found="$(dirname "$(command -v "$program")")"
  case ":$tools:" in *":$found:"*) ;; *) tools="$tools:$found" ;; esac
done

NOW="2026-09-30T11:00:00Z"
UNIT="001-session-timeout"

# ---- answers (the same texts as tests/cli/loop_e2e.rs and tests/cli/validation.rs) --------------

GOOD_REPORT='{"summary": "sessions refresh on activity", "evidence": [
  {"expectation": "E1", "kind": "test", "ref": "tests/session.rs::refresh"},
  {"expectation": "E2", "kind": "test", "ref": "tests/session.rs::idle"}]}'
PASS='{"verdict": "pass", "expectations": [{"id": "E1", "result": "pass", "evidence": "tests/session.rs::refresh passes"}, {"id": "E2", "result": "pass", "evidence": "tests/session.rs::idle passes"}], "failures": [{"id": "F1", "triggered": false, "evidence": "an active session was never signed out"}], "constraints": [{"id": "C1", "violated": false, "evidence": "src/password.rs is untouched"}], "notes": "read the diff and ran the tests"}'
FAIL_S2='{"verdict": "fail", "expectations": [{"id": "E1", "result": "pass", "evidence": "refresh works"}, {"id": "E2", "result": "pass", "evidence": "idle test passes"}], "findings": [{"file_path": "src/session.rs", "criterion_ref": "E2", "finding_category": "correctness", "severity": "S2-major", "summary": "a background poll counts as activity", "failure_scenario": {"inputs": "an idle tab polling every minute", "expected": "the session ends after 30 minutes", "actual": "the session never ends"}}]}'
CONFIRM_F1="{\"findings\": [{\"finding_id\": \"$UNIT-F1\", \"decision\": \"confirmed\", \"reason\": \"reproduced with two tabs\", \"failure_scenario\": {\"inputs\": \"two tabs, one idle and polling\", \"expected\": \"signed out at 30 minutes\", \"actual\": \"signed in after 2 hours\"}}]}"

# The unit's body: tests/cli/env.rs GOOD_BODY (lints clean at signoff; E1, E2, F1, C1).
BODY='
# Session timeout

## Intent

### Goal
Signed-in people stay signed in while they are active.

### Constraints
- [C1] No change to how passwords are checked.

### Failure conditions
- [F1] An active person is signed out.

### Scope
- In: session refresh
- Out: password policy

## Context
- [code] Sessions expire after 5 minutes in src/session.rs.

## Expectations
- [E1] Activity extends the session. {verify: test | tests/session.rs}
- [E2] An idle session still ends after 30 minutes. {verify: test | tests/session.rs}

## Open questions
- [Q1] How long is idle? -> A: 30 minutes.
'

# ---- one case: a directory holding the repository ----------------------------------------------

# Run a command in the pinned environment of case directory $dir (nothing else inherited).
pinned() {
  env -i \
    PATH="$dir/bin:$tools" HOME="$dir/home" XDG_CONFIG_HOME="$dir/config" TZ=UTC LANG=C.UTF-8 \
    GIT_CONFIG_NOSYSTEM=1 ICED_NOW="$NOW" \
    GIT_AUTHOR_NAME="Compat Person" GIT_AUTHOR_EMAIL="person@example.test" \
    GIT_COMMITTER_NAME="Compat Person" GIT_COMMITTER_EMAIL="person@example.test" \
    GIT_AUTHOR_DATE="$NOW" GIT_COMMITTER_DATE="$NOW" \
    "$@"
}

iced() { (cd "$dir/repo" && pinned "$ICED_BIN" "$@"); }
git_in() { local at="$1"; shift; (cd "$at" && pinned git "$@"); }

# A repository with an approved unit and `.iced/config.json` patched with the jq filter $1 (and,
# with $2, the fake agent following that script as the runner `fake`), all committed.
setup() {
  local patch="$1" script="${2:-}"
  dir="$work/$name"
  mkdir -p "$dir/repo" "$dir/home" "$dir/config" "$dir/bin"
  if [ -n "$script" ]; then
    printf '%s' "$script" >"$dir/agent.txt"
    # The runner's argv names a program on PATH, not a path: the committed config holds no
    # directory of this machine, and the test puts its own wrapper first on PATH.
    cat >"$dir/bin/iced-compat-agent" <<EOF
#!/bin/sh
# The fake agent with its script; its commits pinned like the rest.
GIT_AUTHOR_NAME="Compat Person" GIT_AUTHOR_EMAIL="person@example.test"
GIT_COMMITTER_NAME="Compat Person" GIT_COMMITTER_EMAIL="person@example.test"
GIT_AUTHOR_DATE="$NOW" GIT_COMMITTER_DATE="$NOW"
export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_DATE
exec bash "$fake_agent" "$dir/agent.txt" "\$@"
EOF
    chmod 755 "$dir/bin/iced-compat-agent"
  fi
  git_in "$dir/repo" init -q -b main
  git_in "$dir/repo" config user.name "Compat Person"
  git_in "$dir/repo" config user.email "person@example.test"
  git_in "$dir/repo" config commit.gpgsign false
  printf 'test repo\n' >"$dir/repo/README.md"
  git_in "$dir/repo" add .
  git_in "$dir/repo" commit -q -m init
  iced init --json >/dev/null
  [ "$(iced new "session timeout" --json | jq -r .id)" = "$UNIT" ]
  local file="$dir/repo/intent/$UNIT/iced.md" close
  close="$(grep -n '^---$' "$file" | sed -n 2p | cut -d: -f1)"
  { head -n "$close" "$file"; printf '%s' "$BODY"; } >"$file.new" && mv "$file.new" "$file"
  iced approve "$UNIT" --yes --json >/dev/null
  local config="$dir/repo/.iced/config.json"
  jq "$patch" "$config" >"$config.new" && mv "$config.new" "$config"
  iced trust --json >/dev/null
  git_in "$dir/repo" add -A
  git_in "$dir/repo" commit -q -m "approve $UNIT"
}

# The process driver's config: the fake agent implements and validates.
FAKE_RUNNER='.runners = {"fake": {"kind": "command", "argv": ["iced-compat-agent", "{output_file}"], "timeoutSec": 30}}
  | .roles = {"implementer": {"runner": "fake"}, "validator": {"runner": "fake"}}'

# `iced implement step --json`; its object.
step() { iced implement step --json; }

# Step until the step's action is $1; fail on a run that stops anywhere else.
step_until() {
  local want="$1" s action i
  for i in $(seq 1 300); do
    s="$(step)" || true
    action="$(jq -r .action <<<"$s")"
    [ "$action" = "$want" ] && { printf '%s' "$s"; return 0; }
    case "$action" in
      delivered|blocked|handback|nothing|paused|start_agent)
        echo "make-compat-fixture: $name stopped at $action, not $want: $s" >&2; exit 1 ;;
    esac
    sleep 0.1
  done
  echo "make-compat-fixture: $name: no $want after 300 steps" >&2
  exit 1
}

state() { jq "$@" "$dir/repo/.iced/run/state.json"; }

# A host's agent: commit in the lane's worktree as an implementer would.
agent_commit() {
  local wt="$1" rel="$2" text="$3"
  mkdir -p "$(dirname "$wt/$rel")"
  printf '%s\n' "$text" >"$wt/$rel"
  git_in "$wt" add -- "$rel"
  git_in "$wt" commit -q -m "agent: $rel"
}

# Replace every $1 in file $3 with $2, both taken literally.
replace() {
  FROM="$1" TO="$2" perl -pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/g' "$3"
}

# Save what the loop wrote for case $name into fixtures/compat/$name, with $covers describing it.
save() {
  local covers="$1" root="$dir/repo" dest="$out/$name" f rel sha
  [ "$(cat "$root/.iced/run/.gitignore")" = "*" ] || { echo "unexpected .iced/run/.gitignore" >&2; exit 1; }
  [ -z "$(git_in "$root" status --porcelain)" ] || { echo "$name: the person's checkout is not clean" >&2; exit 1; }
  rm -rf "$dest"
  mkdir -p "$dest/claims"
  git_in "$root" bundle create -q "$dest/repo.bundle" --branches
  (cd "$root/.iced" && tar -cf - --exclude=run/.gitignore --exclude=run/lock run) | tar -xf - -C "$dest"
  cp "$root/.git/iced/claims/"*.json "$dest/claims/"
  [ -f "$dir/agent.txt" ] && cp "$dir/agent.txt" "$dest/agent.txt"

  # The worktrees to recreate: every checkout but the person's, each clean (a dirty one could not
  # be recreated from the bundle), on its branch or detached at its commit.
  local worktrees="[]" path head branch
  while IFS= read -r line; do
    case "$line" in
      "worktree "*) path="${line#worktree }"; head=""; branch="" ;;
      "HEAD "*) head="${line#HEAD }" ;;
      "branch "*) branch="${line#branch refs/heads/}" ;;
      "")
        if [ -n "$path" ] && [ "$path" != "$root" ]; then
          [ -z "$(git_in "$path" status --porcelain)" ] || { echo "$name: $path is not clean" >&2; exit 1; }
          worktrees="$(jq --arg p "${path/#$dir/@DIR@}" --arg b "$branch" --arg h "$head" \
            '. + [if $b == "" then {path: $p, commit: $h} else {path: $p, branch: $b} end]' <<<"$worktrees")"
        fi
        path="" ;;
    esac
  done < <(git_in "$root" worktree list --porcelain; echo)

  # Hashes of files whose bytes name the directory, then the directory itself, by placeholder.
  local -a hashed=()
  while IFS= read -r -d '' f; do
    if grep -qF "$dir" "$f"; then
      sha="$(sha256sum "$f" | cut -d' ' -f1)"
      rel="repo/.iced/${f#"$dest/"}"
      case "$f" in "$dest/claims/"*) rel="repo/.git/iced/claims/${f#"$dest/claims/"}" ;; esac
      hashed+=("$sha=$rel")
    fi
  done < <(find "$dest/run" "$dest/claims" -type f -print0)
  while IFS= read -r -d '' f; do
    replace "$dir" "@DIR@" "$f"
    for entry in "${hashed[@]}"; do
      replace "${entry%%=*}" "@SHA256:${entry#*=}@" "$f"
    done
  done < <(find "$dest/run" "$dest/claims" -type f -print0)
  if grep -rlF "$work" "$dest"; then
    echo "$name: a saved file still names $work" >&2
    exit 1
  fi

  local run
  run="$(state -r '.runs | keys[0]')"
  jq -n --arg name "$name" --arg covers "$covers" --arg run "$run" --arg unit "$UNIT" \
    --arg commit "$made_by" --arg version "$version" --argjson worktrees "$worktrees" \
    --arg driver "$(state -r ".runs[\"$run\"].driver")" \
    '{name: $name, covers: $covers, made_by: {commit: $commit, version: $version},
      run: $run, unit: $unit, driver: $driver, worktrees: $worktrees}' >"$dest/fixture.json"
  echo "$name: $(find "$dest" -type f -printf '%s\n' | awk '{n += $1} END {print n}') bytes in $dest"
  shapes "$dest"
}

# Print the step records a fixture holds (state.json, then history.jsonl): step, attempt, status
# and the keys of its outcome, one level into the objects it holds: the shapes a later iced must
# keep reading.
shapes() {
  local filter='"  \(.step) attempt \(.attempt) \(.status): " + (if .outcome == null then "null" else
    [.outcome | to_entries[] | .key + (if (.value | type) == "object" and (.value | length) > 0
      then "{" + (.value | keys | join(",")) + "}" else "" end)] | join(" ") end)'
  echo " state.json:"
  jq -r ".runs[].lanes[].steps[] | $filter" "$1/run/state.json"
  if compgen -G "$1/run/*/history.jsonl" >/dev/null; then
    echo " history.jsonl:"
    jq -r "$filter" "$1"/run/*/history.jsonl
  fi
}

# ---- the fixtures ------------------------------------------------------------------------------

# (a) Host driver: the implementer of attempt 1 handed out, its report not handed in.
host_implement_handed() {
  setup '.verify.lenses = ["expectations", "failures"]'
  iced build "$UNIT" --no-wait --json >/dev/null
  step_until start_agent >/dev/null
  save "host driver: attempt 1's implementer handed to the host (implement started, handed) and not answered"
}

# (b) Host driver: the receipt verified, validator `expectations` answered, `failures` handed out
# (its sandbox made) and not answered.
host_validate_one_answered() {
  setup '.verify.lenses = ["expectations", "failures"]'
  iced build "$UNIT" --no-wait --json >/dev/null
  local s receipt
  s="$(step_until start_agent)"
  agent_commit "$(jq -r .worktree <<<"$s")" src/session.rs "sessions refresh on activity"
  receipt="$(jq -r .receipt_path <<<"$s")"
  printf '%s\n' "$GOOD_REPORT" >"$receipt"
  iced implement receipt "$receipt" --json >/dev/null
  s="$(step_until start_agent)"
  [ "$(jq -r .lens <<<"$s")" = expectations ]
  printf '%s\n' "$PASS" >"$(jq -r .receipt_path <<<"$s")"
  iced implement receipt "$(jq -r .receipt_path <<<"$s")" --json >/dev/null
  s="$(step_until start_agent)"
  [ "$(jq -r .lens <<<"$s")" = failures ]
  save "host driver: receipt verified; validator expectations answered (kept answer.json); validator failures handed out with its sandbox and not answered"
}

# (c) Process driver: attempt 1's finding confirmed by the refuter, attempt 2's implementer has
# finished its fix (its activity's outcome.json written) and the loop has not yet looked.
process_fix_round() {
  setup "$FAKE_RUNNER"' | .verify.lenses = ["full"] | .verify.commands = []' "attempt 1
role implementer
lens *
start *
commit src/session.rs sessions refresh on activity
report-ok E1 E2
attempt 2
role implementer
commit src/session.rs sessions refresh on activity, not on polls
report-fix $UNIT-F1 E1 E2
attempt 1
role validator
lens full
report $FAIL_S2
attempt 2
role validator
lens full
report $PASS
attempt *
role refuter
lens *
report $CONFIRM_F1
"
  iced build "$UNIT" --no-wait --json >/dev/null
  local i launched=""
  for i in $(seq 1 600); do
    step >/dev/null || true
    if state -e '.runs[].lanes[0] | .attempt == 2 and any(.steps[]; .step == "implement" and .status == "started" and .pid != null)' >/dev/null; then
      launched=1
      break
    fi
    state -e '.runs[] | .status == "running"' >/dev/null || { echo "$name: the run ended" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$launched" ] || { echo "$name: attempt 2 never launched" >&2; exit 1; }
  wait_activity implement-2
  save "process driver: attempt 1 judged with finding F1 confirmed by the refuter (history.jsonl); attempt 2's implementer finished (activity outcome.json) and not yet observed"
}

# Wait until the activity $1 of the lane has its outcome and its supervisor is gone.
wait_activity() {
  local adir i pid
  adir="$(ls -d "$dir"/repo/.iced/run/run-*/"$UNIT"/activities/"$1")"
  for i in $(seq 1 300); do
    if [ -f "$adir/outcome.json" ]; then
      pid="$(jq -r .pid "$adir/supervisor.json")"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
      return 0
    fi
    sleep 0.1
  done
  echo "$name: $1 did not finish" >&2
  exit 1
}

# (d) Process driver, `land.mode: merge`: delivered on the lane branch (the close committed), the
# landing not begun.
process_merge_delivered() {
  setup "$FAKE_RUNNER"' | .verify.lenses = ["full"] | .verify.commands = ["test -f src/session.rs"] | .land = {"mode": "merge"}' "attempt *
role implementer
lens *
start *
commit src/session.rs sessions refresh on activity
report-ok E1 E2
role validator
report $PASS
"
  iced build "$UNIT" --no-wait --json >/dev/null
  local i delivered=""
  for i in $(seq 1 600); do
    step >/dev/null || true
    if state -e '.runs[].lanes[0] | any(.steps[]; .step == "deliver" and .status == "done")' >/dev/null; then
      delivered=1
      break
    fi
    state -e '.runs[] | .status == "running"' >/dev/null || { echo "$name: the run ended" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$delivered" ] || { echo "$name: never delivered" >&2; exit 1; }
  if state -e '.runs[].lanes[0] | any(.steps[]; .step | test("^(integrate|retest|land|landcommit|retire)"))' >/dev/null; then
    echo "$name: the landing began in the call that delivered" >&2
    exit 1
  fi
  save "process driver, land.mode merge: definition of done, validator full and judge passed; delivered on the lane branch (deliver done); the landing not begun"
}

all=(host-implement-handed host-validate-one-answered process-fix-round process-merge-delivered)
for name in "${@:-${all[@]}}"; do
  case "$name" in
    host-implement-handed) host_implement_handed ;;
    host-validate-one-answered) host_validate_one_answered ;;
    process-fix-round) process_fix_round ;;
    process-merge-delivered) process_merge_delivered ;;
    *) echo "make-compat-fixture: no fixture $name (${all[*]})" >&2; exit 2 ;;
  esac
done
