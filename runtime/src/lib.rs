//! The shard-per-core runtime every corum node runs on.
