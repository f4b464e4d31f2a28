//! Fuzz target `snapshot_download`: the harness `fuzz/harness/snapshot_download.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets snapshot_download [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/snapshot_download.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
