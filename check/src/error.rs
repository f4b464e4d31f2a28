//! Errors of the checker crate: a history that cannot be read. A history that reads fine but
//! shows a violation is not an error; it is a [`crate::Report`].
//!
//! | error | raised by | what the caller does |
//! |---|---|---|
//! | [`Error::Io`] | [`crate::History::read`] | check the path and the file |
//! | [`Error::Json`] | [`crate::History::read`], [`crate::History::parse`] | fix the recorder: the line is not a record of this format |
//! | [`Error::Invalid`] | the same | fix the recorder: the record is well-formed JSON that breaks a rule of the format (an outcome the operation cannot have, a completion before the invocation, ...) |

use std::path::PathBuf;

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or read.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Line `line` (counted from 1) is not JSON, or not a record of this format.
    #[error("line {line}: not a history record: {source}")]
    Json {
        line: usize,
        source: serde_json::Error,
    },
    /// Line `line` (counted from 1) is a record that breaks a rule of the format.
    #[error("line {line}: {reason}")]
    Invalid { line: usize, reason: String },
}
