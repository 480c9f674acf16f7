#!/usr/bin/env bash
# Records the real Claude Code CLI against cctrace-fakeapi, one directory per scenario.
#
#   testdata/claude-code/record.sh SCENARIO [OUTDIR]
#
# CLAUDE points at the CLI binary (default: the npm install scripts/tools.sh makes in its cache).
# Each run uses a fresh HOME and working directory and a dummy key (KEY below), which
# the fake never records (x-api-key is stripped); the script fails if the key shows up anyway.
set -euo pipefail

scenario=${1:?usage: record.sh SCENARIO [OUTDIR]}
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$repo/testdata/claude-code/$scenario}
CLAUDE=${CLAUDE:-${XDG_CACHE_HOME:-$HOME/.cache}/cctrace/claude-code-2.1.328/node_modules/@anthropic-ai/claude-code-linux-x64/claude}
# Split so that grepping the tree for the key finds only leaks, not this line.
KEY="sk-ant-dummy-""marker"

case $scenario in
*[!a-z0-9_]* | "")
	echo "bad scenario name $scenario" >&2
	exit 2
	;;
esac

# A provider's recording (vertex_tool_roundtrip) runs the scenario after the prefix with the CLI in
# that provider's mode, against the fake answering as that provider (no credentials checked:
# Claude Code skips its own authentication, as behind cctrace).
provider=anthropic
fake_scenario=$scenario
case $scenario in
vertex_* | bedrock_* | foundry_*)
	provider=${scenario%%_*}
	fake_scenario=${scenario#*_}
	;;
esac
# The CLI's credential: an API key (x-api-key), or for a *_subscription recording a bearer token
# (ANTHROPIC_AUTH_TOKEN, sent as Authorization: Bearer, as a subscription's login is), with the
# scenario before the suffix.
auth_env=(ANTHROPIC_API_KEY="$KEY")
case $scenario in
*_subscription)
	auth_env=(ANTHROPIC_AUTH_TOKEN="$KEY")
	fake_scenario=${scenario%_subscription}
	;;
esac

tmp=$(mktemp -d)
trap 'tmux -L "cctrace-record-$$" kill-server 2>/dev/null || true; kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/home" "$tmp/work"
rm -rf "$out"
mkdir -p "$out"

(cd "$repo" && go build -o "$tmp/fakeapi" ./cmd/cctrace-fakeapi)
"$tmp/fakeapi" --listen 127.0.0.1:0 --scenario "$fake_scenario" --provider "$provider" --record "$out" \
	--page-cert "$tmp/page-cert.pem" >"$tmp/url" 2>"$tmp/fake.log" &
fake_pid=$!
for _ in $(seq 50); do [ -s "$tmp/url" ] && break; sleep 0.1; done
url=$(cat "$tmp/url")

# The CLI's environment for the provider: the fake as its base URL, its own authentication off.
case $provider in
vertex) provider_env=(CLAUDE_CODE_USE_VERTEX=1 ANTHROPIC_VERTEX_BASE_URL="$url/v1" CLAUDE_CODE_SKIP_VERTEX_AUTH=1
	ANTHROPIC_VERTEX_PROJECT_ID=cctrace-record CLOUD_ML_REGION=us-east5) ;;
bedrock) provider_env=(CLAUDE_CODE_USE_BEDROCK=1 ANTHROPIC_BEDROCK_BASE_URL="$url" CLAUDE_CODE_SKIP_BEDROCK_AUTH=1 AWS_REGION=us-east-1) ;;
foundry) provider_env=(CLAUDE_CODE_USE_FOUNDRY=1 ANTHROPIC_FOUNDRY_BASE_URL="$url/anthropic" CLAUDE_CODE_SKIP_FOUNDRY_AUTH=1) ;;
*) provider_env=(ANTHROPIC_BASE_URL="$url") ;;
esac

# claude runs the CLI in the scenario's HOME and working directory; extra environment comes first.
claude() {
	(cd "$tmp/work" && env HOME="$tmp/home" "${provider_env[@]}" "${auth_env[@]}" \
		CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="${NONESSENTIAL_OFF-1}" \
		timeout 180 "$CLAUDE" "$@" </dev/null)
}

# session_id reads the session id from the stream-json output of the previous run.
session_id() { grep -o '"session_id":"[^"]*"' "$out/cli-1.jsonl" | head -1 | cut -d'"' -f4; }

# interactive_start ARGS... starts the CLI interactively in a tmux pane (private socket) with
# onboarding done, the working directory trusted and the dummy key approved in ~/.claude.json;
# DISABLE_AUTOUPDATER=1 because the interactive CLI otherwise runs `npm install --global`.
interactive_start() {
	cat >"$tmp/home/.claude.json" <<JSON
{"hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.328", "theme": "dark",
 "customApiKeyResponses": {"approved": ["$KEY"], "rejected": []},
 "projects": {"$tmp/work": {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}}
JSON
	pane=cctrace-record-$$
	echo "\$ claude $*" >"$out/cli-1.cmd"
	tmux -L "$pane" new-session -d -s "$pane" -x 200 -y 50 \
		"cd $tmp/work && env HOME=$tmp/home ANTHROPIC_BASE_URL=$url ANTHROPIC_API_KEY=$KEY DISABLE_AUTOUPDATER=1 $CLAUDE $* 2>$out/cli-1.stderr"
	sleep 5
}
# wait_for RULE N waits until the fake has answered N requests with RULE.
wait_for() {
	for _ in $(seq 300); do
		[ "$(grep -c "rule=$1 " "$tmp/fake.log")" -ge "$2" ] && { sleep 2; return; }
		sleep 0.2
	done
	echo "timed out waiting for $2 x $1" >&2
	tmux -L "$pane" capture-pane -p -t "$pane" >&2
	return 1
}
type_line() { tmux -L "$pane" send-keys -t "$pane" -l "$1"; sleep 1; tmux -L "$pane" send-keys -t "$pane" Enter; }
keys() { tmux -L "$pane" send-keys -t "$pane" "$@"; }
screen() { tmux -L "$pane" capture-pane -p -t "$pane" >"$out/$1"; }
interactive_end() {
	screen cli-1.screen
	type_line "/exit"
	sleep 2
	tmux -L "$pane" kill-server 2>/dev/null || true
}

run=0
step() {
	run=$((run + 1))
	echo "\$ claude $*" >"$out/cli-$run.cmd"
	claude "$@" --verbose --output-format stream-json >"$out/cli-$run.jsonl" 2>"$out/cli-$run.stderr" || echo "exit $?" >>"$out/cli-$run.stderr"
}

case $scenario in
tool_roundtrip | retry_529 | ratelimit | ratelimit_subscription | slow_pings | midstream_error | stream_cut | output_limit | slow_tool | billing | vertex_tool_roundtrip | bedrock_tool_roundtrip | foundry_tool_roundtrip)
	step -p "Print hello with a shell command." --allowedTools Bash,Read
	;;
web_search | web_search_pause)
	step -p "Search the web for cctrace." --allowedTools WebSearch
	;;
subagent_web_search)
	step -p "Have a subagent search the web for cctrace." --allowedTools Agent,WebSearch
	;;
web_fetch)
	# Claude Code fetches the page itself: it must trust the page server's certificate, and skip
	# the check of the domain with Anthropic that it makes first.
	NODE_EXTRA_CA_CERTS="$tmp/page-cert.pem" step -p "Fetch the page and tell me its marker." --allowedTools WebFetch \
		--settings '{"skipWebFetchPreflight": true}'
	;;
stop_hook)
	# A Stop hook that blocks the first end of the turn (exit 2, its stderr the feedback) and lets
	# the second one through.
	cat >"$tmp/stop-hook.sh" <<'HOOK'
#!/bin/sh
marker="$(dirname "$0")/stop-hook-ran"
[ -e "$marker" ] && exit 0
touch "$marker"
echo "Please also say goodbye." >&2
exit 2
HOOK
	chmod +x "$tmp/stop-hook.sh"
	step -p "Give me a plain answer." --allowedTools Bash,Read \
		--settings "{\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"$tmp/stop-hook.sh\"}]}]}}"
	;;
parallel_tools)
	step -p "Print two words and read a file, all at once." --allowedTools Bash,Read
	;;
subagent | subagent_background | parallel_subagents)
	step -p "Delegate an echo to a subagent." --allowedTools Bash,Read,Agent
	;;
compaction)
	step -p "Remember the word pineapple." --allowedTools Bash,Read
	id=$(session_id)
	step -p "What was the word?" --resume "$id" --allowedTools Bash,Read
	step -p "/compact" --resume "$id"
	step -p "And now, what was the word?" --resume "$id" --allowedTools Bash,Read
	;;
side_request)
	# Side requests are nonessential traffic: let them through.
	NONESSENTIAL_OFF= step -p "Give me a plain answer." --allowedTools Bash,Read
	;;
interactive)
	# An interactive session in a tmux pane. Onboarding done, the working directory trusted and
	# the dummy key approved in ~/.claude.json; DISABLE_AUTOUPDATER=1 because the interactive CLI
	# otherwise runs `npm install --global` of a newer version.
	cat >"$tmp/home/.claude.json" <<JSON
{"hasCompletedOnboarding": true, "lastOnboardingVersion": "2.1.328", "theme": "dark",
 "customApiKeyResponses": {"approved": ["$KEY"], "rejected": []},
 "projects": {"$tmp/work": {"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}}}
JSON
	pane=cctrace-record-$$
	tmux new-session -d -s "$pane" -x 200 -y 50 \
		"cd $tmp/work && env HOME=$tmp/home ANTHROPIC_BASE_URL=$url ANTHROPIC_API_KEY=$KEY DISABLE_AUTOUPDATER=1 $CLAUDE 2>$out/cli-1.stderr"
	# wait_for RULE N waits until the fake has answered N requests with RULE.
	wait_for() {
		for _ in $(seq 300); do
			[ "$(grep -c "rule=$1 " "$tmp/fake.log")" -ge "$2" ] && { sleep 2; return; }
			sleep 0.2
		done
		echo "timed out waiting for $2 x $1" >&2
		tmux capture-pane -p -t "$pane" >&2
		return 1
	}
	type_line() { tmux send-keys -t "$pane" -l "$1"; sleep 1; tmux send-keys -t "$pane" Enter; }
	sleep 5
	type_line "Create a marker file."
	wait_for main_result 1
	type_line "/compact"
	wait_for compaction 1
	type_line "Create it again."
	wait_for main_result 2
	tmux capture-pane -p -t "$pane" >"$out/cli-1.screen"
	type_line "/exit"
	sleep 2
	tmux kill-session -t "$pane" 2>/dev/null || true
	;;
cache_model_change)
	step -p "Remember the word pineapple." --allowedTools Bash,Read --model claude-opus-5-5
	step -p "What was the word?" --continue --allowedTools Bash,Read --model claude-sonnet-4-5
	;;
cache_tools_change)
	step -p "Remember the word pineapple." --allowedTools Bash,Read --tools Bash,Read
	step -p "What was the word?" --continue --allowedTools Bash,Read
	;;
long_session)
	step -p "Count for me, step by step." --allowedTools Bash
	for prompt in "Count some more." "And once more, longer."; do
		step -p "$prompt" --continue --allowedTools Bash
	done
	;;
auto_compaction)
	step -p "Print a marker with a shell command." --allowedTools Bash,Read
	id=$(session_id)
	step -p "Are you still there?" --resume "$id" --allowedTools Bash,Read
	;;
sdk_tool_loop)
	# Not Claude Code: a plain anthropic-sdk-go client (testdata/sdk-client).
	echo '$ go run ./testdata/sdk-client' >"$out/cli-1.cmd"
	(cd "$repo" && env ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY="$KEY" go run ./testdata/sdk-client) >"$out/cli-1.stdout" 2>"$out/cli-1.stderr" || echo "exit $?" >>"$out/cli-1.stderr"
	;;
interrupted)
	interactive_start --allowedTools Bash
	type_line "Tell me a slow story."
	wait_for slow_stream 1
	sleep 4 # inside the text deltas (4 s of pings first)
	screen cli-1.screen-stream
	keys Escape
	sleep 3
	type_line "Run a slow command."
	wait_for slow_tool 1
	sleep 3
	screen cli-1.screen-tool
	keys Escape
	sleep 3
	type_line "Just answer plainly."
	wait_for main 1
	interactive_end
	;;
plan_mode)
	interactive_start --permission-mode plan
	type_line "Plan how to create a file."
	wait_for main 1
	screen cli-1.screen-plan
	keys Enter # the first choice of the plan approval dialog
	wait_for main_result 1
	interactive_end
	;;
*)
	echo "unknown scenario $scenario" >&2
	exit 2
	;;
esac

kill "$fake_pid"
wait "$fake_pid" 2>/dev/null || true
cp "$tmp/fake.log" "$out/fakeapi.log"
find "$out" -name 'cli-*.stderr' -empty -delete
if grep -rl -- "$KEY" "$out"; then
	echo "the API key leaked into $out" >&2
	exit 1
fi
echo "$(ls "$out"/*.json | wc -l) exchanges recorded in $out"
