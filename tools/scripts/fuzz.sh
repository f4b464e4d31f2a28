#!/usr/bin/env bash
# Fuzzes the Kafka listener's framing and dispatch: the cargo-fuzz target `kafka_listener`
# (fuzz/fuzz_targets/kafka_listener.rs) for SECONDS (default 600), then prints the executions,
# the coverage libFuzzer measured, and the coverage of corum-kafka's functions. Exits non-zero
# on a finding (a panic, an abort, a leak, an allocation above the RSS limit, an input slower
# than the per-input timeout); libFuzzer writes the input to fuzz/artifacts/kafka_listener/,
# and `cargo test -p corum-kafka --test fuzz_corpus` replays it once it is fixed and kept.
#
#   tools/scripts/fuzz.sh [--stable] [SECONDS]
#
# --stable: the stable toolchain without a sanitizer (what the README's test command runs, for
# a bounded time, on a machine that may have no nightly); libFuzzer's progress lines then go
# to the log only (the last 80 lines are printed on a finding). Otherwise, from the environment:
#   CORUM_FUZZ_TOOLCHAIN  rustup toolchain (default nightly: AddressSanitizer needs it)
#   CORUM_FUZZ_SANITIZER  address (default) or none (no sanitizer; also builds on stable)
#
# The run grows a working corpus in fuzz/corpus-work/ (ignored by git) from the checked-in
# seeds in fuzz/corpus/kafka_listener/, which it only reads; the next run starts from both.
set -euo pipefail
cd "$(dirname "$0")/../.."

toolchain="${CORUM_FUZZ_TOOLCHAIN:-nightly}"
sanitizer="${CORUM_FUZZ_SANITIZER:-address}"
quiet=0
if [ "${1:-}" = --stable ]; then
    toolchain=stable
    sanitizer=none
    quiet=1
    shift
fi
seconds="${1:-600}"
target=kafka_listener

case "$seconds" in
    '' | *[!0-9]*)
        echo "usage: $0 [--stable] [SECONDS]" >&2
        exit 2
        ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

work="fuzz/corpus-work/$target"
seeds="fuzz/corpus/$target"
mkdir -p "$work" "fuzz/artifacts/$target"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

# -timeout: one connection's bytes are served in microseconds; 10 s means a hang.
# -rss_limit_mb: the process's memory; a lying length must not get near it (the node's
# allocator maps huge vectors without reserving memory).
# -max_len: requests of up to 64 KiB, enough for every field to reach its size limits.
set +e
if [ "$quiet" = 1 ]; then
    echo "building and fuzzing $target for ${seconds}s (libFuzzer's output: the end of a failed run)"
    cargo "+$toolchain" fuzz run --sanitizer "$sanitizer" --debug-assertions \
        "$target" "$work" "$seeds" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 >"$log" 2>&1
    status=$?
    if [ "$status" -ne 0 ]; then
        tail -n 80 "$log"
    fi
else
    cargo "+$toolchain" fuzz run --sanitizer "$sanitizer" --debug-assertions \
        "$target" "$work" "$seeds" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 2>&1 | tee "$log"
    status="${PIPESTATUS[0]}"
fi
set -e

echo
echo "== kafka_listener: ${seconds}s, toolchain $toolchain, sanitizer $sanitizer"
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
grep -E '^#[0-9]+ +DONE' "$log" | tail -n 1 || true
echo "working corpus: $(find "$work" -type f | wc -l) files"

if [ "$status" -ne 0 ]; then
    echo "FINDING: the fuzz run failed (exit $status); the input is in fuzz/artifacts/$target/" >&2
    exit "$status"
fi

# Function coverage of corum-kafka over the corpus: libFuzzer symbolizes the edges it saw.
binary="$(find "${CARGO_TARGET_DIR:-fuzz/target}" -path "*/release/$target" -type f | head -n 1)"
if [ -n "$binary" ] && command -v llvm-symbolizer >/dev/null 2>&1; then
    cov="$(mktemp)"
    scratch="$(mktemp -d)"
    ASAN_OPTIONS=detect_leaks=0 "$binary" -runs=0 -print_coverage=1 -artifact_prefix="$scratch/" \
        "$work" "$seeds" >"$cov" 2>&1 || true
    rm -rf "$scratch"
    awk '
        /^(COVERED|UNCOVERED)_FUNC:/ && /corum-kafka|\/kafka\/src\// {
            split($0, f, "edges: "); split(f[2], e, "[/ ]");
            covered += e[1]; total += e[2];
            if ($1 == "COVERED_FUNC:") fn_cov++; fn_all++;
        }
        END {
            if (total > 0)
                printf "corum-kafka: %d of %d functions reached, %d of %d edges (%.1f %%)\n",
                    fn_cov, fn_all, covered, total, 100 * covered / total;
        }' "$cov"
    rm -f "$cov"
fi
