//! Fuzz target `peer_envelope`: the harness `fuzz/harness/peer_envelope.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets peer_envelope [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/peer_envelope.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
