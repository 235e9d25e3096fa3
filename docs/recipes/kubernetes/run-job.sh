#!/usr/bin/env bash
# An iced remote runner (SPEC 20.19) that runs each agent as a Kubernetes Job, through `kubectl`.
#
#   "runners": { "k8s": { "kind": "command", "workspace": "remote", "timeoutSec": 3600,
#       "argv": ["/path/to/run-job.sh", "{output_file}"],
#       "env": { "ICED_K8S_IMAGE": "ghcr.io/acme/iced-agent:1", "ICED_K8S_NAMESPACE": "agents" } } }
#
# iced starts it with the brief on standard input and ICED_REMOTE_URL, ICED_BRANCH, ICED_BASE,
# ICED_HEAD, ICED_ROLE, ICED_LENS, ICED_RUN, ICED_LANE and ICED_ATTEMPT in its environment. It
# puts the brief in a ConfigMap, creates the Job from job.yaml (beside this file), waits for it to
# complete or fail, copies a validator's logs to {output_file} (its answer is the last fenced json
# block in them), and deletes both. Stopped (iced's timeout, `iced run abandon`: SIGINT or
# SIGTERM), it deletes the Job first, so the agent stops where it runs too.
set -uo pipefail
out="${1:?usage: run-job.sh <output file>}"
image="${ICED_K8S_IMAGE:?set runners.<name>.env.ICED_K8S_IMAGE to the agent image}"
ns=(--namespace "${ICED_K8S_NAMESPACE:-default}")
here="$(cd "$(dirname "$0")" && pwd)"
# One Job per (run, lane, role, lens, attempt); a DNS-1123 name.
name="iced-$(printf '%s\n' "$ICED_RUN" "$ICED_LANE" "$ICED_ROLE" "${ICED_LENS:-}" "$ICED_ATTEMPT" | sha256sum | cut -c1-16)"

cleanup() {
  kubectl "${ns[@]}" delete job "$name" --ignore-not-found --wait=false >/dev/null
  kubectl "${ns[@]}" delete configmap "$name" --ignore-not-found >/dev/null
}
stopped() {
  trap - INT TERM
  kill "${waiters[@]}" 2>/dev/null
  cleanup
  exit 143
}
waiters=()
trap stopped INT TERM

kubectl "${ns[@]}" create configmap "$name" --from-file=brief.md=/dev/stdin >/dev/null || exit 70
# Every @KEY@ of job.yaml sits in a YAML double-quoted string: each value goes in escaped for one
# (a backslash, a quote, a line break), and in as it is otherwise, `&` and `|` included: no sed, no
# value read as a pattern or a replacement.
job="$(<"$here/job.yaml")"
fill() {
  local v=$2
  v=${v//\\/\\\\}
  v=${v//\"/\\\"}
  v=${v//$'\n'/\\n}
  v=${v//$'\r'/\\r}
  v=${v//$'\t'/\\t}
  job=${job//"@$1@"/"$v"}
}
fill NAME "$name"
fill IMAGE "$image"
fill REMOTE_URL "$ICED_REMOTE_URL"
fill BRANCH "$ICED_BRANCH"
fill BASE "$ICED_BASE"
fill HEAD "$ICED_HEAD"
fill ROLE "$ICED_ROLE"
fill LENS "${ICED_LENS:-}"
fill RUN "$ICED_RUN"
fill LANE "$ICED_LANE"
fill ATTEMPT "$ICED_ATTEMPT"
printf '%s\n' "$job" | kubectl "${ns[@]}" apply -f - >/dev/null || { cleanup; exit 70; }

# Complete or failed, whichever comes first; waited for in the background so a signal is handled
# at once.
kubectl "${ns[@]}" wait --for=condition=complete --timeout=-1s "job/$name" >/dev/null 2>&1 &
waiters+=($!)
complete=$!
kubectl "${ns[@]}" wait --for=condition=failed --timeout=-1s "job/$name" >/dev/null 2>&1 &
waiters+=($!)
wait -n -p ended "${waiters[@]}"
rc=$?
[ "$ended" = "$complete" ] && [ "$rc" = 0 ] || rc=1
kill "${waiters[@]}" 2>/dev/null

if [ "$ICED_ROLE" != implementer ]; then
  kubectl "${ns[@]}" logs "job/$name" >"$out"
fi
kubectl "${ns[@]}" logs "job/$name" >&2
cleanup
exit "$rc"
