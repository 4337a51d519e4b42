#!/usr/bin/env bash
# Prints the path of a working CPython X.Y interpreter (the Makefile's smoke steps run one venv per
# supported Python). Does not assume pyenv is on PATH, nor that a `pythonX.Y` on PATH works (a pyenv
# shim for a version that is installed but not selected fails when run).
#
#   scripts/find-python.sh 3.13      first that runs and is 3.13 (not free-threaded) of:
#       pythonX.Y on PATH; $(pyenv root)/versions/X.Y.*/bin/pythonX.Y (newest patch first);
#       ${PYENV_ROOT:-~/.pyenv}/versions/X.Y.*/bin/pythonX.Y; /root/.pyenv/versions/X.Y.*/bin/pythonX.Y;
#       `uv python find X.Y` (uv-managed or system Pythons uv knows)
#
# Exit 1 with the list of what was tried on stderr when none is found.
set -euo pipefail

want="${1:?usage: scripts/find-python.sh X.Y}"
[[ "$want" =~ ^3\.[0-9]+$ ]] || { echo "find-python.sh: expected a version like 3.13, got '$want'" >&2; exit 2; }

tried=()

# Succeeds when "$1" runs and is CPython $want with the GIL (the free-threaded build is another ABI).
is_wanted() {
    "$1" -c "import sys, sysconfig; ok = sys.version_info[:2] == tuple(map(int, '$want'.split('.'))) \
and sys.implementation.name == 'cpython' and not sysconfig.get_config_var('Py_GIL_DISABLED'); sys.exit(0 if ok else 1)" \
        >/dev/null 2>&1
}

try() {
    tried+=("$1")
    if [ -x "$1" ] && is_wanted "$1"; then
        echo "$1"
        exit 0
    fi
}

# pyenv-style version directories, newest patch first (3.13.10 before 3.13.9; 3.13t excluded).
try_versions_dir() {
    local root="$1" dir found=0
    while IFS= read -r dir; do
        [ -n "$dir" ] || continue
        found=1
        try "$dir/bin/python$want"
    done < <(find "$root/versions" -mindepth 1 -maxdepth 1 -name "$want.*" ! -name '*t' 2>/dev/null | sort -rV)
    [ "$found" = 1 ] || tried+=("$root/versions/$want.* (none)")
    return 0
}

if on_path=$(command -v "python$want" 2>/dev/null); then
    try "$on_path"
else
    tried+=("python$want on PATH")
fi
roots=()
if command -v pyenv >/dev/null 2>&1; then
    roots+=("$(pyenv root)")
fi
roots+=("${PYENV_ROOT:-$HOME/.pyenv}" /root/.pyenv)
seen=" "
for root in "${roots[@]}"; do
    case "$seen" in *" $root "*) continue ;; esac
    seen="$seen$root "
    try_versions_dir "$root"
done
if command -v uv >/dev/null 2>&1; then
    if found=$(uv python find --no-project "$want" 2>/dev/null); then
        try "$found"
    else
        tried+=("uv python find $want")
    fi
fi

{
    echo "find-python.sh: no working Python $want found; tried:"
    printf '    %s\n' "${tried[@]}"
} >&2
exit 1
