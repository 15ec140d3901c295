#!/bin/bash
# Installs what memest needs to build and test (Debian, as root), builds it
# twice (release, and ASan+UBSan halting on the first error), runs every test
# in both builds and ends with "N passed, N failed". The Python package's
# tests (suite python, Debian's python3-torch) run in the release build only.
set -u
cd "$(dirname "$0")/.."

deps="gcc pkg-config meson ninja-build python3 valgrind libcjson-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev librsvg2-bin python3-torch python3-torchvision python3-pip python3-venv python3-setuptools python3-wheel"
missing=""
for p in $deps; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    echo "installing:$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || {
        echo "apt-get install failed"; echo "0 passed, 1 failed"; exit 1; }
fi

status=0
setup() { # dir, extra options...
    local dir=$1; shift
    # Reuse a folder configured for this very checkout; anything else under
    # that name (a partial copy, a copy made for another checkout, another
    # meson version) is rebuilt from scratch.
    local src
    src=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
        "$dir/meson-info/meson-info.json" 2>/dev/null)
    if [ -f "$dir/meson-private/coredata.dat" ] && [ "$src" = "$(pwd -P)" ] &&
        meson setup --reconfigure "$dir" "$@" >/dev/null 2>&1; then
        return 0
    fi
    rm -rf "$dir"
    # meson prints its ERROR line on stdout: keep it for a failed setup
    local log
    log=$(mktemp)
    if ! meson setup "$dir" "$@" >"$log" 2>&1; then
        tail -n 40 "$log"; rm -f "$log"; echo "meson setup failed in $dir"
        return 1
    fi
    rm -f "$log"
}

asan_opts="-Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fno-sanitize-recover=all"
opts() { [ "$1" = build-asan ] && echo "$asan_opts"; true; }
for dir in build build-asan; do
    # shellcheck disable=SC2046
    setup "$dir" $(opts "$dir") || status=1
    rm -f "$dir/meson-logs/testlog.json" # only this run's results count
    if ! meson compile -C "$dir" >"$dir/compile.log" 2>&1; then
        # a folder left half-built by something else: once more from scratch
        rm -rf "$dir"
        # shellcheck disable=SC2046
        setup "$dir" $(opts "$dir") || status=1
        if ! meson compile -C "$dir" >"$dir/compile.log" 2>&1; then
            cat "$dir/compile.log"; echo "build failed in $dir"; status=1; continue
        fi
    fi
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C "$dir" --print-errorlogs --num-processes 2 || status=1
done

# One closing line over both builds, from meson's own test logs.
python3 - <<'PY' || status=1
import json, os, sys
passed = failed = 0
for d in ("build", "build-asan"):
    log = os.path.join(d, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        failed += 1
        continue
    for line in open(log):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r != "SKIP":
            failed += 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed or not passed else 0)
PY
rc=$?
[ $rc -ne 0 ] && status=1
exit $status
