//! Fuzz target `log_frame`: the harness `fuzz/harness/log_frame.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets log_frame [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/log_frame.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
