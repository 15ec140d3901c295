#!/bin/bash
# Installs what memest needs to build and test (Debian, as root), builds it
# twice (release, and ASan+UBSan halting on the first error), runs every test
# in both builds and ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."

deps="gcc pkg-config meson ninja-build python3 valgrind libcjson-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev librsvg2-bin"
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
    # Reuse a configured folder; anything else under that name (a partial
    # copy, a folder from another meson version) is rebuilt from scratch.
    if [ -f "$dir/meson-private/coredata.dat" ] &&
        meson setup --reconfigure "$dir" "$@" >/dev/null 2>&1; then
        return 0
    fi
    rm -rf "$dir"
    meson setup "$dir" "$@" >/dev/null
}

setup build || status=1
setup build-asan -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fno-sanitize-recover=all || status=1
for dir in build build-asan; do
    if ! meson compile -C "$dir" >"$dir/compile.log" 2>&1; then
        cat "$dir/compile.log"; echo "build failed in $dir"; status=1; continue
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
