//! Fuzz target `client_protocol`: the harness `fuzz/harness/client_protocol.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets client_protocol [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/client_protocol.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
