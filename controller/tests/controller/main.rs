//! The controller's integration tests, one binary (every test binary links the whole
//! dependency graph; one binary with a module per subject links once): the data-driven
//! scenarios and the property tests, both over the in-memory driver of [`common`].

mod common;
mod properties;
mod scenarios;
