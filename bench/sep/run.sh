#!/usr/bin/env bash
# Separate-process comparison (issue 11's method): a bare go-sdk server
# ("direct"), or the gateway and its echo agent in two processes
# ("gateway", "gateway-cached"; spacefix-bench -serve … -alone and -serve
# agent), and `spacefix bench` calling echo from a fourth process. Server
# CPU per call is read from /proc/<pid>/stat (user + system) of the server
# processes around each measured run. Targets rotate within each round.
# Every process runs with the default GOGC (100).
#
#   bash bench/sep/run.sh [rounds] [calls] [concurrency] [protocol...]
#
# TARGETS picks the targets (default "direct gateway gateway-cached");
# "gateway gateway-50-rules" measures what a policy of 50 rules adds;
# "gateway gateway-interceptor interceptor" what an interceptor server
# adds against its bare round trip (a go-sdk client sending
# interceptor/invoke to the same server; its own CPU per call is printed).
# PROFILE_DIR (a directory) keeps a CPU profile of each server process
# (the gateway or the direct server) per run, TARGET-PROTOCOL-ROUND.prof:
# the share of its samples in one part (the policy, say) is that part's
# server CPU, read within one run and so steadier than a difference of two.
#
# Prints one line per run: round, protocol, target, calls/s, p50 ms, server
# CPU µs/call (for the gateway: gateway + agent, and each).
set -euo pipefail
rounds=${1:-3} calls=${2:-20000} conc=${3:-16}
shift $(( $# < 3 ? $# : 3 ))
protocols=("$@")
[ ${#protocols[@]} -gt 0 ] || protocols=(2025-11-25 2026-07-28)
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d)
pids=()
trap 'kill -INT "${pids[@]}" 2>/dev/null || true; rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/sfb" ./bench/cmd/spacefix-bench && go build -o "$bin/spacefix" ./cmd/spacefix)
hz=$(getconf CLK_TCK)
cpu() { local n=0; for p in "$@"; do n=$((n + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$n"; }
us() { awk -v t="$1" -v hz="$hz" -v n="$calls" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }'; }
field() { grep -o "\"$1\": [0-9.]*" <<< "$2" | awk '{print $2}'; }
read -r -a targets <<< "${TARGETS:-direct gateway gateway-cached}"
n=${#targets[@]}
for round in $(seq "$rounds"); do
  for k in $(seq 0 $((n - 1))); do
    t=${targets[$(( (k + round - 1) % n ))]}
    for proto in "${protocols[@]}"; do
      pids=()
      if [ "$t" = interceptor ] || [ "$t" = gateway-interceptor ]; then
        : > "$bin/ic"
        "$bin/sfb" -serve interceptor > "$bin/ic" 2>> "$bin/err" &
        pids+=($!)
        for _ in $(seq 100); do [ -s "$bin/ic" ] && break; sleep 0.1; done
        read -r icurl < "$bin/ic"
      fi
      if [ "$t" = interceptor ]; then
        # The bare round trip: a go-sdk client (this script's fourth
        # process) sends interceptor/invoke to the interceptor server.
        "$bin/sfb" -invoke "$icurl" -calls 2000 -concurrency "$conc" > /dev/null
        before=$(cpu "${pids[@]}")
        out=$("$bin/sfb" -invoke "$icurl" -calls "$calls" -concurrency "$conc")
        after=$(cpu "${pids[@]}")
        kill -INT "${pids[@]}"; wait "${pids[@]}" || true
        pids=()
        printf "%d %s %-19s                 p50 %6.3f ms  server CPU %6s µs/call (interceptor; its client %s µs/call)\n" \
          "$round" "$proto" "$t" "$(field p50Ms "$out")" "$(us $((after - before)))" "$(field cpuUsPerCall "$out")"
        continue
      fi
      : > "$bin/ep"
      alone=()
      [ "$t" = direct ] || alone=(-alone)
      [ "$t" = gateway-interceptor ] && alone+=(-interceptor-url "$icurl")
      [ -z "${PROFILE_DIR:-}" ] || alone+=(-cpuprofile "$PROFILE_DIR/$t-$proto-$round.prof")
      "$bin/sfb" -serve "$t" "${alone[@]}" > "$bin/ep" 2>> "$bin/err" &
      gw=$!
      pids=("$gw" "${pids[@]}")
      want=1; [ "$t" = direct ] || want=2
      for _ in $(seq 100); do [ "$(wc -l < "$bin/ep")" -ge "$want" ] && break; sleep 0.1; done
      read -r ep key < "$bin/ep"
      if [ "$t" != direct ]; then
        read -r url akey < <(sed -n 2p "$bin/ep")
        "$bin/sfb" -serve agent -agent-url "$url" -agent-key "$akey" 2>> "$bin/err" &
        agent=$!
        pids+=("$agent")
      fi
      args=(--url "$ep" --key "$key" --tool echo --args '{"text":"hello"}' --protocol "$proto")
      for _ in $(seq 100); do
        [ "$(field errors "$("$bin/spacefix" bench "${args[@]}" --calls 1 --json 2>/dev/null)")" = 0 ] && break
        sleep 0.1
      done
      "$bin/spacefix" bench "${args[@]}" --concurrency "$conc" --calls 2000 --json > /dev/null 2>&1
      before=$(cpu "${pids[@]}"); b0=$(cpu "$gw"); ba=$(cpu "${agent:-$gw}")
      out=$("$bin/spacefix" bench "${args[@]}" --concurrency "$conc" --calls "$calls" --json 2> /dev/null)
      after=$(cpu "${pids[@]}"); a0=$(cpu "$gw"); aa=$(cpu "${agent:-$gw}")
      kill -INT "${pids[@]}"; wait "${pids[@]}" || true
      pids=()
      split=""
      if [ "$t" = gateway-interceptor ]; then
        split=" (gateway $(us $((a0 - b0))) + agent $(us $((aa - ba))) + interceptor $(us $((after - before - a0 + b0 - aa + ba))))"
      elif [ "$t" != direct ]; then
        split=" (gateway $(us $((a0 - b0))) + agent $(us $((after - before - a0 + b0))))"
      fi
      unset agent
      printf "%d %s %-19s %6.0f calls/s  p50 %6.3f ms  server CPU %6s µs/call%s  errors %s\n" \
        "$round" "$proto" "$t" "$(field callsPerSecond "$out")" "$(field p50Ms "$out")" "$(us $((after - before)))" "$split" "$(field errors "$out")"
    done
  done
done
