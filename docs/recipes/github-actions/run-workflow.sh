#!/usr/bin/env bash
# An iced remote runner (SPEC 20.19) that runs each agent as a GitHub Actions workflow run,
# through `gh`:
#
#   "runners": { "gha": { "kind": "command", "workspace": "remote", "timeoutSec": 3600,
#       "argv": ["/path/to/run-workflow.sh", "{output_file}"],
#       "env": { "ICED_GH_REPO": "acme/app", "ICED_GH_WORKFLOW": "iced-lane.yml", "ICED_GH_REF": "main",
#                "GH_TOKEN": "${GH_TOKEN}" } } }
#
# iced starts it with the brief on standard input and ICED_REMOTE_URL, ICED_BRANCH, ICED_BASE,
# ICED_HEAD, ICED_ROLE, ICED_LENS, ICED_RUN, ICED_LANE and ICED_ATTEMPT in its environment. It
# starts iced-lane.yml (beside this file; copied to .github/workflows/) with `gh workflow run`,
# the brief gzipped and base64-encoded as an input (a workflow's inputs hold at most 65,535
# characters), finds the run by the token its run-name carries, waits with `gh run watch
# --exit-status`, and copies a validator's log to {output_file} (its answer is the last fenced
# json block in it). Stopped (iced's timeout, `iced run abandon`: SIGINT or SIGTERM), it cancels
# the workflow run first, so the agent stops where it runs too.
set -uo pipefail
out="${1:?usage: run-workflow.sh <output file>}"
repo=(--repo "${ICED_GH_REPO:?set runners.<name>.env.ICED_GH_REPO to owner/name}")
workflow="${ICED_GH_WORKFLOW:-iced-lane.yml}"
token="$(printf '%s\n' "$ICED_RUN" "$ICED_LANE" "$ICED_ROLE" "${ICED_LENS:-}" "$ICED_ATTEMPT" | sha256sum | cut -c1-16)"
role="$ICED_ROLE${ICED_LENS:+:$ICED_LENS}"
brief="$(gzip -9 | base64 -w0)"

id=""
watcher=""
stopped() {
  trap - INT TERM
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null
  [ -n "$id" ] && gh run cancel "$id" "${repo[@]}" >/dev/null
  exit 143
}
trap stopped INT TERM

gh workflow run "$workflow" "${repo[@]}" --ref "${ICED_GH_REF:-main}" \
  -f token="$token" -f remote_url="$ICED_REMOTE_URL" -f branch="$ICED_BRANCH" -f head="$ICED_HEAD" \
  -f role="$role" -f lane="$ICED_RUN $ICED_LANE $ICED_ATTEMPT $ICED_BASE" -f brief="$brief" >/dev/null || exit 70
# The run it started: the one whose run-name carries the token (it may take a moment to be listed).
while [ -z "$id" ]; do
  id=$(gh run list --workflow "$workflow" "${repo[@]}" --json databaseId,displayTitle \
    --jq ".[] | select(.displayTitle == \"iced $token\") | .databaseId" | head -1)
  [ -n "$id" ] || { sleep 2 & wait $!; }
done
gh run watch "$id" --exit-status "${repo[@]}" >/dev/null &
watcher=$!
wait "$watcher"
rc=$?
watcher=""
[ "$rc" = 0 ] || rc=1
if [ "$ICED_ROLE" != implementer ]; then
  gh run view "$id" --log "${repo[@]}" >"$out"
fi
exit "$rc"
