//! Fuzz target `properties_config`: the harness `fuzz/harness/properties_config.rs` (shared with the stable replay
//! test `tools/tests/fuzz_corpus.rs`; read its module doc for the input and what it checks).
//!
//! Run it with `tools/scripts/fuzz.sh --targets properties_config [SECONDS]`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness/properties_config.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
