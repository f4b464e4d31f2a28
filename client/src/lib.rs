//! Clients of a corum quorum (skeleton; filled in by the client work of issue #6).
