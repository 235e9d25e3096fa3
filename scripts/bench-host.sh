#!/usr/bin/env bash
# What a host spends on one run (issue 12, item 6): a throwaway repository holds one approved unit of
# tier M, driven by the host driver (no runner configured) with three lenses (`verify.lenses`
# auto), refute on (the default) and one definition-of-done command, everything passing. This
# script is the host: it calls `iced build <id> --json`, then, for each agent a call answers with
# `start_agent`, plays the agent (the implementer commits and reports; each validator passes) and
# hands its report in with `iced implement receipt <path> --until-host --wait 600 --json`, until
# an answer is not a `start_agent`; then, if that answer is not the end, one `iced implement step
# --until-host --wait 600 --json`.
#
# Printed: every call with the bytes it printed (stdout and stderr, what a host reads), then the
# calls, the agents, the bytes read and the bytes of the briefs handed to agents. Issue 12 bounds
# the run at 6 calls (1 build, 4 receipts, 1 final step) and 3 KB read besides the briefs.
#
# Environment: ICED_BENCH_BIN (the iced to measure; default: a debug build of this checkout),
# ICED_BENCH_KEEP=1 (keep the work directory and print its path). Needs git and python3.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${ICED_BENCH_BIN:-}" ]; then
  iced="$(realpath "$ICED_BENCH_BIN")"
else
  cargo build --quiet --manifest-path "$here/Cargo.toml"
  iced="$(realpath "${CARGO_TARGET_DIR:-$here/target}/debug/iced")"
fi

work="$(mktemp -d)"
cleanup() {
  if [ "${ICED_BENCH_KEEP:-}" = 1 ]; then
    echo "work directory: $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

repo="$work/repo"
mkdir -p "$repo"
cd "$repo"
git init -q -b main .
git config user.name bench
git config user.email bench@example.invalid
git config commit.gpgsign false
echo bench >README.md
git add . && git commit -q -m init
"$iced" init >/dev/null
id="$("$iced" new "session timeout" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
unit="intent/$id/iced.md"
head -n "$(grep -n '^---$' "$unit" | sed -n 2p | cut -d: -f1)" "$unit" | sed 's/^tier: .*/tier: M/' >"$unit.new"
{ printf '\n# Session timeout\n\n'; cat "$here/scripts/unit-body.md"; } >>"$unit.new"
mv "$unit.new" "$unit"
"$iced" approve "$id" --yes >/dev/null
python3 - <<'PY'
import json
with open(".iced/config.json") as f:
    config = json.load(f)
config["verify"]["independent"] = True
config["verify"]["lenses"] = "auto"
config["verify"]["refute"] = True
config["verify"]["commands"] = ["test -f src/session.rs"]
with open(".iced/config.json", "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
PY
"$iced" trust >/dev/null
git add -A && git commit -q -m "approve $id"

# The host: every call, what it printed, and the agents it starts, in python for the JSON.
python3 - "$iced" "$id" "$repo" <<'PY'
import json, os, subprocess, sys

iced, unit, repo = sys.argv[1], sys.argv[2], sys.argv[3]
calls, read, briefs, agents = 0, 0, 0, []
WAIT = ["--until-host", "--wait", "600", "--json"]
PASS = {"verdict": "pass",
        "expectations": [{"id": "E1", "result": "pass", "evidence": "tests/session.rs passes"},
                         {"id": "E2", "result": "pass", "evidence": "tests/session.rs passes"}],
        "failures": [{"id": "F1", "triggered": False, "evidence": "never signed out"}],
        "constraints": [{"id": "C1", "violated": False, "evidence": "passwords untouched"}],
        "notes": "read the diff"}
REPORT = {"summary": "sessions refresh on activity",
          "evidence": [{"expectation": "E1", "kind": "test", "ref": "tests/session.rs"},
                       {"expectation": "E2", "kind": "test", "ref": "tests/session.rs"}]}

def call(args):
    global calls, read
    done = subprocess.run([iced] + args, cwd=repo, capture_output=True, text=True)
    calls += 1
    n = len(done.stdout.encode()) + len(done.stderr.encode())
    read += n
    print(f"call {calls}: iced {' '.join(args)}: exit {done.returncode}, {n} bytes")
    lines = [l for l in done.stdout.splitlines() if l.strip()]
    answers = [json.loads(l) for l in lines]
    # `build --json` prints a line per change, then {run, status, action}: the host's answer is
    # its last step line.
    steps = [a for a in answers if "next" in a]
    return steps[-1] if steps else answers[-1]

def from_root(path):
    return path if os.path.isabs(path) else os.path.join(repo, path)

def receipt_of(answer):
    if "receipt_path" in answer:
        return answer["receipt_path"]
    nxt = answer["next"]
    start = nxt.index("iced implement receipt ") + len("iced implement receipt ")
    return nxt[start:nxt.index(" --until-host")]

def play(answer):
    """The agent: reads its brief, does its work, writes its report."""
    global briefs
    brief = from_root(answer["brief"])
    briefs += os.path.getsize(brief)
    agents.append(answer.get("role", "?") + (f" ({answer['lens']})" if answer.get("lens") else ""))
    receipt = from_root(receipt_of(answer))
    if answer["role"] == "implementer":
        text = open(brief).read()
        worktree = text.split("- Worktree: `", 1)[1].split("`", 1)[0]
        os.makedirs(os.path.join(worktree, "src"), exist_ok=True)
        with open(os.path.join(worktree, "src/session.rs"), "w") as f:
            f.write("// sessions refresh on activity\n")
        subprocess.run(["git", "add", "-A"], cwd=worktree, check=True)
        subprocess.run(["git", "commit", "-q", "-m", "refresh sessions on activity"],
                       cwd=worktree, check=True)
        body = REPORT
    else:
        body = PASS
    with open(receipt, "w") as f:
        json.dump(body, f)
    return receipt_of(answer)

answer = call(["build", unit, "--json"])
while answer["action"] == "start_agent":
    answer = call(["implement", "receipt", play(answer)] + WAIT)
if answer["action"] not in ("delivered", "blocked", "handback"):
    answer = call(["implement", "step"] + WAIT)
print(f"end: {answer['action']}")
print(f"agents: {len(agents)} ({', '.join(agents)})")
print(f"calls: {calls}")
print(f"bytes read: {read}")
print(f"bytes of briefs: {briefs}")
sys.exit(0 if answer["action"] == "delivered" else 1)
PY
