//! Fuzz target `snapshot_file`: the harness `fuzz/harness/snapshot_file.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets snapshot_file [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/snapshot_file.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
