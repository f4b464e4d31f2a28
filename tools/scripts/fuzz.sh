#!/usr/bin/env bash
# Fuzzes corum's decoders of bytes from disk or network: every cargo-fuzz target of fuzz/
# (fuzz/Cargo.toml's [[bin]]s: one per decoder family, see fuzz/README.md), or the ones named,
# one after another, each for SECONDS (default 600). Prints one summary line per target
# (executions, executions per second, new corpus units, peak RSS) and exits non-zero if any
# target had a finding (a panic, an abort, a leak, an allocation above the RSS limit, an
# input slower than the per-input timeout), naming the target and the input libFuzzer wrote
# to fuzz/artifacts/<target>/. `cargo test -p corum-tools --test fuzz_corpus` (and, for
# kafka_listener, `cargo test -p corum-kafka --test fuzz_corpus`) replays kept artifacts.
#
#   tools/scripts/fuzz.sh [--stable] [--build-only] [--targets a,b,...] [SECONDS]
#
# --build-only: build the targets and stop (tools/scripts/test.sh builds them beside the
# workspace's tests, then runs them).
# --stable: the stable toolchain without a sanitizer (what the README's test command runs, for
# a bounded time, on a machine that may have no nightly). Otherwise, from the environment:
#   CORUM_FUZZ_TOOLCHAIN  rustup toolchain (default nightly: AddressSanitizer needs it)
#   CORUM_FUZZ_SANITIZER  address (default) or none (no sanitizer; also builds on stable)
#   CORUM_FUZZ_RUNS       also stop a target after this many executions (default: no limit)
# libFuzzer's own output goes to fuzz/logs/<target>.log (ignored by git); on a finding its
# last 60 lines are printed. With AddressSanitizer, the kafka_listener line also says how many
# of corum-kafka's functions and edges its corpus reaches.
#
# Each run grows a working corpus in fuzz/corpus-work/<target>/ (ignored by git) from the
# checked-in seeds in fuzz/corpus/<target>/, which it only reads; the next run starts from both.
set -euo pipefail
cd "$(dirname "$0")/../.."

usage() {
    echo "usage: $0 [--stable] [--build-only] [--targets a,b,...] [SECONDS]" >&2
    exit 2
}

toolchain="${CORUM_FUZZ_TOOLCHAIN:-nightly}"
sanitizer="${CORUM_FUZZ_SANITIZER:-address}"
runs="${CORUM_FUZZ_RUNS:-}"
all="$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^corum-fuzz$')"
targets="$all"
seconds=600
build_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --stable)
            toolchain=stable
            sanitizer=none
            ;;
        --build-only) build_only=1 ;;
        --targets)
            [ $# -ge 2 ] || usage
            targets="$(echo "$2" | tr ',' '\n')"
            shift
            ;;
        '' | *[!0-9]*) usage ;;
        *) seconds="$1" ;;
    esac
    shift
done
for t in $targets; do
    echo "$all" | grep -qx "$t" || {
        echo "unknown target $t; the targets: $(echo $all)" >&2
        exit 2
    }
done
case "$runs" in
    *[!0-9]*) usage ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

flags=(--sanitizer "$sanitizer" --debug-assertions)
echo "building the fuzz targets (toolchain $toolchain, sanitizer $sanitizer)"
for t in $targets; do
    cargo "+$toolchain" fuzz build "${flags[@]}" "$t" 2>&1 | tail -n 3
done
if [ "$build_only" = 1 ]; then
    exit 0
fi
mkdir -p fuzz/logs

# -timeout: a decoder handles one input in microseconds; 10 s means a hang.
# -rss_limit_mb: the process's memory (and, by libFuzzer's default, the largest single
# allocation): a lying length must not get near it.
# -max_len: kafka_listener's requests up to 64 KiB, enough for every field to reach its size
# limits; the other targets take libFuzzer's default (at least 4 KiB, at least the largest
# seed).
failed=()
for target in $targets; do
    work="fuzz/corpus-work/$target"
    seeds="fuzz/corpus/$target"
    log="fuzz/logs/$target.log"
    mkdir -p "$work" "$seeds" "fuzz/artifacts/$target"
    extra=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -max_total_time="$seconds")
    if [ "$target" = kafka_listener ]; then
        extra+=(-max_len=65536)
    fi
    if [ -n "$runs" ]; then
        extra+=(-runs="$runs")
    fi
    start="$(date +%s)"
    set +e
    cargo "+$toolchain" fuzz run "${flags[@]}" "$target" "$work" "$seeds" -- "${extra[@]}" \
        >"$log" 2>&1
    status=$?
    set -e
    elapsed=$(($(date +%s) - start))
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
    execs="$(stat number_of_executed_units)"
    line="$(printf '%-24s %12s executions in %4ss, %7s exec/s, %5s new units, peak RSS %5s MB' \
        "$target" "${execs:-?}" "$elapsed" "$(stat average_exec_per_sec)" \
        "$(stat new_units_added)" "$(stat peak_rss_mb)")"
    if [ "$status" -ne 0 ]; then
        artifact="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
        echo "$line: FINDING (exit $status)"
        tail -n 60 "$log"
        failed+=("$target: ${artifact:-see $log}")
        continue
    fi
    echo "$line: ok"

    # Function coverage of corum-kafka over the listener's corpus: libFuzzer symbolizes the
    # edges it saw (with AddressSanitizer's instrumentation).
    if [ "$target" = kafka_listener ] && [ "$sanitizer" != none ]; then
        binary="$(find "${CARGO_TARGET_DIR:-fuzz/target}" -path "*/release/$target" -type f | head -n 1)"
        if [ -n "$binary" ] && command -v llvm-symbolizer >/dev/null 2>&1; then
            cov="$(mktemp)"
            scratch="$(mktemp -d)"
            ASAN_OPTIONS=detect_leaks=0 "$binary" -runs=0 -print_coverage=1 \
                -artifact_prefix="$scratch/" "$work" "$seeds" >"$cov" 2>&1 || true
            rm -rf "$scratch"
            awk '
                /^(COVERED|UNCOVERED)_FUNC:/ && /corum-kafka|\/kafka\/src\// {
                    split($0, f, "edges: "); split(f[2], e, "[/ ]");
                    covered += e[1]; total += e[2];
                    if ($1 == "COVERED_FUNC:") fn_cov++; fn_all++;
                }
                END {
                    if (total > 0)
                        printf "  corum-kafka: %d of %d functions reached, %d of %d edges (%.1f %%)\n",
                            fn_cov, fn_all, covered, total, 100 * covered / total;
                }' "$cov"
            rm -f "$cov"
        fi
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "FINDINGS (libFuzzer's input, to reproduce with cargo +$toolchain fuzz run TARGET INPUT):" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
fi
