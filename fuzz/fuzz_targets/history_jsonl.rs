//! Fuzz target `history_jsonl`: the harness `fuzz/harness/history_jsonl.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets history_jsonl [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/history_jsonl.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
