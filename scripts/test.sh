#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The project's test command (README, .ci/run). On Debian 12 with the CUDA Toolkit headers
# (CUDA_HOME, CUDA_PATH or /usr/local/cuda) it installs what is missing, then runs three stages:
#   normal  configure + build + every meson test suite (benchmarks are not tests)
#   asan    -Db_sanitize=address,undefined: every suite
#   tsan    -Db_sanitize=thread: the 'stress' suite (the pool and the stack recorder under threads)
# and ends with one line "N passed, N failed" summed over the three meson test runs.
#
# Usage: scripts/test.sh [--quick] [--no-install]
#   --quick       the normal stage only
#   --no-install  never call apt-get (fail if something is missing) nor fetch newer Pythons
# Environment: BUILD_ROOT (default <repo>/build-test), JOBS (default: all cores).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

QUICK=0
INSTALL=1
for arg in "$@"; do
    case "$arg" in
    --quick) QUICK=1 ;;
    --no-install) INSTALL=0 ;;
    -h | --help)
        sed -n '3,14p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "scripts/test.sh: unknown argument '$arg' (try --help)" >&2
        exit 2
        ;;
    esac
done

BUILD_ROOT=${BUILD_ROOT:-$ROOT/build-test}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
export CI=${CI:-}

log() { printf '\n==> %s\n' "$*"; }
die() {
    printf 'scripts/test.sh: %s\n' "$*" >&2
    echo "0 passed, 1 failed"
    exit 1
}

# ---- packages -------------------------------------------------------------------------------
# scripts/install-deps.sh installs what is missing (apt-get update once, only then). clang and
# libclang-rt-dev build the libFuzzer test of the trace reader (tests/unit/trace), which meson
# skips without clang++; binutils (nm, readelf for the symbols suite) comes with g++. chromium
# opens the HTML report in the golden_html test (headless, from a file:// URL). clang-format checks
# the sources' formatting (lint suite).
PACKAGES=(meson ninja-build g++ pkg-config libunwind-dev libspdlog-dev libfmt-dev catch2 libdw-dev python3
          nlohmann-json3-dev clang libclang-rt-dev chromium clang-format)

installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = "installed" ]; }

ensure_packages() {
    if ! command -v dpkg-query >/dev/null; then
        echo "not a Debian system: not checking packages (needed: ${PACKAGES[*]})"
        return 0
    fi
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        installed "$p" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "all packages present: ${PACKAGES[*]}"
        return 0
    fi
    echo "missing packages: ${missing[*]}"
    [ "$INSTALL" = 1 ] || die "missing packages and --no-install given: ${missing[*]}"
    EXTRA_PACKAGES="clang libclang-rt-dev chromium clang-format" bash "$ROOT/scripts/install-deps.sh" ||
        die "scripts/install-deps.sh failed (missing: ${missing[*]})"
    for p in "${PACKAGES[@]}"; do
        installed "$p" || die "package $p still missing after scripts/install-deps.sh"
    done
}

find_cuda() {
    local d
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        if [ -n "$d" ] && [ -f "$d/include/cuda.h" ]; then
            echo "$d"
            return 0
        fi
    done
    return 1
}

# ---- stages ---------------------------------------------------------------------------------
TOTAL_PASS=0
TOTAL_FAIL=0
SUMMARY=()
STATUS=0

# Count one meson test run from its testlog.json (one JSON object per test).
count_results() {
    python3 - "$1" <<'EOF'
import json, sys
ok = bad = 0
try:
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                r = json.loads(line).get("result", "")
                if r in ("OK", "EXPECTEDFAIL"):
                    ok += 1
                elif r != "SKIP":
                    bad += 1
except OSError:
    pass
print(ok, bad)
EOF
}

# Every build target except the benchmark executables (bench_*), as meson compile arguments: the
# sanitizer stage runs tests, not benchmarks. Empty output (introspection failed): build all.
test_targets() {
    meson introspect --targets "$1" 2>/dev/null | python3 -c '
import json, os, sys
root = sys.argv[1]
for t in json.load(sys.stdin):
    if t["name"].startswith("bench_"):
        continue
    sub = os.path.relpath(os.path.dirname(t["defined_in"]), root)
    print("%s%s:%s" % ("" if sub == "." else sub + "/", t["name"], t["type"].replace(" ", "_")))
' "$ROOT" 2>/dev/null | tr '\n' ' '
}

# stage NAME BUILD_DIR "SETUP OPTIONS" "TARGETS (empty: all; 'tests': all but benchmarks)" "TEST OPTIONS"
stage() {
    local name=$1 dir=$2 setup=$3 targets=$4 tests=$5
    local start=$SECONDS pass=0 fail=0 note=""
    log "stage $name: $dir"
    # A build directory left by an older configuration is reconfigured, not trusted.
    if [ -f "$dir/build.ninja" ]; then
        # shellcheck disable=SC2086
        meson setup --reconfigure "$dir" $setup >"$dir.setup.log" 2>&1 || { rm -rf "$dir"; }
    fi
    if [ ! -f "$dir/build.ninja" ]; then
        mkdir -p "$(dirname "$dir")"
        # shellcheck disable=SC2086
        if ! meson setup "$dir" $setup >"$dir.setup.log" 2>&1; then
            tail -n 30 "$dir.setup.log"
            note="configure failed ($dir.setup.log)"
        fi
    fi
    if [ -z "$note" ] && [ "$targets" = tests ]; then
        targets=$(test_targets "$dir")
    fi
    if [ -z "$note" ]; then
        # shellcheck disable=SC2086
        if ! meson compile -C "$dir" -j "$JOBS" $targets; then
            note="build failed"
        fi
    fi
    if [ -z "$note" ]; then
        rm -f "$dir/meson-logs/testlog.json"
        # shellcheck disable=SC2086
        meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$JOBS" $tests
        local rc=$?
        read -r pass fail < <(count_results "$dir/meson-logs/testlog.json")
        if [ "$rc" != 0 ] && [ "$fail" = 0 ]; then
            fail=1
            note="meson test exited $rc"
        fi
    else
        fail=1 # the stage could not run its tests: count it as one failure
    fi
    local secs=$((SECONDS - start))
    TOTAL_PASS=$((TOTAL_PASS + pass))
    TOTAL_FAIL=$((TOTAL_FAIL + fail))
    [ "$fail" = 0 ] || STATUS=1
    SUMMARY+=("$(printf '%-7s %4d passed %4d failed %5ds%s' "$name" "$pass" "$fail" "$secs" \
        "${note:+  ($note)}")")
}

log "packages"
ensure_packages
CUDA_DIR=$(find_cuda) || die "CUDA Toolkit headers not found: set CUDA_HOME to a directory with include/cuda.h"
echo "CUDA headers: $CUDA_DIR/include"
command -v meson >/dev/null || die "meson not found after installing packages"
# The Python tests run under every CPython found (tests/python/find_pythons.py); the newer ones
# (Debian unstable's 3.14 and 3.15) are unpacked, not installed, into ~/.cache (no network: skipped).
log "newer Pythons"
if [ "$INSTALL" = 1 ]; then bash "$ROOT/scripts/fetch-pythons.sh"; else echo "not fetched (--no-install)"; fi

T0=$SECONDS
# Every stage runs with the pool's block-chain checks on (debug-only; src/pool/block_store.hpp).
COMMON="-Dtoolkit_dir=$CUDA_DIR -Dpool_checks=true"

# The normal stage treats warnings as errors (-Dwerror=true): a warning fails CI, not a user's build.
stage normal "$BUILD_ROOT/normal" "$COMMON --buildtype=debugoptimized -Dwerror=true" "" ""

if [ "$QUICK" = 0 ]; then
    # UBSan only prints by default: make a finding fail its test. Leak checking stays on.
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
    # Benchmarks are not tests: build every test target, not the benchmark executables.
    stage asan "$BUILD_ROOT/asan" "$COMMON --buildtype=debugoptimized -Db_sanitize=address,undefined" tests ""
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
    stage tsan "$BUILD_ROOT/tsan" "$COMMON --buildtype=debugoptimized -Db_sanitize=thread" "pool_stress history_stress test_stacks test_torch_queue" \
        "--suite stress"
fi

log "summary ($((SECONDS - T0))s)"
for line in "${SUMMARY[@]}"; do
    echo "  $line"
done
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
exit $STATUS
