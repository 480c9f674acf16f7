#!/usr/bin/env bash
# Installs (or finds in the cache) the external tools cctrace's checks and end-to-end tests use,
# and exports their absolute paths:
#   CCTRACE_JAEGER_BIN        Jaeger v2 all-in-one, built from the Go module proxy (tools/jaeger)
#   CCTRACE_PROMETHEUS_BIN    prometheus            (Debian package prometheus)
#   CCTRACE_PROMTOOL_BIN      promtool              (Debian package prometheus)
#   CCTRACE_ALERTMANAGER_BIN  prometheus-alertmanager (Debian package prometheus-alertmanager)
#   CCTRACE_AMTOOL_BIN        amtool                (Debian package prometheus-alertmanager)
#   CCTRACE_CLAUDE_BIN        Claude Code CLI native binary (npm @anthropic-ai/claude-code)
#   CCTRACE_STATICCHECK_BIN   staticcheck           (honnef.co/go/tools)
#   CCTRACE_OTELCOL_BIN       OpenTelemetry Collector built by ocb from tools/otelcol/manifest.yaml
#   CCTRACE_HELM_BIN          helm, built from the Go module proxy (tools/helm)
#   CCTRACE_COMPOSE_BIN       docker compose, built from the Go module proxy (tools/compose)
#   CCTRACE_NGINX_BIN         nginx                 (Debian package nginx-light)
#   CCTRACE_POSTGRES_BIN      the PostgreSQL server (Debian package postgresql; initdb beside it)
# A variable that is already set to an executable is kept as it is.
#
# Slow builds are cached outside the clone in ${XDG_CACHE_HOME:-$HOME/.cache}/cctrace/<tool>-<version>/,
# so only the first run on a machine pays for them.
#
# Source it and call install_tools (scripts/test.sh does), or run it to print export lines:
#   eval "$(bash scripts/tools.sh)"

CCTRACE_ROOT=${CCTRACE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
CCTRACE_CACHE=${CCTRACE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cctrace}
CLAUDE_CODE_VERSION=2.1.328
STATICCHECK_VERSION=v0.8.2 # staticcheck 2026.2.2, the first line that supports Go 1.26

# CCTRACE_TOOL_VARS lists the variables install_tools exports.
CCTRACE_TOOL_VARS="CCTRACE_JAEGER_BIN CCTRACE_PROMETHEUS_BIN CCTRACE_PROMTOOL_BIN CCTRACE_ALERTMANAGER_BIN
CCTRACE_AMTOOL_BIN CCTRACE_CLAUDE_BIN CCTRACE_STATICCHECK_BIN CCTRACE_OTELCOL_BIN CCTRACE_HELM_BIN CCTRACE_NGINX_BIN
CCTRACE_POSTGRES_BIN CCTRACE_COMPOSE_BIN"

tools_log() { printf '[tools] %s\n' "$*" >&2; }

# tools_timed LABEL CMD...: runs CMD, then logs how long it took.
tools_timed() {
	local label=$1 start rc=0
	shift
	start=$(date +%s)
	"$@" || rc=$?
	tools_log "$label: $([ $rc -eq 0 ] && echo ok || echo "FAILED ($rc)") in $(($(date +%s) - start))s"
	return $rc
}

# tools_locked NAME CMD...: runs CMD holding a per-tool lock in the cache, so two runs on one
# machine do not build the same tool into the same place at once.
tools_locked() {
	local name=$1
	shift
	mkdir -p "$CCTRACE_CACHE"
	(
		flock 9
		"$@"
	) 9>"$CCTRACE_CACHE/.lock-$name"
}

tools_executable() { [ -n "${1:-}" ] && [ -f "$1" ] && [ -x "$1" ]; }

# --- Tools built from the Go module proxy ----------------------------------------------------
# Jaeger, helm and compose are each pinned by a module of their own under tools/ that requires
# them and names the command as a tool; its go.mod is the one place the version is pinned.
# (`go install …@version` is refused for Jaeger, whose go.mod has a replace directive, which
# tools/jaeger copies.)

# go_tool_version DIR MODULE prints the version of MODULE that tools/DIR pins.
go_tool_version() {
	(cd "$CCTRACE_ROOT/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

# go_tool_build OUT PACKAGE [LDFLAGS...] is how every tool is compiled: stripped, and without
# -trimpath, so that the packages a tool shares with cctrace (the standard library first) are
# compiled once into Go's build cache for both.
go_tool_build() {
	local out=$1 pkg=$2
	shift 2
	go build -ldflags "-s -w $*" -o "$out" "$pkg"
}

# build_go_tool DIR PACKAGE VERSION_SYMBOL VERSION BIN builds PACKAGE from tools/DIR into BIN,
# with VERSION stamped into VERSION_SYMBOL, unless BIN is there already.
build_go_tool() {
	local dir=$1 pkg=$2 symbol=$3 version=$4 bin=$5
	[ -x "$bin" ] && return 0
	mkdir -p "$(dirname "$bin")"
	tools_log "building $(basename "$bin") $version"
	(cd "$CCTRACE_ROOT/tools/$dir" && go_tool_build "$bin.tmp" "$pkg" -X "$symbol=$version") || return 1
	mv -f "$bin.tmp" "$bin"
}

# GO_TOOLS: for each tool built from the Go module proxy, the variable that names it, its
# directory under tools/, the module that pins it, its package, where its version is stamped,
# and the name of its binary.
GO_TOOLS="CCTRACE_JAEGER_BIN jaeger github.com/jaegertracing/jaeger github.com/jaegertracing/jaeger/cmd/jaeger github.com/jaegertracing/jaeger/internal/version.latestVersion jaeger
CCTRACE_HELM_BIN helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm helm.sh/helm/v4/internal/version.version helm
CCTRACE_COMPOSE_BIN compose github.com/docker/compose/v5 github.com/docker/compose/v5/cmd github.com/docker/compose/v5/internal.Version docker-compose"

# go_tool VAR prints VAR's line of GO_TOOLS.
go_tool() { grep "^$1 " <<<"$GO_TOOLS"; }

# go_tool_bin VAR prints where the cache keeps VAR's tool at the version tools/ pins.
go_tool_bin() {
	local var dir module pkg symbol binary version
	read -r var dir module pkg symbol binary <<<"$(go_tool "$1")"
	version=$(go_tool_version "$dir" "$module") || return 1
	printf '%s\n' "$CCTRACE_CACHE/$dir-$version/$binary"
}

# install_go_tool VAR builds VAR's tool into the cache (once a version) and sets VAR to it,
# unless VAR already names an executable.
install_go_tool() {
	tools_executable "${!1:-}" && return 0
	local var dir module pkg symbol binary version bin
	read -r var dir module pkg symbol binary <<<"$(go_tool "$1")"
	version=$(go_tool_version "$dir" "$module") || {
		tools_log "cannot read the version of $module from tools/$dir/go.mod"
		return 1
	}
	bin="$CCTRACE_CACHE/$dir-$version/$binary"
	tools_locked "$dir-$version" build_go_tool "$dir" "$pkg" "$symbol" "$version" "$bin" || return 1
	printf -v "$1" '%s' "$bin"
}

install_jaeger() {
	install_go_tool CCTRACE_JAEGER_BIN || return 1
	"$CCTRACE_JAEGER_BIN" version >/dev/null 2>&1 || {
		tools_log "$CCTRACE_JAEGER_BIN does not run"
		return 1
	}
}

install_helm() { install_go_tool CCTRACE_HELM_BIN; }

# Only compose's `config` command runs (scripts/deploy-check.sh): it validates
# deploy/docker-compose.yml as Docker would, without a Docker engine.
install_compose() { install_go_tool CCTRACE_COMPOSE_BIN; }

# --- Prometheus, Alertmanager and nginx (Debian) ----------------------------------------------
# The Debian packages enable and try to start services. Starting is refused here through
# policy-rc.d (a temporary one is put in place when the machine has none), and on a machine
# run by systemd the units are stopped and disabled, so no server stays bound to 0.0.0.0.
# The tests start their own servers from the binaries only.

nginx_path() { command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; }; }

# postgres_path: Debian keeps the server and initdb off PATH, in /usr/lib/postgresql/<major>/bin;
# the newest major installed.
postgres_path() {
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sort -V | tail -n 1)
	[ -n "$bin" ] && [ -x "$bin" ] && [ -x "$(dirname "$bin")/initdb" ] && echo "$bin"
}

prometheus_bins_present() {
	command -v prometheus >/dev/null && command -v promtool >/dev/null &&
		command -v amtool >/dev/null &&
		{ command -v prometheus-alertmanager >/dev/null || command -v alertmanager >/dev/null; } &&
		nginx_path >/dev/null && postgres_path >/dev/null
}

apt_install_prometheus() {
	prometheus_bins_present && return 0
	if [ "$(id -u)" != 0 ]; then
		tools_log "prometheus, promtool, prometheus-alertmanager, amtool, nginx or postgresql are missing; as root run:"
		tools_log "  apt-get install -y --no-install-recommends prometheus prometheus-alertmanager nginx-light postgresql"
		return 1
	fi
	local policy=/usr/sbin/policy-rc.d own_policy=0 rc=0
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# cctrace scripts/tools.sh: no service starts while installing.\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		own_policy=1
	fi
	{
		apt-get update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				prometheus prometheus-alertmanager nginx-light postgresql >/dev/null
	} || rc=$?
	[ $own_policy = 1 ] && rm -f "$policy"
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		systemctl disable --now prometheus.service prometheus-alertmanager.service nginx.service postgresql.service >/dev/null 2>&1 || true
	fi
	return $rc
}

install_prometheus() {
	tools_locked apt apt_install_prometheus || return 1
	local am
	am=$(command -v prometheus-alertmanager || command -v alertmanager)
	tools_executable "${CCTRACE_PROMETHEUS_BIN:-}" || CCTRACE_PROMETHEUS_BIN=$(command -v prometheus)
	tools_executable "${CCTRACE_PROMTOOL_BIN:-}" || CCTRACE_PROMTOOL_BIN=$(command -v promtool)
	tools_executable "${CCTRACE_ALERTMANAGER_BIN:-}" || CCTRACE_ALERTMANAGER_BIN=$am
	tools_executable "${CCTRACE_AMTOOL_BIN:-}" || CCTRACE_AMTOOL_BIN=$(command -v amtool)
	tools_executable "${CCTRACE_NGINX_BIN:-}" || CCTRACE_NGINX_BIN=$(nginx_path)
	tools_executable "${CCTRACE_POSTGRES_BIN:-}" || CCTRACE_POSTGRES_BIN=$(postgres_path)
}

# --- Claude Code CLI (npm) --------------------------------------------------------------------
# @anthropic-ai/claude-code is a wrapper whose postinstall hard-links the native binary of the
# platform package (@anthropic-ai/claude-code-linux-x64, …/claude) over its bin/claude.exe
# placeholder. When that did not happen (scripts disabled), the platform binary is used directly.

claude_runs() {
	tools_executable "$1" || return 1
	local out
	out=$(DISABLE_AUTOUPDATER=1 "$1" --version 2>/dev/null </dev/null) || return 1
	[ "${out%% *}" = "$CLAUDE_CODE_VERSION" ]
}

claude_find() {
	local dir=$1 candidate
	for candidate in "$dir/node_modules/@anthropic-ai/claude-code/bin/claude.exe" \
		"$dir"/node_modules/@anthropic-ai/claude-code-*/claude; do
		if claude_runs "$candidate"; then
			printf '%s\n' "$candidate"
			return 0
		fi
	done
	return 1
}

npm_install_claude() {
	local dir=$1
	claude_find "$dir" >/dev/null && return 0
	command -v npm >/dev/null || {
		tools_log "npm is missing: install Node.js and npm"
		return 1
	}
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	npm install --prefix "$dir.tmp" --no-audit --no-fund --save-exact --loglevel=error \
		"@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2 || return 1
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
}

install_claude() {
	tools_executable "${CCTRACE_CLAUDE_BIN:-}" && return 0
	local dir="$CCTRACE_CACHE/claude-code-$CLAUDE_CODE_VERSION"
	tools_locked "claude-code-$CLAUDE_CODE_VERSION" npm_install_claude "$dir" || return 1
	CCTRACE_CLAUDE_BIN=$(claude_find "$dir") || {
		tools_log "no runnable Claude Code $CLAUDE_CODE_VERSION binary under $dir"
		return 1
	}
}

# --- staticcheck ------------------------------------------------------------------------------

build_staticcheck() {
	local dir=$1
	[ -x "$dir/staticcheck" ] && return 0
	GOBIN="$dir" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
}

install_staticcheck() {
	tools_executable "${CCTRACE_STATICCHECK_BIN:-}" && return 0
	local dir="$CCTRACE_CACHE/staticcheck-$STATICCHECK_VERSION"
	tools_locked "staticcheck-$STATICCHECK_VERSION" build_staticcheck "$dir" || return 1
	CCTRACE_STATICCHECK_BIN="$dir/staticcheck"
}

# --- OpenTelemetry Collector (ocb) -------------------------------------------------------------
# tools/otelcol pins ocb; its manifest names the components. The cache directory is keyed by the
# manifest's content as well as ocb's version, so that a change of components rebuilds it.

otelcol_dir() {
	local version sum
	version=$(cd "$CCTRACE_ROOT/tools/otelcol" && go list -m -f '{{.Version}}' go.opentelemetry.io/collector/cmd/builder) || return 1
	sum=$(sha256sum "$CCTRACE_ROOT/tools/otelcol/manifest.yaml" | cut -c1-12)
	printf '%s\n' "$CCTRACE_CACHE/otelcol-$version-$sum"
}

build_otelcol() {
	local dir=$1
	[ -x "$dir/otelcol-cctrace" ] && return 0
	mkdir -p "$dir"
	tools_log "building the OpenTelemetry Collector with ocb (cold on 2 cores: 10 to 20 minutes)"
	sed "s#^  output_path: .*#  output_path: $dir/src#" "$CCTRACE_ROOT/tools/otelcol/manifest.yaml" >"$dir/manifest.yaml"
	# ocb writes the collector's module; go_tool_build compiles it as it does the other tools
	# (ocb's own compile adds -trimpath, which would build the standard library apart).
	{
		(cd "$CCTRACE_ROOT/tools/otelcol" && go tool builder --skip-compilation --config "$dir/manifest.yaml") &&
			(cd "$dir/src" && go_tool_build otelcol-cctrace .)
	} >"$dir/build.log" 2>&1 || {
		tail -20 "$dir/build.log" >&2
		return 1
	}
	mv -f "$dir/src/otelcol-cctrace" "$dir/otelcol-cctrace"
}

install_otelcol() {
	tools_executable "${CCTRACE_OTELCOL_BIN:-}" && return 0
	local dir
	dir=$(otelcol_dir) || {
		tools_log "cannot read ocb's version from tools/otelcol/go.mod"
		return 1
	}
	tools_locked "$(basename "$dir")" build_otelcol "$dir" || return 1
	CCTRACE_OTELCOL_BIN="$dir/otelcol-cctrace"
}

# --- all --------------------------------------------------------------------------------------

# tools_builds_pid and tools_builds_log are install_tools' background builds while they run;
# tools_saved_traps the caller's traps, put back when they end.
tools_builds_pid='' tools_builds_log='' tools_saved_traps=''

# tools_stop_builds kills the background builds' process group and waits for it, so that an
# interrupted install leaves no go build running, nor holding a lock in the cache.
tools_stop_builds() {
	[ -n "$tools_builds_pid" ] || return 0
	kill -TERM -- "-$tools_builds_pid" 2>/dev/null || true
	wait "$tools_builds_pid" 2>/dev/null || true
	tools_builds_pid=''
	rm -f "$tools_builds_log"
}

# tools_end_builds_traps puts the caller's INT, TERM and EXIT traps back.
tools_end_builds_traps() {
	trap - INT TERM EXIT
	eval "$tools_saved_traps"
}

# tools_interrupted CODE: the install was interrupted; stop the builds and exit with CODE
# (through the caller's own EXIT trap, if it has one).
tools_interrupted() {
	tools_log "interrupted: stopping the builds"
	tools_stop_builds
	tools_end_builds_traps
	exit "$1"
}

# install_tools installs everything, building Jaeger, the collector, helm and compose in the
# background meanwhile (one after another: each build alone keeps both cores busy), and exports
# the CCTRACE_*_BIN variables. It returns non-zero if any tool could not be had.
install_tools() {
	local rc=0
	install_tools_begin || rc=1
	install_tools_end || rc=1
	return $rc
}

# tools_failed is what install_tools_begin could not install, for install_tools_end to report.
tools_failed=0

# install_tools_begin starts the slow builds (Jaeger, the collector, helm, compose) in the
# background and installs the other tools meanwhile; install_tools_await waits for some of the
# builds, install_tools_end for all. A caller may run what does not need the built tools in
# between (scripts/test.sh runs its static, unit and fuzz stages, then its end-to-end tests once
# Jaeger and the collector are there), so that a cold machine's long compiles overlap work that
# often waits on other things. It returns non-zero if a tool it installs could not be had.
install_tools_begin() {
	tools_failed=0
	tools_builds_log=$(mktemp)
	tools_saved_traps=$(trap -p INT TERM EXIT)
	# The builds run in a subshell; they report their paths through the cache, read below. Job
	# control gives the subshell a process group of its own (a background job would otherwise
	# ignore SIGINT and outlive an interrupted install), which the traps kill whole.
	set -m
	(
		# At the lowest priority the builds take only the CPU the stages running meanwhile leave
		# idle: those stages end sooner, and the builds go on through the end-to-end tests, which
		# mostly wait. Jaeger and the collector come first, as the end-to-end tests need them.
		renice -n 19 -p "$BASHPID" >/dev/null || true
		rc=0
		tools_timed "jaeger" install_jaeger || rc=1
		tools_timed "otelcol (ocb)" install_otelcol || rc=1
		tools_timed "helm" install_helm || rc=1
		tools_timed "docker compose" install_compose || rc=1
		exit $rc
	) </dev/null >"$tools_builds_log" 2>&1 &
	tools_builds_pid=$!
	set +m
	trap 'tools_interrupted 130' INT
	trap 'tools_interrupted 143' TERM
	trap 'tools_stop_builds' EXIT
	tools_timed "prometheus+alertmanager+nginx+postgresql (apt)" install_prometheus || tools_failed=1
	tools_timed "claude code (npm)" install_claude || tools_failed=1
	tools_timed "staticcheck" install_staticcheck || tools_failed=1
	export CCTRACE_PROMETHEUS_BIN CCTRACE_PROMTOOL_BIN CCTRACE_ALERTMANAGER_BIN CCTRACE_AMTOOL_BIN \
		CCTRACE_CLAUDE_BIN CCTRACE_STATICCHECK_BIN CCTRACE_NGINX_BIN CCTRACE_POSTGRES_BIN
	return $tools_failed
}

# tools_built_bin VAR prints where the cache keeps the tool a background build makes for VAR.
tools_built_bin() {
	if [ "$1" = CCTRACE_OTELCOL_BIN ]; then
		local dir
		dir=$(otelcol_dir) && printf '%s\n' "$dir/otelcol-cctrace"
	else
		go_tool_bin "$1"
	fi
}

# install_tools_await VAR... waits until the builds install_tools_begin started have made the
# tools named by VAR... (or have ended without them), and sets and exports each VAR. It returns
# non-zero if one of them is missing.
install_tools_await() {
	local var bin failed=0
	for var in "$@"; do
		tools_executable "${!var:-}" && continue
		bin=$(tools_built_bin "$var") || {
			failed=1
			continue
		}
		# Each build moves its binary into place whole once it is done.
		while ! tools_executable "$bin" && [ -n "$tools_builds_pid" ] && kill -0 "$tools_builds_pid" 2>/dev/null; do
			sleep 2
		done
		tools_executable "$bin" || failed=1
		printf -v "$var" '%s' "$bin"
		export "${var?}"
	done
	return $failed
}

# install_tools_end waits for the builds install_tools_begin started, exports every
# CCTRACE_*_BIN variable and logs them. It returns non-zero if any tool could not be had.
install_tools_end() {
	local failed=$tools_failed
	if [ -z "$tools_builds_pid" ] || ! wait "$tools_builds_pid"; then
		failed=1
	fi
	tools_builds_pid=''
	tools_end_builds_traps
	cat "$tools_builds_log" >&2
	rm -f "$tools_builds_log"
	# The builds ran in a subshell: their variables are found again in the cache.
	install_tools_await CCTRACE_JAEGER_BIN CCTRACE_OTELCOL_BIN CCTRACE_HELM_BIN CCTRACE_COMPOSE_BIN || failed=1
	# shellcheck disable=SC2086 # one name per word
	export $CCTRACE_TOOL_VARS
	local v
	for v in $CCTRACE_TOOL_VARS; do
		tools_log "$v=${!v:-(missing)}"
	done
	return $failed
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	install_tools
	for v in $CCTRACE_TOOL_VARS; do
		printf 'export %s=%q\n' "$v" "${!v}"
	done
fi
