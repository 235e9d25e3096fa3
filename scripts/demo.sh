#!/usr/bin/env bash
# A walk through the ICED record in a throwaway repository: init, a unit drafted from one line,
# its contract written, linted, signed off, then an Expectation edited after sign-off and caught.
# Uses the iced built from this checkout; nothing outside a temporary directory is touched.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --quiet --manifest-path "$here/Cargo.toml"
iced="$here/target/debug/iced"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
run() { printf '\n$ iced %s\n' "$*"; "$iced" "$@"; }

git init -q -b main . && git -c user.name=demo -c user.email=demo@example.invalid commit -q --allow-empty -m start
run init
run new "bug: sessions expire while people are still working"
id="$("$iced" status --json | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')"
unit="intent/$id/iced.md"
# Write the contract a person would write (everything after the frontmatter).
head -n "$(grep -n '^---$' "$unit" | sed -n 2p | cut -d: -f1)" "$unit" > "$unit.new"
cat >> "$unit.new" <<'BODY'

# Sessions expire while people are still working

## Intent

### Goal
People who are active stay signed in; idle sessions still end.

### Constraints
- [C1] Password checks are unchanged.

### Failure conditions
- [F1] An active person is signed out mid-task.

### Scope
- In: session refresh on activity
- Out: password policy

## Context
- [code] Sessions expire a fixed 5 minutes after sign-in.
- [assumed] Any authenticated request counts as activity.

## Expectations
- [E1] Activity extends the session. {goal: G1} {verify: test | tests/session_refresh}
- [E2] An idle session ends after 30 minutes. {goal: G2} {verify: test | tests/session_idle}

## Open questions
- [Q1] How long is idle? -> A: 30 minutes.
BODY
mv "$unit.new" "$unit"
run lint "$id" --stage signoff
run approve "$id" --yes
run status "$id"
printf '\n# Someone edits an Expectation after sign-off:\n'
sed -i 's/after 30 minutes/after 60 minutes/' "$unit"
run lint "$id" --stage validate || printf '(exit %s: the contract changed after approval)\n' "$?"
