#!/usr/bin/env bash
# The workspace's tests, then every fuzz target for SECONDS (default 15) on stable: what the
# README's test command runs after compat/install.sh. Exits non-zero when either fails.
#
#   tools/scripts/test.sh [SECONDS]
#
# The two overlap. The fuzz targets build (tools/scripts/fuzz.sh --build-only, in fuzz/target)
# from the start, at nice 19, so they take only the CPU that `cargo test --workspace` leaves:
# little while the workspace compiles, most of it while the process tests wait on their
# clusters (one at a time, timeouts and elections). The fuzz runs start once the workspace is
# compiled, also at nice 19, each for SECONDS of wall time (so with fewer executions than on an
# idle machine; the line per target says how many). Their output goes to
# fuzz/logs/test-sh.log and is printed after the tests' own.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds="${1:-15}"
case "$seconds" in
    '' | *[!0-9]*)
        echo "usage: $0 [SECONDS]" >&2
        exit 2
        ;;
esac

mkdir -p fuzz/logs
fuzz_log=fuzz/logs/test-sh.log
state="$(mktemp -d -t corum-test.XXXXXX)"
# The fuzz side runs as a process group of its own (job control on), stopped whole if the tests'
# side ends first (a compile error, an interrupt). Not a session of its own: where the kernel
# groups tasks by session for scheduling (autogroup), nice only ranks tasks within one session,
# and a fuzz build in a new session would take half the CPU from the tests' compile.
fuzz_pid=""
cleanup() {
    if [ -n "$fuzz_pid" ]; then
        kill -TERM -- "-$fuzz_pid" 2>/dev/null || true
    fi
    rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The runs wait for the workspace's compile: a fuzz run beside it would get almost no CPU and
# its line would mean little. Bounded like every wait here.
set -m
(
    nice -n 19 tools/scripts/fuzz.sh --stable --build-only || exit $?
    for _ in $(seq 7200); do
        [ -e "$state/compiled" ] && break
        [ -d "$state" ] || exit 1
        sleep 1
    done
    [ -e "$state/compiled" ] || {
        echo "test.sh: the workspace did not finish compiling within 2 hours" >&2
        exit 1
    }
    exec nice -n 19 tools/scripts/fuzz.sh --stable "$seconds"
) >"$fuzz_log" 2>&1 </dev/null &
fuzz_pid=$!
set +m

cargo test --workspace --no-run
touch "$state/compiled"
set +e
cargo test --workspace
tests=$?
echo "test.sh: waiting for the fuzz targets (fuzz/logs/test-sh.log)"
wait "$fuzz_pid"
fuzz=$?
fuzz_pid=""
set -e
cat "$fuzz_log"
if [ "$tests" -ne 0 ] || [ "$fuzz" -ne 0 ]; then
    echo "test.sh: failed (cargo test exit $tests, fuzz exit $fuzz)" >&2
    exit 1
fi
