//! Kafka's JAAS configuration text, as `listener.name.<l>.<mechanism>.sasl.jaas.config` holds
//! it: one login module entry, its control flag, options, and a closing `;`:
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required
//!     username="admin" password="admin-secret" user_alice="alice-secret";
//! ```
//!
//! Parsed strictly: the module name is a dotted Java class name, the flag one of `required`,
//! `requisite`, `sufficient`, `optional` (any case), each option `key="value"` with a quoted
//! value (`\"` and `\\` escape inside it), no option twice, exactly one entry, and nothing but
//! white space after the `;`. Anything else is refused with the position and what was
//! expected. Kafka's own parser (Java's `StreamTokenizer`) also takes unquoted values and
//! comments; corum does not, so a typo cannot pass silently.

use std::collections::BTreeMap;

/// Kafka's PLAIN login module.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// Kafka's SCRAM login module.
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// One parsed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    /// Lower case.
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

/// Why a JAAS text does not parse: at byte `at`, what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("JAAS configuration at byte {at}: {reason}")]
pub struct JaasError {
    pub at: usize,
    pub reason: String,
}

struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl Cursor<'_> {
    fn skip_space(&mut self) {
        while let Some(c) = self.text[self.at..].chars().next() {
            if !c.is_whitespace() {
                break;
            }
            self.at += c.len_utf8();
        }
    }

    fn fail<T>(&self, reason: impl Into<String>) -> Result<T, JaasError> {
        Err(JaasError {
            at: self.at,
            reason: reason.into(),
        })
    }

    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    /// A word of letters, digits, `_`, `-`, `.` and `$`.
    fn word(&mut self) -> &str {
        let start = self.at;
        while let Some(c) = self.peek() {
            if !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '$')) {
                break;
            }
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    fn quoted(&mut self) -> Result<String, JaasError> {
        if self.peek() != Some('"') {
            return self.fail("expected a quoted value (\"...\")");
        }
        self.at += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return self.fail("the quoted value is not closed");
            };
            self.at += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => match self.peek() {
                    Some(e @ ('"' | '\\')) => {
                        self.at += 1;
                        out.push(e);
                    }
                    _ => return self.fail("only \\\" and \\\\ escape inside a quoted value"),
                },
                '\n' | '\r' => return self.fail("a quoted value ends on its line"),
                c => out.push(c),
            }
        }
    }
}

/// Parses one JAAS entry (see the module doc).
pub fn parse(text: &str) -> Result<JaasEntry, JaasError> {
    let mut c = Cursor { text, at: 0 };
    c.skip_space();
    let module = c.word().to_owned();
    let is_class = !module.is_empty()
        && module.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == '$')
                && !part.contains('-')
        });
    if !is_class {
        return c.fail("expected a login module class name (org.apache.kafka.common.security.plain.PlainLoginModule)");
    }
    c.skip_space();
    let flag_at = c.at;
    let flag = c.word().to_ascii_lowercase();
    if !matches!(
        flag.as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        c.at = flag_at;
        return c.fail("expected the control flag: required, requisite, sufficient or optional");
    }
    let mut options = BTreeMap::new();
    loop {
        let before = c.at;
        c.skip_space();
        match c.peek() {
            Some(';') => {
                c.at += 1;
                break;
            }
            None => return c.fail("expected `;` at the end of the entry"),
            _ => {}
        }
        if c.at == before {
            return c.fail("expected white space before an option");
        }
        let key_at = c.at;
        let key = c.word().to_owned();
        if key.is_empty() {
            return c.fail("expected an option name or `;`");
        }
        if c.peek() != Some('=') {
            return c.fail(format!("expected `=` after option {key}"));
        }
        c.at += 1;
        let value = c.quoted()?;
        if options.insert(key.clone(), value).is_some() {
            c.at = key_at;
            return c.fail(format!("option {key} is given twice"));
        }
    }
    c.skip_space();
    if c.at != text.len() {
        return c.fail("expected nothing after `;` (one login module entry)");
    }
    Ok(JaasEntry {
        login_module: module,
        flag,
        options,
    })
}

/// The users of a PLAIN login module entry (`user_<name>="<password>"`), for a listener's
/// PLAIN mechanism. Also allowed: `username` and `password` (what Kafka's brokers use as
/// clients of each other; corum reads them not). Refused: another login module, any other
/// option (a misspelt `users_alice` would otherwise be ignored), an empty user name, and an
/// entry without users.
pub fn plain_users(text: &str) -> Result<BTreeMap<String, String>, JaasError> {
    let entry = parse(text)?;
    let refuse = |reason: String| Err(JaasError { at: 0, reason });
    if entry.login_module != PLAIN_LOGIN_MODULE {
        return refuse(format!(
            "PLAIN needs login module {PLAIN_LOGIN_MODULE}, not {}",
            entry.login_module
        ));
    }
    let mut users = BTreeMap::new();
    for (key, value) in entry.options {
        match key.strip_prefix("user_") {
            Some("") => return refuse("option user_ names no user".into()),
            Some(name) => {
                users.insert(name.to_owned(), value);
            }
            None if key == "username" || key == "password" => {}
            None => {
                return refuse(format!(
                    "unknown option {key} (expected user_<name>, username or password)"
                ))
            }
        }
    }
    if users.is_empty() {
        return refuse("the PLAIN login module names no user (user_<name>=\"<password>\")".into());
    }
    Ok(users)
}

/// Checks a SCRAM mechanism's login module entry: Kafka's SCRAM module, and only the options
/// `username` and `password` (the credentials themselves are in the metadata log).
pub fn check_scram(text: &str) -> Result<(), JaasError> {
    let entry = parse(text)?;
    let refuse = |reason: String| Err(JaasError { at: 0, reason });
    if entry.login_module != SCRAM_LOGIN_MODULE {
        return refuse(format!(
            "SCRAM needs login module {SCRAM_LOGIN_MODULE}, not {}",
            entry.login_module
        ));
    }
    if let Some(key) = entry
        .options
        .keys()
        .find(|k| *k != "username" && *k != "password")
    {
        return refuse(format!(
            "unknown option {key} (SCRAM credentials are kept in the metadata log: corum users)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Kafka's documented example parses into its users; username/password are allowed.
    #[test]
    fn kafkas_example() {
        let users = plain_users(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" \
             user_alice=\"alice-secret\";",
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "alice-secret");
        let e = parse("  x.Y REQUIRED a=\"q\\\"uote\\\\\" ;  \n").unwrap();
        assert_eq!(e.flag, "required");
        assert_eq!(e.options["a"], "q\"uote\\");
        check_scram("org.apache.kafka.common.security.scram.ScramLoginModule required;").unwrap();
    }

    /// Each kind of bad text is refused with a reason.
    #[test]
    fn bad_text_is_refused() {
        let m = PLAIN_LOGIN_MODULE;
        for (text, reason) in [
            (String::new(), "class name"),
            (m.to_owned(), "control flag"),
            (format!("{m} always user_a=\"x\";"), "control flag"),
            (format!("{m} required user_a=\"x\""), "`;`"),
            (format!("{m} required user_a=x;"), "quoted"),
            (format!("{m} required user_a=\"x;"), "not closed"),
            (
                format!("{m} required user_a=\"x\"user_b=\"y\";"),
                "white space",
            ),
            (format!("{m} required user_a=\"x\" user_a=\"y\";"), "twice"),
            (
                format!("{m} required user_a=\"x\"; {m} required;"),
                "nothing after",
            ),
            (format!("{m} required user_a = \"x\";"), "`=`"),
            (format!("{m} required user_a=\"\\n\";"), "escape"),
            (format!("{m} required users_a=\"x\";"), "unknown option"),
            (format!("{m} required user_=\"x\";"), "no user"),
            (format!("{m} required;"), "names no user"),
            (
                "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=\"x\";"
                    .to_owned(),
                "needs login module",
            ),
        ] {
            let e = plain_users(&text).unwrap_err().to_string();
            assert!(e.contains(reason), "{text:?}: {e}");
        }
        assert!(check_scram(&format!("{m} required;")).is_err());
        assert!(check_scram(
            "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=\"x\";"
        )
        .is_err());
    }

    proptest! {
        /// Any text: no panic, and what parses re-renders to an entry that parses the same.
        #[test]
        fn never_panics(text in "\\PC{0,80}") {
            let _ = plain_users(&text);
            if let Ok(e) = parse(&text) {
                let rendered = format!(
                    "{} {} {};",
                    e.login_module,
                    e.flag,
                    e.options
                        .iter()
                        .map(|(k, v)| format!(
                            "{k}=\"{}\"",
                            v.replace('\\', "\\\\").replace('"', "\\\"")
                        ))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                prop_assert_eq!(parse(&rendered).unwrap(), e);
            }
        }

        /// Texts made of the grammar's own pieces in random order: no panic; the well-formed
        /// ones parse.
        #[test]
        fn pieces(parts in proptest::collection::vec(
            prop_oneof![
                Just(PLAIN_LOGIN_MODULE.to_owned()),
                Just(" ".to_owned()),
                Just("required".to_owned()),
                Just("user_a=\"s\"".to_owned()),
                Just("=".to_owned()),
                Just("\"".to_owned()),
                Just(";".to_owned()),
                Just("\\".to_owned()),
            ],
            0..10,
        )) {
            let text = parts.concat();
            let _ = parse(&text);
            let _ = plain_users(&text);
        }
    }
}
