//! Fuzz target `node_files`: the harness `fuzz/harness/node_files.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets node_files [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/node_files.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
