#!/usr/bin/env bash
# Reproduces the figures in BENCHMARKS.md: builds cctrace, cctrace-bench and the baseline proxy
# (internal/testkit/bench/bareproxy, a program of its own), then compares, on
# this machine and in one interleaved run, direct requests to a fast local upstream, a bare
# httputil.ReverseProxy (twice: the second is a control, for the run's noise), nginx, cctrace
# exporting to a no-op OTLP receiver and cctrace exporting to Jaeger, and finally runs the Go
# benchmarks of the hot paths.
#
#   bash scripts/bench.sh                  # full run (about 15 minutes on 2 cores)
#   bash scripts/bench.sh -reps 3          # any cctrace-bench flag is passed on
#   bash scripts/bench.sh -short           # CI mode: a few seconds, no timing assertions; fails
#                                          # only when a stream or body is not byte-identical,
#                                          # a request fails, or no spans were exported
#   bash scripts/bench.sh -base 7d5cbad    # also cctrace built at that commit (from a temporary
#                                          # git worktree), interleaved in the same run as variant
#                                          # cctrace-base: both against bare, side by side
#   bash scripts/bench.sh -replicas 1,2,3  # the replica benchmark instead: 1, 2, 3 cctrace
#                                          # replicas behind nginx (deploy/nginx/cctrace.conf)
#                                          # against as many bare proxies, by concurrent sessions
#                                          # (-sessions 8,32,128; deploy/kubernetes/README.md)
#
# Needs nginx (apt-get install -y nginx-light) and Jaeger v2 (CCTRACE_JAEGER_BIN, built by
# scripts/tools.sh); -short skips whichever is missing. The Markdown report goes to stdout and,
# in a full run, to $TMPDIR/cctrace-bench-results.md.
set -euo pipefail
cd "$(dirname "$0")/.."

# -base COMMIT is this script's own flag; every other argument goes to cctrace-bench.
base= args=()
while [ $# -gt 0 ]; do
	case $1 in
	-base | --base) base=${2:?-base needs a commit}; shift 2 ;;
	-base=* | --base=*) base=${1#*=}; shift ;;
	*) args+=("$1"); shift ;;
	esac
done
set -- ${args[@]+"${args[@]}"}

bin=$(mktemp -d)
trap 'git worktree remove --force "$bin/base-src" 2>/dev/null || true; rm -rf "$bin"' EXIT
go build -o "$bin/cctrace" ./cmd/cctrace
if [ -n "$base" ]; then
	git worktree add --quiet --detach "$bin/base-src" "$base"
	(cd "$bin/base-src" && go build -o "$bin/cctrace-base" ./cmd/cctrace)
	git worktree remove --force "$bin/base-src"
	set -- -cctrace-base "$bin/cctrace-base" "$@"
fi
go build -o "$bin/cctrace-bench" ./cmd/cctrace-bench
go build -o "$bin/bareproxy" ./internal/testkit/bench/bareproxy

# Jaeger where scripts/tools.sh put it: its cache (CCTRACE_CACHE), at tools/jaeger's version.
# shellcheck source=scripts/tools.sh
source scripts/tools.sh
jaeger=${CCTRACE_JAEGER_BIN:-}
if ! tools_executable "$jaeger"; then
	jaeger=$(go_tool_bin CCTRACE_JAEGER_BIN 2>/dev/null) || jaeger=
fi
nginx=$(command -v nginx || echo /usr/sbin/nginx)

short=0 replicas=0
for a in "$@"; do
	case $a in
	-short | --short | -short=true | --short=true) short=1 ;;
	-replicas | --replicas | -replicas=* | --replicas=*) replicas=1 ;;
	esac
done

if [ "$replicas" = 1 ]; then
	"$bin/cctrace-bench" -cctrace "$bin/cctrace" -bare "$bin/bareproxy" -nginx "$nginx" "$@"
	exit
fi

if [ "$short" = 1 ]; then
	# Every variant, go-raw (a measuring instrument, not in the full run's default) included, so
	# that CI runs each one from its binary.
	"$bin/cctrace-bench" -cctrace "$bin/cctrace" -bare "$bin/bareproxy" -nginx "$nginx" -jaeger "$jaeger" \
		-variants direct,bare,bare-control,nginx,cctrace-proxy,go-raw,cctrace,cctrace-jaeger "$@"
	# The replica benchmark's short run: the shipped nginx site in front of one and two replicas.
	"$bin/cctrace-bench" -cctrace "$bin/cctrace" -bare "$bin/bareproxy" -nginx "$nginx" -replicas 1,2 "$@"
	exit
fi

"$bin/cctrace-bench" -cctrace "$bin/cctrace" -bare "$bin/bareproxy" -nginx "$nginx" -jaeger "$jaeger" -out "${TMPDIR:-/tmp}/cctrace-bench-results.md" "$@"
echo
echo "Go benchmarks of the hot paths:"
go test -run='^$' -bench='ParseBody|BodyCache|StreamDecoder|ProxySSE|Tracker|Sink|Stack' -benchmem -count=3 \
	./instrument/wire ./internal/proxy ./instrument ./tracing ./internal/testkit/bench
