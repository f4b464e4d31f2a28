//! Placeholder until the subsystem's benches land (replaced before commit).
fn main() {}
