//! Fuzz target `quorum_state`: the harness `fuzz/harness/quorum_state.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets quorum_state [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/quorum_state.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
