//! Kafka's properties format, as `java.util.Properties` reads it minus the parts nobody uses
//! in a server config:
//!
//! - one `key=value` per logical line; the key ends at the first unescaped `=`, `:` or
//!   whitespace; whitespace around the separator is dropped, and trailing whitespace of the value
//!   is trimmed too (Java keeps it; in a server config it is always a mistake);
//! - lines whose first non-blank character is `#` or `!` are comments; blank lines are skipped;
//! - a line ending in an odd number of backslashes continues on the next line (whose leading
//!   whitespace is dropped);
//! - escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX` (BMP, no surrogates), and `\` before any other
//!   character stands for that character (`\=`, `\:`, `\ `, `\\`, `\#`).
//!
//! [`parse_properties`] knows nothing of keys: what a key means, and whether it may repeat, is
//! the caller's (the node configuration, `meta.properties`).

use crate::error::{ConfigError, ConfigSource, SyntaxError};

/// One `key=value` entry of a properties file, with the line it starts on (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyEntry {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// Parses properties text into entries, in file order (see the module doc for the format).
/// Duplicates are kept: what they mean is the caller's decision.
pub fn parse_properties(text: &str) -> Result<Vec<PropertyEntry>, ConfigError> {
    let mut entries = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, raw)) = lines.next() {
        let start_line = index + 1;
        let first = raw.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes escapes the newline.
        let mut logical = String::from(first);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let at = ConfigSource::Line(start_line);
        let (key, value) =
            split_entry(&logical).map_err(|reason| ConfigError::Syntax { at, reason })?;
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                at,
                reason: SyntaxError::EmptyKey,
            });
        }
        entries.push(PropertyEntry {
            key,
            value,
            line: start_line,
        });
    }
    Ok(entries)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Splits one logical line into an unescaped key and value.
fn split_entry(line: &str) -> Result<(String, String), SyntaxError> {
    let mut key = String::new();
    let mut chars = line.chars().peekable();
    // The key ends at the first unescaped '=', ':' or whitespace.
    let mut separator_seen = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => key.push(unescape(&mut chars)?),
            '=' | ':' => {
                separator_seen = true;
                break;
            }
            c if c.is_whitespace() => break,
            c => key.push(c),
        }
    }
    // Whitespace, then at most one '=' or ':' (if whitespace ended the key), then whitespace.
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    if !separator_seen && matches!(chars.peek(), Some('=') | Some(':')) {
        chars.next();
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    }
    let mut value = String::new();
    // Trailing whitespace is trimmed unless escaped: remember where the escaped part ends.
    let mut keep_len = 0;
    while let Some(c) = chars.next() {
        if c == '\\' {
            value.push(unescape(&mut chars)?);
            keep_len = value.len();
        } else {
            value.push(c);
            if !c.is_whitespace() {
                keep_len = value.len();
            }
        }
    }
    value.truncate(keep_len);
    Ok((key, value))
}

fn unescape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<char, SyntaxError> {
    match chars.next() {
        None => Err(SyntaxError::DanglingBackslash),
        Some('t') => Ok('\t'),
        Some('n') => Ok('\n'),
        Some('r') => Ok('\r'),
        Some('f') => Ok('\u{c}'),
        Some('u') => {
            let hex: String = (0..4).filter_map(|_| chars.next()).collect();
            let code = u32::from_str_radix(&hex, 16)
                .ok()
                .filter(|_| hex.len() == 4)
                .ok_or_else(|| SyntaxError::UnicodeEscape { hex: hex.clone() })?;
            char::from_u32(code).ok_or(SyntaxError::Surrogate { hex })
        }
        Some(c) => Ok(c),
    }
}

/// Escapes a value so that [`parse_properties`] reads it back unchanged.
pub fn escape_value(value: &str) -> String {
    let count = value.chars().count();
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            // Leading and trailing whitespace would be dropped by the parser: escape it.
            c if c.is_whitespace() && (i == 0 || i + 1 == count) => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Comments, blank lines, ':' and whitespace separators, continuations and escapes parse as
    /// Java's Properties reads them.
    #[test]
    fn properties_syntax() {
        let text = "# comment\n  ! another\n\n a = b \nc:d\ne f\ng\\=h=i\\tj\\u0041\\\\\n\
                    long=one,\\\n     two\nempty=\nsp=\\ x\\ \n";
        let e = parse_properties(text).unwrap();
        let kv: Vec<(&str, &str)> = e
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            kv,
            vec![
                ("a", "b"),
                ("c", "d"),
                ("e", "f"),
                ("g=h", "i\tjA\\"),
                ("long", "one,two"),
                ("empty", ""),
                ("sp", " x "),
            ]
        );
        assert_eq!(e[4].line, 8);
        assert_eq!(e[5].line, 10);
    }

    /// Each kind of malformed line is a typed syntax error naming its line.
    #[test]
    fn syntax_errors_name_the_line() {
        let cases: &[(&str, usize, SyntaxError)] = &[
            (
                "a=1\nb=\\u12x4\n",
                2,
                SyntaxError::UnicodeEscape { hex: "12x4".into() },
            ),
            (
                "a=\\u12",
                1,
                SyntaxError::UnicodeEscape { hex: "12".into() },
            ),
            (
                "a=\\ud800\n",
                1,
                SyntaxError::Surrogate { hex: "d800".into() },
            ),
            ("# c\n=value\n", 2, SyntaxError::EmptyKey),
        ];
        for (text, line, reason) in cases {
            let err = parse_properties(text).unwrap_err();
            assert_eq!(
                err,
                ConfigError::Syntax {
                    at: ConfigSource::Line(*line),
                    reason: reason.clone()
                },
                "{text:?}"
            );
            assert!(err.to_string().contains(&format!("line {line}")), "{err}");
        }
    }

    proptest! {
        /// Any text either parses or is rejected with an error: the parser never panics.
        #[test]
        fn parser_never_panics(text in "\\PC*") {
            let _ = parse_properties(&text);
        }

        /// Any value escaped and written as `k=value` reads back unchanged.
        #[test]
        fn escape_round_trip(value in "\\PC{0,40}") {
            let text = format!("k={}\n", escape_value(&value));
            let e = parse_properties(&text).unwrap();
            prop_assert_eq!(e.len(), 1);
            prop_assert_eq!(&e[0].value, &value);
        }
    }
}
