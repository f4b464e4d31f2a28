//! corum's criterion benches live in `benches/benches/`, one file per subsystem (`cargo bench -p
//! corum-benches --bench <subsystem>`). This library is empty: a package needs a library or a
//! binary target besides its benches.
