//! The one rule for golden files (expected outputs kept in the repository, checked by tests):
//! a test rewrites its golden file only when `CORUM_REWRITE=1`. Any other value, `0` and the
//! empty string included, checks the file as when the variable is unset. Every golden harness
//! (the Raft and controller scenario scripts, the frame and record byte goldens) asks
//! [`rewrite_requested`], so one variable and one rule cover them all.

use std::ffi::OsStr;

/// The environment variable that asks golden tests to rewrite their files.
pub const REWRITE_VAR: &str = "CORUM_REWRITE";

/// Whether this run rewrites golden files instead of checking them: `CORUM_REWRITE` is `1`.
pub fn rewrite_requested() -> bool {
    rewrite_value_requests(std::env::var_os(REWRITE_VAR).as_deref())
}

/// The rule on the variable's value (`None`: unset): only exactly `1` rewrites.
pub fn rewrite_value_requests(value: Option<&OsStr>) -> bool {
    value.is_some_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exactly_one_rewrites() {
        // Unset, 0, empty and other spellings of "yes" check the goldens; only "1" rewrites.
        assert!(!rewrite_value_requests(None));
        for value in ["0", "", "true", "yes", " 1", "1 ", "01", "2"] {
            assert!(
                !rewrite_value_requests(Some(OsStr::new(value))),
                "{value:?}"
            );
        }
        assert!(rewrite_value_requests(Some(OsStr::new("1"))));
    }
}
