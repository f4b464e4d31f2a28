//! The sans-IO Raft core of corum (KIP-595 semantics with KIP-996 pre-vote and KIP-853 dynamic
//! voters) and the deterministic cluster simulator that tests it.
