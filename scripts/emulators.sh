#!/usr/bin/env bash
# S3 (moto) and Azure Blob (Azurite) emulators for the test suite, on free 127.0.0.1 ports.
#
#   scripts/emulators.sh install          install Azurite (pinned) into .emulators/node_modules
#   scripts/emulators.sh start            start both servers; writes .emulators/state/env.sh
#   scripts/emulators.sh stop             stop the servers started by `start` (by their pids)
#   scripts/emulators.sh status           show what runs and where
#   scripts/emulators.sh run -- CMD...    start, run CMD with the endpoints exported, always stop;
#                                         exits with CMD's exit code
#
# Exported to the tests (see tests/conftest.py):
#   INDEXTABLES_TEST_S3_ENDPOINT              http://127.0.0.1:PORT            (moto; any access key)
#   INDEXTABLES_TEST_AZURE_ENDPOINT           http://127.0.0.1:PORT/devstoreaccount1   (Azurite)
#   INDEXTABLES_TEST_AZURE_CONNECTION_STRING  the devstoreaccount1 development connection string
#
# Settings (environment): INDEXTABLES_EMULATORS_DIR (default .emulators), VENV_PYTHON (default
# .venv/bin/python), INDEXTABLES_S3_PORT / INDEXTABLES_AZURE_PORT (default: any free port),
# EMULATOR_START_TIMEOUT seconds (default 60).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
EM_DIR=${INDEXTABLES_EMULATORS_DIR:-$ROOT/.emulators}
STATE=$EM_DIR/state
VENV_PYTHON=${VENV_PYTHON:-$ROOT/.venv/bin/python}
AZURITE_VERSION=3.35.0
START_TIMEOUT=${EMULATOR_START_TIMEOUT:-60}
# The well-known Azurite development account (public, documented by Microsoft; not a secret).
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

say() { echo "emulators: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

python_for_tools() {
    if [ -x "$VENV_PYTHON" ]; then echo "$VENV_PYTHON"; else command -v python3 || die "python3 not found"; fi
}

azurite_installed_version() {
    local pj=$EM_DIR/node_modules/azurite/package.json
    [ -f "$pj" ] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj" 2>/dev/null || true
}

cmd_install() {
    command -v node >/dev/null || die "node is not on PATH (Node 20 is needed for Azurite $AZURITE_VERSION)"
    command -v npm >/dev/null || die "npm is not on PATH (needed to install Azurite $AZURITE_VERSION)"
    if [ "$(azurite_installed_version)" = "$AZURITE_VERSION" ] && [ -x "$EM_DIR/node_modules/.bin/azurite-blob" ]; then
        return 0
    fi
    say "installing azurite@$AZURITE_VERSION into $EM_DIR/node_modules"
    mkdir -p "$EM_DIR"
    [ -f "$EM_DIR/package.json" ] || echo '{"name":"indextables-emulators","private":true}' >"$EM_DIR/package.json"
    # Bounded: npm retries failed fetches for a long time (e.g. a TLS error when the registry's
    # CA is unknown to node: see NODE_EXTRA_CA_CERTS / npm's cafile).
    timeout "${NPM_INSTALL_TIMEOUT:-600}" npm install --prefix "$EM_DIR" --no-audit --no-fund --loglevel=error \
        --fetch-retries=3 --fetch-timeout=120000 --save-exact "azurite@$AZURITE_VERSION" </dev/null \
        || die "npm install azurite@$AZURITE_VERSION failed or timed out (registry: $(npm config get registry 2>/dev/null))"
    [ "$(azurite_installed_version)" = "$AZURITE_VERSION" ] || die "azurite $AZURITE_VERSION not found in $EM_DIR after npm install"
}

# Print a free TCP port on 127.0.0.1: the requested one (refused if taken) or one the OS picks.
free_port() {
    local wanted=${1:-0}
    "$(python_for_tools)" - "$wanted" <<'EOF'
import socket, sys
wanted = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.bind(("127.0.0.1", wanted))
except OSError as e:
    sys.exit(f"emulators: ERROR: port {wanted} on 127.0.0.1 is not free: {e}")
print(s.getsockname()[1])
s.close()
EOF
}

# Is anything listening on 127.0.0.1:PORT? (refuses to start a server on a port in use)
port_in_use() {
    "$(python_for_tools)" - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.settimeout(0.5)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
EOF
}

# Does an HTTP server answer on URL (any status counts)?
http_answers() {
    "$(python_for_tools)" - "$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=1)
except urllib.error.HTTPError:
    pass
except Exception:
    sys.exit(1)
EOF
}

# wait_ready NAME PID URL LOG
wait_ready() {
    local name=$1 pid=$2 url=$3 log=$4 waited=0
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            say "$name (pid $pid) exited during start-up; its log ($log):"
            cat "$log" >&2 || true
            return 1
        fi
        if http_answers "$url"; then
            # A stale server on the same port would answer too: make sure ours is still alive.
            sleep 0.2
            if kill -0 "$pid" 2>/dev/null; then return 0; fi
            continue
        fi
        if [ "$waited" -ge $((START_TIMEOUT * 5)) ]; then
            say "$name (pid $pid) did not answer on $url within ${START_TIMEOUT}s; its log ($log):"
            cat "$log" >&2 || true
            return 1
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
}

pid_is() {  # pid_is PID PATTERN: the process exists and its command line matches
    local pid=$1 pattern=$2
    [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$pattern"
}

stop_one() {  # stop_one NAME PATTERN
    local name=$1 pattern=$2 pidfile=$STATE/$1.pid pid i
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if pid_is "$pid" "$pattern"; then
        kill "$pid" 2>/dev/null || true
        for i in $(seq 1 50); do
            pid_is "$pid" "$pattern" || break
            sleep 0.1
        done
        if pid_is "$pid" "$pattern"; then
            say "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pidfile"
}

cmd_stop() {
    stop_one moto scripts/moto_server.py
    stop_one azurite azurite-blob
    rm -f "$STATE/env.sh"
}

cmd_start() {
    [ -x "$VENV_PYTHON" ] || die "$VENV_PYTHON not found: run 'make install' first"
    "$VENV_PYTHON" -c 'import moto.server' 2>/dev/null || die "moto[server] is not installed in $VENV_PYTHON (make install)"
    [ -x "$EM_DIR/node_modules/.bin/azurite-blob" ] || cmd_install
    if [ -f "$STATE/moto.pid" ] || [ -f "$STATE/azurite.pid" ]; then
        if { [ -f "$STATE/moto.pid" ] && pid_is "$(cat "$STATE/moto.pid")" scripts/moto_server.py; } ||
           { [ -f "$STATE/azurite.pid" ] && pid_is "$(cat "$STATE/azurite.pid")" azurite-blob; }; then
            die "emulators already running (see '$0 status'); stop them first with '$0 stop'"
        fi
        rm -f "$STATE"/*.pid
    fi
    mkdir -p "$STATE/moto-work" "$STATE/azurite-work"

    local s3_port az_port
    s3_port=$(free_port "${INDEXTABLES_S3_PORT:-0}")
    az_port=$(free_port "${INDEXTABLES_AZURE_PORT:-0}")
    [ "$s3_port" != "$az_port" ] || az_port=$(free_port 0)
    for p in "$s3_port" "$az_port"; do
        if port_in_use "$p"; then die "port $p on 127.0.0.1 is already in use"; fi
    done

    # S3: moto (with atomic conditional writes, see scripts/moto_server.py).
    ( cd "$STATE/moto-work" && exec "$VENV_PYTHON" "$ROOT/scripts/moto_server.py" --host 127.0.0.1 --port "$s3_port" \
        >"$STATE/moto.log" 2>&1 </dev/null ) &
    echo $! >"$STATE/moto.pid"

    # Azure: Azurite blob service, in memory.
    ( cd "$STATE/azurite-work" && exec "$EM_DIR/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$az_port" \
        --inMemoryPersistence --skipApiVersionCheck --disableTelemetry --silent \
        >"$STATE/azurite.log" 2>&1 </dev/null ) &
    echo $! >"$STATE/azurite.pid"

    local ok=1
    wait_ready "moto S3 server" "$(cat "$STATE/moto.pid")" "http://127.0.0.1:$s3_port/" "$STATE/moto.log" || ok=0
    wait_ready "Azurite" "$(cat "$STATE/azurite.pid")" "http://127.0.0.1:$az_port/$AZ_ACCOUNT?comp=list" "$STATE/azurite.log" || ok=0
    if [ "$ok" != 1 ]; then
        cmd_stop
        die "could not start the emulators (logs above)"
    fi

    local az_ep="http://127.0.0.1:$az_port/$AZ_ACCOUNT"
    cat >"$STATE/env.sh" <<EOF
export INDEXTABLES_TEST_S3_ENDPOINT='http://127.0.0.1:$s3_port'
export INDEXTABLES_TEST_AZURE_ENDPOINT='$az_ep'
export INDEXTABLES_TEST_AZURE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=$AZ_ACCOUNT;AccountKey=$AZ_KEY;BlobEndpoint=$az_ep;'
EOF
    say "moto S3 on http://127.0.0.1:$s3_port (pid $(cat "$STATE/moto.pid")), Azurite on $az_ep (pid $(cat "$STATE/azurite.pid"))"
    say "to use them from a shell: source $STATE/env.sh"
}

cmd_status() {
    local name pattern
    for name in moto azurite; do
        pattern=$([ "$name" = moto ] && echo scripts/moto_server.py || echo azurite-blob)
        if [ -f "$STATE/$name.pid" ] && pid_is "$(cat "$STATE/$name.pid")" "$pattern"; then
            echo "$name: running (pid $(cat "$STATE/$name.pid"))"
        else
            echo "$name: not running"
        fi
    done
    [ -f "$STATE/env.sh" ] && cat "$STATE/env.sh"
    return 0
}

cmd_run() {
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "usage: $0 run -- COMMAND [ARGS...]"
    # A private state dir: does not clash with emulators started by hand with `start`.
    STATE=$EM_DIR/run.$$
    trap 'cmd_stop; rm -rf "$STATE"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    cmd_start
    # shellcheck disable=SC1091
    . "$STATE/env.sh"
    local rc=0
    "$@" || rc=$?
    exit "$rc"
}

case "${1:-}" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    run) shift; cmd_run "$@" ;;
    *) echo "usage: $0 install|start|stop|status|run -- COMMAND..." >&2; exit 2 ;;
esac
