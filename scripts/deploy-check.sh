#!/usr/bin/env bash
# Checks the deploy/ stack without a Docker engine:
#   static: docker compose config -q (compose built from the Go module proxy, tools/compose);
#           promtool check config / check rules / test rules; amtool check-config; the collector
#           configs (the stack's, and the team gateway's gateway and sampler tiers) validated by a
#           collector built with ocb (tools/otelcol), the Jaeger config by Jaeger; the Helm chart
#           (deploy/helm/cctrace) linted and rendered with each of its value sets by helm built
#           from the Go module proxy (tools/helm), every rendered object checked against the
#           Kubernetes API types (deploy/helm/check); the Go tests of deploy/ (metric names) and
#           deploy/check (PromQL, dashboards, compose and Dockerfile invariants).
#   live:   cctrace, the fake Anthropic upstream, the ocb-built collector, Jaeger, Prometheus and
#           Alertmanager as processes on 127.0.0.1 with deploy/'s own configs (addresses and
#           intervals substituted, the hourly budget lowered); a scripted Claude Code-like session
#           through cctrace, of a person with a one-cent daily budget, makes CctraceHourlySpendHigh
#           and CctracePersonDailyBudgetSpent fire and reach Alertmanager (the latter routed to
#           the person's team), and its trace reach Jaeger through the collector.
#
# Usage: scripts/deploy-check.sh [static|live|all]   (default: all)
#
# Builds are cached in scripts/tools.sh's cache, $CCTRACE_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/cctrace), in <tool>-<version>/. The collector,
# helm, Jaeger, Prometheus, promtool, Alertmanager and amtool come from scripts/tools.sh
# (CCTRACE_*_BIN may point at them).
# Outside CI a component that cannot be had is skipped with a notice; under CI=true it fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# scripts/tools.sh's functions and its cache directory (CCTRACE_CACHE), shared with every check.
# shellcheck source=scripts/tools.sh
source "$ROOT/scripts/tools.sh"
CACHE=$CCTRACE_CACHE
MODE=${1:-all}
IN_CI=false
[ "${CI:-}" = true ] && IN_CI=true

case "$MODE" in
static | live | all) ;;
*)
	echo "usage: $0 [static|live|all]" >&2
	exit 2
	;;
esac

log() { printf '[deploy-check] %s\n' "$*" >&2; }

FAILED=()
# step NAME CMD...: runs CMD, logs its time, and records a failure without stopping the rest.
step() {
	local name=$1 start rc=0
	shift
	start=$(date +%s)
	"$@" || rc=$?
	if [ $rc -eq 0 ]; then
		log "ok    $name ($(($(date +%s) - start))s)"
	else
		log "FAIL  $name (exit $rc, $(($(date +%s) - start))s)"
		FAILED+=("$name")
	fi
	return 0
}

# missing WHAT: a component could not be had; a failure in CI, a notice elsewhere.
missing() {
	if $IN_CI; then
		log "FAIL  $1 is missing (CI=true: nothing is skipped)"
		FAILED+=("missing: $1")
	else
		log "skip  $1 is missing"
	fi
}

# --- tools ------------------------------------------------------------------------------------

COMPOSE_BIN=${CCTRACE_COMPOSE_BIN:-}
OTELCOL_BIN=${CCTRACE_OTELCOL_BIN:-}
HELM_BIN=${CCTRACE_HELM_BIN:-}
JAEGER_BIN=${CCTRACE_JAEGER_BIN:-}
PROMETHEUS_BIN=${CCTRACE_PROMETHEUS_BIN:-}
PROMTOOL_BIN=${CCTRACE_PROMTOOL_BIN:-}
ALERTMANAGER_BIN=${CCTRACE_ALERTMANAGER_BIN:-}
AMTOOL_BIN=${CCTRACE_AMTOOL_BIN:-}

# install_shared_tools takes docker compose, the collector, helm, Jaeger, Prometheus and
# Alertmanager from scripts/tools.sh, the one place that pins and installs them for every check of
# the repo.
install_shared_tools() {
	local rc=0
	tools_timed "prometheus+alertmanager+nginx (apt)" install_prometheus || rc=1
	tools_timed "jaeger" install_jaeger || rc=1
	tools_timed "otelcol (ocb)" install_otelcol || rc=1
	tools_timed "helm" install_helm || rc=1
	tools_timed "docker compose" install_compose || rc=1
	COMPOSE_BIN=${CCTRACE_COMPOSE_BIN:-}
	OTELCOL_BIN=${CCTRACE_OTELCOL_BIN:-}
	HELM_BIN=${CCTRACE_HELM_BIN:-}
	JAEGER_BIN=${CCTRACE_JAEGER_BIN:-}
	PROMETHEUS_BIN=${CCTRACE_PROMETHEUS_BIN:-}
	PROMTOOL_BIN=${CCTRACE_PROMTOOL_BIN:-}
	ALERTMANAGER_BIN=${CCTRACE_ALERTMANAGER_BIN:-}
	AMTOOL_BIN=${CCTRACE_AMTOOL_BIN:-}
	return $rc
}

have() { [ -n "${1:-}" ] && [ -x "$1" ]; }

# --- static checks ----------------------------------------------------------------------------

check_compose() {
	"$COMPOSE_BIN" -f "$ROOT/deploy/docker-compose.yml" config -q || return 1
	# The same through the docker CLI, as users run it, when the client is installed: the
	# plugin is linked into a private DOCKER_CONFIG so that ~/.docker is left alone.
	if command -v docker >/dev/null; then
		local cfg
		cfg=$(mktemp -d)
		mkdir -p "$cfg/cli-plugins"
		ln -s "$COMPOSE_BIN" "$cfg/cli-plugins/docker-compose"
		DOCKER_CONFIG=$cfg docker compose -f "$ROOT/deploy/docker-compose.yml" config -q || {
			rm -rf "$cfg"
			return 1
		}
		rm -rf "$cfg"
	fi
}

check_prometheus() {
	(cd "$ROOT/deploy/prometheus" &&
		"$PROMTOOL_BIN" check config prometheus.yml &&
		"$PROMTOOL_BIN" check rules rules/*.yml &&
		"$PROMTOOL_BIN" test rules tests/*.yml)
}

check_alertmanager() {
	local cfg="$ROOT/deploy/alertmanager/alertmanager.yml"
	"$AMTOOL_BIN" check-config "$cfg" || return 1
	# Budget alerts go to their team's receiver; a team without a route, and other alerts, to the
	# webhook; limit alerts to the limits receiver, critical ones too.
	route_is team-platform alertname=CctracePersonDailyBudgetSpent team=platform user=alice &&
		route_is team-platform alertname=CctraceTeamMonthlyBudgetSpent team=platform &&
		route_is webhook alertname=CctraceTeamDailyBudgetSpent team=search &&
		route_is webhook alertname=CctraceHourlySpendHigh severity=warning &&
		route_is limits alertname=CctraceRateLimitWindowHigh category=ratelimit severity=warning account=acct-0123456789abcdef window=5h &&
		route_is limits alertname=CctraceRateLimitRejected category=ratelimit severity=critical account=acct-0123456789abcdef window=7d
}

# route_is RECEIVER LABEL=VALUE...: Alertmanager's routing tree sends an alert with those labels
# to RECEIVER.
route_is() {
	local want=$1 got
	shift
	got=$("$AMTOOL_BIN" config routes test --config.file="$ROOT/deploy/alertmanager/alertmanager.yml" "$@" 2>/dev/null) || true
	[ "$got" = "$want" ] || {
		log "an alert with $* goes to ${got:-nothing}, want $want"
		return 1
	}
}

check_collector() {
	local f
	for f in config gateway sampler; do
		"$OTELCOL_BIN" validate --config "$ROOT/deploy/otel-collector/$f.yaml" || return 1
	done
}

# The chart with its defaults and with each value set of its ci/ directory: helm lint --strict,
# then helm template (rendering alone, nothing fetched).
check_helm_chart() {
	local chart="$ROOT/deploy/helm/cctrace" values args
	for values in "" "$chart"/ci/*-values.yaml; do
		args=()
		[ -n "$values" ] && args=(--values "$values")
		"$HELM_BIN" lint --strict "$chart" "${args[@]}" || return 1
		"$HELM_BIN" template cctrace "$chart" --namespace team-tools "${args[@]}" >/dev/null || return 1
	done
}

# Every rendered object decoded strictly into its Kubernetes API type, and the chart's collector
# configs validated by the collector.
check_helm_objects() {
	(cd "$ROOT/deploy/helm/check" && go vet ./... &&
		CCTRACE_HELM_BIN=$HELM_BIN CCTRACE_OTELCOL_BIN=$OTELCOL_BIN go test -count=1 ./...)
}

check_jaeger() { "$JAEGER_BIN" validate --config "$ROOT/deploy/jaeger/config.yaml"; }

check_go_main() { (cd "$ROOT" && go test -count=1 ./deploy/...); }

check_go_module() { (cd "$ROOT/deploy/check" && go vet ./... && go test -count=1 ./...); }

# --- live run ---------------------------------------------------------------------------------

WORK=""
PIDS=()
# Ports of the live run, set by take_port.
CCTRACE_PORT="" CCTRACE_METRICS_PORT="" PROM_PORT="" AM_PORT="" JAEGER_QUERY_PORT=""

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
	[ -n "$WORK" ] && rm -rf "$WORK"
	WORK=""
}
trap cleanup EXIT
# Turn signals into an exit, so that the EXIT trap stops the servers this run started.
trap 'exit 130' INT
trap 'exit 143' TERM

USED_PORTS=" "
PORT_LOW=20000
PORT_HIGH=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$PORT_HIGH" -gt $((PORT_LOW + 1000)) ] || PORT_HIGH=$((PORT_LOW + 10000))
# take_port VAR sets VAR to a TCP port on 127.0.0.1 that nothing listens on now and that this run
# has not handed out yet, below the kernel's ephemeral range so that no outgoing connection takes
# it before its server binds it. It runs in the current shell: $RANDOM repeats itself across $(…).
take_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((PORT_LOW + RANDOM % (PORT_HIGH - PORT_LOW)))
		case "$USED_PORTS" in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			USED_PORTS+="$p "
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	return 1
}

# start NAME CMD...: runs CMD in the background with its output in $WORK/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	printf -v "PID_${name}" '%s' "$!"
}

# wait_http NAME URL SECONDS: waits for URL to answer 2xx.
wait_http() {
	local name=$1 url=$2 deadline=$(($(date +%s) + $3))
	local pid_var="PID_${name}"
	until curl -fs -o /dev/null --max-time 2 "$url"; do
		if ! kill -0 "${!pid_var}" 2>/dev/null || [ "$(date +%s)" -ge "$deadline" ]; then
			log "$name did not answer $url; its log:"
			tail -30 "$WORK/$name.log" >&2 || true
			return 1
		fi
		sleep 0.5
	done
}

# chat SESSION BODY: one streamed Messages API request through cctrace, as Claude Code sends it.
# A broken stream fails the check: cctrace must never cut a stream short.
chat() {
	chat_once "$@" || {
		log "a request through cctrace failed (see the curl error above)"
		return 1
	}
}

chat_once() {
	curl -fsS --max-time 30 -N "http://127.0.0.1:$CCTRACE_PORT/v1/messages?beta=true" \
		-H 'content-type: application/json' \
		-H 'anthropic-version: 2023-06-01' \
		-H 'x-api-key: deploy-check-not-a-key' \
		-H "X-Claude-Code-Session-Id: $1" \
		-H "X-Cctrace-User: $PERSON" \
		-H 'User-Agent: claude-cli/2.1.328 (external, cli)' \
		--data-binary "$2"
}

# turn SESSION N: one agentic turn of the tool_roundtrip scenario: the prompt, a Bash tool_use,
# its tool_result, the final answer.
turn() {
	local session=$1 n=$2 prompt sse id
	local model=claude-sonnet-4-5
	# Claude Code offers its tools on every main-chain request; without them the fake upstream
	# takes the request for a tool-less side request.
	local tools='"tools":[{"name":"Bash","description":"Run a shell command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}]'
	prompt="Run echo hello-$n and tell me what it printed."
	sse=$(chat "$session" '{"model":"'$model'","max_tokens":1024,"stream":true,'"$tools"',
		"messages":[{"role":"user","content":[{"type":"text","text":"'"$prompt"'"}]}]}') || return 1
	id=$(printf '%s' "$sse" | grep -o '"id":"toolu_[A-Za-z0-9_]*"' | head -1 | cut -d'"' -f4)
	[ -n "$id" ] || {
		log "turn $n: no tool_use in the first response"
		return 1
	}
	sse=$(chat "$session" '{"model":"'$model'","max_tokens":1024,"stream":true,'"$tools"',
		"messages":[{"role":"user","content":[{"type":"text","text":"'"$prompt"'"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"'"$id"'","name":"Bash",
			"input":{"command":"echo hello-fakeapi","description":"Print a greeting"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"'"$id"'",
			"content":"hello-fakeapi"}]}]}') || return 1
	printf '%s' "$sse" | grep -q '"stop_reason":"end_turn"' || {
		log "turn $n: the second response did not end the turn"
		return 1
	}
}

# poll SECONDS DESCRIPTION CMD...: retries CMD every second until it succeeds.
poll() {
	local deadline=$(($(date +%s) + $1)) what=$2
	shift 2
	until "$@"; do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			log "timed out waiting for $what"
			return 1
		fi
		sleep 1
	done
}

# PERSON is who the live run's requests say they are from (the X-Cctrace-User header); the
# directory it writes names them, in team platform, with a daily budget of a cent.
PERSON=dana

# budget_alert_routed checks that the person's budget alert reached Alertmanager, with their
# team, and went to the team's receiver.
budget_alert_routed() {
	local out
	out=$(curl -fsS "http://127.0.0.1:$AM_PORT/api/v2/alerts?filter=alertname%3D%22CctracePersonDailyBudgetSpent%22") || return 1
	printf '%s' "$out" | grep -q "\"user\":\"$PERSON\"" &&
		printf '%s' "$out" | grep -q '"team":"platform"' &&
		printf '%s' "$out" | grep -q '"name":"team-platform"'
}

alert_in_alertmanager() {
	curl -fsS "http://127.0.0.1:$AM_PORT/api/v2/alerts?filter=alertname%3D%22CctraceHourlySpendHigh%22" |
		grep -q '"alertname":"CctraceHourlySpendHigh"'
}

trace_in_jaeger() {
	local out
	out=$(curl -fsS "http://127.0.0.1:$JAEGER_QUERY_PORT/api/traces?service=cctrace&limit=20&lookback=1h") || return 1
	printf '%s' "$out" | grep -q '"operationName":"invoke_agent claude-code"' &&
		printf '%s' "$out" | grep -q '"operationName":"execute_tool Bash"'
}

# exemplar_trace_in_jaeger checks the metrics-to-traces link Grafana uses: a trace id that
# Prometheus stored as an exemplar of cctrace's cost counter is a trace Jaeger has.
exemplar_trace_in_jaeger() {
	local now tid
	now=$(date +%s)
	tid=$(curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/query_exemplars" \
		--data-urlencode 'query=cctrace_cost_usd_total' \
		--data-urlencode "start=$((now - 600))" --data-urlencode "end=$((now + 60))" |
		grep -o '"trace_id":"[0-9a-f]\{32\}"' | head -1 | cut -d'"' -f4) || return 1
	[ -n "$tid" ] || return 1
	curl -fsS "http://127.0.0.1:$JAEGER_QUERY_PORT/api/traces/$tid" | grep -q "\"traceID\":\"$tid\""
}

live_run() {
	WORK=$(mktemp -d)
	local bin="$WORK/bin"
	mkdir -p "$bin" "$WORK/prometheus/rules" "$WORK/tsdb" "$WORK/am"
	(cd "$ROOT" && CGO_ENABLED=0 go build -o "$bin/" ./cmd/cctrace ./cmd/cctrace-fakeapi) || return 1

	local p
	for p in JAEGER_OTLP_PORT JAEGER_OTLP_HTTP_PORT JAEGER_QUERY_PORT JAEGER_QUERY_GRPC_PORT \
		JAEGER_HEALTH_PORT JAEGER_METRICS_PORT OTEL_GRPC_PORT OTEL_HTTP_PORT OTEL_HEALTH_PORT \
		OTEL_METRICS_PORT TEMPO_PORT CCTRACE_PORT CCTRACE_METRICS_PORT PROM_PORT AM_PORT; do
		take_port "$p" || return 1
	done

	# Jaeger: deploy/jaeger/config.yaml with every listener on 127.0.0.1.
	JAEGER_OTLP_GRPC_ENDPOINT=127.0.0.1:$JAEGER_OTLP_PORT \
		JAEGER_OTLP_HTTP_ENDPOINT=127.0.0.1:$JAEGER_OTLP_HTTP_PORT \
		JAEGER_QUERY_HTTP_ENDPOINT=127.0.0.1:$JAEGER_QUERY_PORT \
		JAEGER_QUERY_GRPC_ENDPOINT=127.0.0.1:$JAEGER_QUERY_GRPC_PORT \
		JAEGER_HEALTH_ENDPOINT=127.0.0.1:$JAEGER_HEALTH_PORT \
		JAEGER_METRICS_HOST=127.0.0.1 JAEGER_METRICS_PORT=$JAEGER_METRICS_PORT \
		start jaeger "$JAEGER_BIN" --config "$ROOT/deploy/jaeger/config.yaml"

	# The collector: deploy/otel-collector/config.yaml. Tempo has no binary here; its exporter
	# points at a closed port and only logs its retries.
	OTELCOL_OTLP_GRPC_ENDPOINT=127.0.0.1:$OTEL_GRPC_PORT \
		OTELCOL_OTLP_HTTP_ENDPOINT=127.0.0.1:$OTEL_HTTP_PORT \
		OTELCOL_HEALTH_ENDPOINT=127.0.0.1:$OTEL_HEALTH_PORT \
		OTELCOL_JAEGER_ENDPOINT=127.0.0.1:$JAEGER_OTLP_PORT \
		OTELCOL_TEMPO_ENDPOINT=127.0.0.1:$TEMPO_PORT \
		OTELCOL_METRICS_HOST=127.0.0.1 OTELCOL_METRICS_PORT=$OTEL_METRICS_PORT \
		start otelcol "$OTELCOL_BIN" --config "$ROOT/deploy/otel-collector/config.yaml"

	# Alertmanager: deploy's config as it is; gossip off, so nothing binds beyond 127.0.0.1.
	start alertmanager "$ALERTMANAGER_BIN" --config.file="$ROOT/deploy/alertmanager/alertmanager.yml" \
		--storage.path="$WORK/am" --web.listen-address="127.0.0.1:$AM_PORT" --cluster.listen-address=

	# Prometheus: deploy's config and rules, service addresses replaced by 127.0.0.1 ports,
	# intervals shortened, and the hourly budget lowered to a cent so a short session crosses it.
	sed -e "s#alertmanager:9093#127.0.0.1:$AM_PORT#" \
		-e "s#cctrace:9787#127.0.0.1:$CCTRACE_METRICS_PORT#" \
		-e "s#otel-collector:8888#127.0.0.1:$OTEL_METRICS_PORT#" \
		-e "s#localhost:9090#127.0.0.1:$PROM_PORT#" \
		-e "s#^  scrape_interval: .*#  scrape_interval: 1s#" \
		-e "s#^  evaluation_interval: .*#  evaluation_interval: 1s#" \
		"$ROOT/deploy/prometheus/prometheus.yml" >"$WORK/prometheus/prometheus.yml"
	cp "$ROOT"/deploy/prometheus/rules/*.yml "$WORK/prometheus/rules/"
	awk '/record: cctrace:budget_hourly_usd/ { print; getline; sub(/vector\([^)]*\)/, "vector(0.01)") } { print }' \
		"$ROOT/deploy/prometheus/rules/budget.yml" >"$WORK/prometheus/rules/budget.yml"
	grep -A1 'record: cctrace:budget_hourly_usd' "$WORK/prometheus/rules/budget.yml" | grep -q 'vector(0.01)' || {
		log "could not lower the hourly budget in the copy of budget.yml"
		return 1
	}
	# The person's budget: a cent a day, rendered into rules by cctrace itself, as an operator
	# does, in place of the stack's sample budgets.
	mkdir -p "$WORK/cctrace"
	printf 'people:\n  - name: %s\n    team: platform\n    identities: [%s]\n' "$PERSON" "$PERSON" >"$WORK/cctrace/directory.yaml"
	printf 'people:\n  %s: {daily: 0.01}\n' "$PERSON" >"$WORK/cctrace/budgets.yaml"
	"$bin/cctrace" budgets rules --budgets "$WORK/cctrace/budgets.yaml" \
		--out "$WORK/prometheus/rules/people-budgets.yml" || return 1
	"$PROMTOOL_BIN" check rules "$WORK/prometheus/rules/people-budgets.yml" >/dev/null || return 1
	"$PROMTOOL_BIN" check config "$WORK/prometheus/prometheus.yml" >/dev/null || return 1
	start prometheus "$PROMETHEUS_BIN" --config.file="$WORK/prometheus/prometheus.yml" \
		--storage.tsdb.path="$WORK/tsdb" --web.listen-address="127.0.0.1:$PROM_PORT" \
		--enable-feature=exemplar-storage

	# The fake upstream prints its URL on its first line.
	"$bin/cctrace-fakeapi" --listen 127.0.0.1:0 --scenario tool_roundtrip >"$WORK/fakeapi.url" 2>"$WORK/fakeapi.log" &
	PIDS+=($!)
	poll 20 "the fake upstream's URL" grep -q '^http://' "$WORK/fakeapi.url" || return 1
	local upstream
	upstream=$(head -1 "$WORK/fakeapi.url")

	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$OTEL_GRPC_PORT OTEL_SERVICE_NAME=cctrace \
		start cctrace "$bin/cctrace" serve --listen "127.0.0.1:$CCTRACE_PORT" \
		--metrics-listen "127.0.0.1:$CCTRACE_METRICS_PORT" --upstream "$upstream" \
		--directory "$WORK/cctrace/directory.yaml" --budgets "$WORK/cctrace/budgets.yaml" \
		--state-dir "$WORK/state"

	wait_http jaeger "http://127.0.0.1:$JAEGER_HEALTH_PORT/status" 60 || return 1
	wait_http otelcol "http://127.0.0.1:$OTEL_HEALTH_PORT/" 60 || return 1
	wait_http alertmanager "http://127.0.0.1:$AM_PORT/-/ready" 60 || return 1
	wait_http prometheus "http://127.0.0.1:$PROM_PORT/-/ready" 60 || return 1
	wait_http cctrace "http://127.0.0.1:$CCTRACE_METRICS_PORT/healthz" 60 || return 1
	log "stack up: jaeger :$JAEGER_QUERY_PORT, prometheus :$PROM_PORT, alertmanager :$AM_PORT, cctrace :$CCTRACE_PORT"

	# A short session: three turns a few scrapes apart, so that increase() sees the spend grow.
	local session n
	session=$(cat /proc/sys/kernel/random/uuid)
	for n in 1 2 3; do
		turn "$session" "$n" || {
			tail -20 "$WORK/cctrace.log" >&2
			return 1
		}
		sleep 3
	done

	poll 90 "CctraceHourlySpendHigh in Alertmanager" alert_in_alertmanager || {
		curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/query?query=sum(increase(cctrace_cost_usd_total%5B1h%5D))" >&2 || true
		curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/alerts" >&2 || true
		return 1
	}
	log "CctraceHourlySpendHigh reached Alertmanager"
	poll 90 "CctracePersonDailyBudgetSpent for $PERSON, routed to team-platform" budget_alert_routed || {
		curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/query?query=sum%20by%20(user,team)(increase(cctrace_cost_usd_total%5B24h%5D))" >&2 || true
		curl -fsS "http://127.0.0.1:$AM_PORT/api/v2/alerts" >&2 || true
		return 1
	}
	log "CctracePersonDailyBudgetSpent for $PERSON reached Alertmanager's team-platform receiver"
	poll 60 "the session's trace in Jaeger" trace_in_jaeger || {
		tail -20 "$WORK/otelcol.log" >&2
		return 1
	}
	log "the turn's trace reached Jaeger through the collector"
	poll 30 "an exemplar's trace in Jaeger" exemplar_trace_in_jaeger || return 1
	log "an exemplar trace_id of cctrace_cost_usd_total is a trace in Jaeger"
}

# --- main -------------------------------------------------------------------------------------

START=$(date +%s)
if [ -f "$ROOT/scripts/tools.sh" ]; then
	step "install docker compose, the collector, helm, Jaeger, Prometheus, Alertmanager (scripts/tools.sh)" install_shared_tools
else
	missing "scripts/tools.sh"
fi

if [ "$MODE" != live ]; then
	if have "$COMPOSE_BIN"; then step "docker compose config -q" check_compose; else missing "docker compose"; fi
	if have "$PROMTOOL_BIN"; then step "promtool check config/rules, test rules" check_prometheus; else missing promtool; fi
	if have "$AMTOOL_BIN"; then step "amtool check-config" check_alertmanager; else missing amtool; fi
	if have "$OTELCOL_BIN"; then step "otelcol validate" check_collector; else missing "ocb collector"; fi
	if have "$JAEGER_BIN"; then step "jaeger validate" check_jaeger; else missing jaeger; fi
	if have "$HELM_BIN"; then
		step "helm lint and template (deploy/helm/cctrace)" check_helm_chart
		step "go test deploy/helm/check (Kubernetes API schemas)" check_helm_objects
	else
		missing helm
	fi
	step "go test ./deploy/... (metric names)" check_go_main
	step "go test deploy/check (PromQL, dashboards, compose)" check_go_module
fi

if [ "$MODE" != static ]; then
	ok=true
	for b in OTELCOL_BIN JAEGER_BIN PROMETHEUS_BIN PROMTOOL_BIN ALERTMANAGER_BIN; do
		have "${!b}" || {
			missing "${b%_BIN} for the live run"
			ok=false
		}
	done
	if $ok; then
		step "live run: spend and budget alerts in Alertmanager, trace in Jaeger" live_run
		cleanup
	fi
fi

if [ ${#FAILED[@]} -gt 0 ]; then
	log "FAILED after $(($(date +%s) - START))s: ${FAILED[*]}"
	exit 1
fi
log "all deploy checks passed in $(($(date +%s) - START))s"
