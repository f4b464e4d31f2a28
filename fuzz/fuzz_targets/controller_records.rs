//! Fuzz target `controller_records`: the harness `fuzz/harness/controller_records.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets controller_records [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/controller_records.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
