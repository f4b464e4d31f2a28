//! Kafka's `ssl.principal.mapping.rules`: how a client certificate's subject distinguished
//! name (RFC 2253, as [`crate::tls::TlsIdentity::subject`]) becomes the name of its
//! principal (`User:<name>`).
//!
//! The value is a list of rules separated by commas, tried in order; the first that applies
//! gives the name, and a certificate no rule applies to is refused at the handshake:
//!
//! - `DEFAULT`: the distinguished name as it is (`User:CN=alice,OU=apps,O=example`);
//! - `RULE:<pattern>/<replacement>/` with an optional `L` or `U` after the last `/`: applies
//!   when the regular expression `<pattern>` matches the *whole* name; every match of it in
//!   the name is then replaced by `<replacement>`, in which `$1`, `$2`, ... (or `${name}`)
//!   insert a group and `\` makes the next character literal (`\$`, `\/`), then the result
//!   is lower-cased (`L`) or upper-cased (`U`). A `/` inside a pattern or a replacement is
//!   written `\/`; commas inside a pattern need no escape
//!   (`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`). A rule whose result is empty does not apply.
//!
//! As Kafka's: whitespace around rules and empty rules (`,,`) are ignored; a `$N` naming a
//! group the pattern does not have is literal text, and of `$12` with fewer than 12 groups
//! `$1` is the group and `2` text. Patterns are Rust's `regex` syntax, which is Java's for
//! what such rules use (classes, groups, alternation, lazy and greedy quantifiers, anchors);
//! Java-only constructs (look-around, back references, possessive quantifiers) are refused
//! when the value is read, not at a handshake. An empty value (no rule at all, which would
//! refuse every certificate) is refused too: `DEFAULT` is the default.

use std::fmt;

use regex::Regex;

/// Why a value of `ssl.principal.mapping.rules` does not parse: the rule and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{rule:?}: {reason}")]
pub struct RuleError {
    pub rule: String,
    pub reason: String,
}

fn refuse(rule: &str, reason: impl Into<String>) -> RuleError {
    RuleError {
        rule: rule.to_owned(),
        reason: reason.into(),
    }
}

/// One piece of a replacement.
#[derive(Clone, Debug)]
enum Piece {
    Text(String),
    Group(usize),
    Named(String),
}

#[derive(Clone, Debug)]
enum Rule {
    Default,
    Replace {
        /// As written (for `Display`).
        source: String,
        /// `<pattern>` as written.
        pattern: Regex,
        /// `<pattern>` anchored at both ends: whether the rule applies.
        whole: Regex,
        replacement: Vec<Piece>,
        case: Case,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A parsed `ssl.principal.mapping.rules` value; [`PrincipalMapping::default`] is `DEFAULT`.
#[derive(Clone, Debug)]
pub struct PrincipalMapping {
    /// The value as given (trimmed), for equality and display.
    text: String,
    rules: Vec<Rule>,
}

impl Default for PrincipalMapping {
    fn default() -> Self {
        PrincipalMapping {
            text: "DEFAULT".to_owned(),
            rules: vec![Rule::Default],
        }
    }
}

impl PartialEq for PrincipalMapping {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for PrincipalMapping {}

impl fmt::Display for PrincipalMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PrincipalMapping {
    /// Parses a value; the error names the rule that does not parse and why.
    pub fn parse(value: &str) -> Result<PrincipalMapping, RuleError> {
        let text = value.trim();
        let mut rules = Vec::new();
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix(',') {
                // An empty rule.
                rest = after;
                continue;
            }
            let (rule, after) = parse_rule(rest)?;
            rules.push(rule);
            let after = after.trim_start();
            match after.strip_prefix(',') {
                Some(next) => rest = next,
                None if after.is_empty() => rest = after,
                None => {
                    let start = rest.len() - after.len();
                    let written = &rest[..start];
                    return Err(refuse(
                        written.trim_end(),
                        format!("unexpected {after:?} after the rule (rules are separated by commas; a rule ends with /, /L or /U)"),
                    ));
                }
            }
        }
        if rules.is_empty() {
            return Err(refuse(
                value,
                "no rule: every client certificate would be refused (DEFAULT keeps the subject's distinguished name)",
            ));
        }
        Ok(PrincipalMapping {
            text: text.to_owned(),
            rules,
        })
    }

    /// Whether this is `DEFAULT` alone (every name kept as it is).
    pub fn is_default(&self) -> bool {
        matches!(self.rules.as_slice(), [Rule::Default])
    }

    /// The principal's name for the distinguished name `dn`, or `None` when no rule applies.
    pub fn name(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|r| r.apply(dn))
    }
}

/// Parses the rule at the start of `s`; returns it and what follows it.
fn parse_rule(s: &str) -> Result<(Rule, &str), RuleError> {
    if let Some(after) = s.strip_prefix("DEFAULT") {
        if after.is_empty() || after.starts_with(',') || after.starts_with(char::is_whitespace) {
            return Ok((Rule::Default, after));
        }
    }
    let shown = || s.split(',').next().unwrap_or(s).trim_end().to_owned();
    let Some(body) = s.strip_prefix("RULE:") else {
        return Err(refuse(
            &shown(),
            "a rule is DEFAULT or RULE:<pattern>/<replacement>/ with an optional L or U",
        ));
    };
    let (pattern, after) = up_to_slash(body).ok_or_else(|| {
        refuse(
            &shown(),
            "no / after the pattern (RULE:<pattern>/<replacement>/; write \\/ for a slash inside)",
        )
    })?;
    let (replacement, after) = up_to_slash(after).ok_or_else(|| {
        refuse(
            &shown(),
            "no / after the replacement (RULE:<pattern>/<replacement>/; write \\/ for a slash inside)",
        )
    })?;
    let (case, after) = match after.as_bytes().first() {
        Some(b'L') => (Case::Lower, &after[1..]),
        Some(b'U') => (Case::Upper, &after[1..]),
        _ => (Case::Keep, after),
    };
    let source = &s[..s.len() - after.len()];
    let pattern_re = Regex::new(pattern).map_err(|e| {
        refuse(
            source,
            format!("the pattern is not a regular expression: {e}"),
        )
    })?;
    let whole = Regex::new(&format!(r"\A(?:{pattern})\z")).map_err(|e| {
        refuse(
            source,
            format!("the pattern is not a regular expression: {e}"),
        )
    })?;
    let replacement = parse_replacement(replacement, &pattern_re).map_err(|r| refuse(source, r))?;
    Ok((
        Rule::Replace {
            source: source.to_owned(),
            pattern: pattern_re,
            whole,
            replacement,
            case,
        },
        after,
    ))
}

/// The text of `s` up to its first `/` not escaped by `\`, and what follows that `/`.
fn up_to_slash(s: &str) -> Option<(&str, &str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'/' => return Some((&s[..i], &s[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

/// A replacement's pieces, with Java's `$N` rules for the groups `re` has.
fn parse_replacement(text: &str, re: &Regex) -> Result<Vec<Piece>, String> {
    let groups = re.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => literal.push(next),
                None => return Err("the replacement ends with a lone \\".into()),
            },
            '$' => match chars.peek().copied() {
                Some('{') => {
                    chars.next();
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(n) if n.is_ascii_alphanumeric() || n == '_' => name.push(n),
                            _ => return Err("${ in the replacement needs a group name and }".into()),
                        }
                    }
                    if re.capture_names().flatten().all(|n| n != name) {
                        return Err(format!("the pattern has no group named {name:?}"));
                    }
                    flush(&mut literal, &mut pieces);
                    pieces.push(Piece::Named(name));
                }
                Some(d) if d.is_ascii_digit() => {
                    let first = d.to_digit(10).unwrap() as usize;
                    if first > groups {
                        // Not a group of the pattern: literal text, as Kafka has it.
                        literal.push('$');
                        continue;
                    }
                    chars.next();
                    let mut group = first;
                    while let Some(more) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = group * 10 + more as usize;
                        if longer > groups {
                            break;
                        }
                        group = longer;
                        chars.next();
                    }
                    flush(&mut literal, &mut pieces);
                    pieces.push(Piece::Group(group));
                }
                _ => {
                    return Err(
                        "a $ in the replacement starts a group ($1, ${name}); write \\$ for a dollar sign".into(),
                    )
                }
            },
            c => literal.push(c),
        }
    }
    flush(&mut literal, &mut pieces);
    Ok(pieces)
}

fn flush(literal: &mut String, pieces: &mut Vec<Piece>) {
    if !literal.is_empty() {
        pieces.push(Piece::Text(std::mem::take(literal)));
    }
}

impl Rule {
    fn apply(&self, dn: &str) -> Option<String> {
        match self {
            Rule::Default => Some(dn.to_owned()),
            Rule::Replace {
                pattern,
                whole,
                replacement,
                case,
                ..
            } => {
                if !whole.is_match(dn) {
                    return None;
                }
                let replaced = pattern.replace_all(dn, |caps: &regex::Captures<'_>| {
                    let mut out = String::new();
                    for piece in replacement {
                        match piece {
                            Piece::Text(t) => out.push_str(t),
                            Piece::Group(g) => {
                                out.push_str(caps.get(*g).map_or("", |m| m.as_str()))
                            }
                            Piece::Named(n) => {
                                out.push_str(caps.name(n).map_or("", |m| m.as_str()))
                            }
                        }
                    }
                    out
                });
                let name = match case {
                    Case::Keep => replaced.into_owned(),
                    Case::Lower => replaced.to_lowercase(),
                    Case::Upper => replaced.to_uppercase(),
                };
                (!name.is_empty()).then_some(name)
            }
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Default => f.write_str("DEFAULT"),
            Rule::Replace { source, .. } => f.write_str(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> PrincipalMapping {
        PrincipalMapping::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn shown(m: &PrincipalMapping) -> Vec<String> {
        m.rules.iter().map(ToString::to_string).collect()
    }

    /// The rules operators write, with commas inside patterns, split where Kafka splits them.
    #[test]
    fn valid_values_split_into_their_rules() {
        for (text, expected) in [
            ("DEFAULT", vec!["DEFAULT"]),
            (
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
                vec!["RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L", "DEFAULT"],
            ),
            (
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
                vec!["RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/"],
            ),
            (
                "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
                vec!["RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/"],
            ),
            (
                "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
                vec!["RULE:([A-Z]*)/$1/U", "RULE:([a-z]+)/$1/", "DEFAULT"],
            ),
            (",,RULE://,,,DEFAULT,,", vec!["RULE://", "DEFAULT"]),
            (
                "RULE:^CN=(.*)\\/x$/a\\/$1/,\nDEFAULT",
                vec!["RULE:^CN=(.*)\\/x$/a\\/$1/", "DEFAULT"],
            ),
        ] {
            assert_eq!(shown(&rules(text)), expected, "{text:?}");
        }
    }

    /// What Kafka refuses, and what corum refuses when it reads the value rather than at a
    /// handshake; each error names the rule.
    #[test]
    fn invalid_values_are_refused_naming_the_rule() {
        for (text, reason) in [
            ("default", "a rule is DEFAULT or RULE:"),
            ("DEFAUL", "a rule is DEFAULT or RULE:"),
            ("DEFAULT/L", "a rule is DEFAULT or RULE:"),
            ("rule:^CN=(.*)$/$1/", "a rule is DEFAULT or RULE:"),
            (
                "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
                "no / after the replacement",
            ),
            ("RULE:^CN=(.*)$", "no / after the pattern"),
            (
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
                "unexpected \"/U\"",
            ),
            (
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/LU",
                "unexpected \"U\"",
            ),
            ("RULE:^CN=(.*)$/$1/ DEFAULT", "unexpected \"DEFAULT\""),
            ("RULE:^CN=(?=a)(.*)$/$1/", "not a regular expression"),
            ("RULE:^CN=(.*)$/a$b/", "write \\$ for a dollar sign"),
            ("RULE:^CN=(.*)$/${who}/", "no group named \"who\""),
            ("RULE:^CN=(.*)$/a\\/", "no / after the replacement"),
            ("", "no rule"),
            (" , ,", "no rule"),
        ] {
            let e = PrincipalMapping::parse(text).expect_err(text);
            assert!(e.to_string().contains(reason), "{text:?}: {e}");
        }
    }

    /// The first rule that applies names the principal; a name no rule applies to has none.
    #[test]
    fn the_first_rule_that_matches_the_whole_name_applies() {
        let m = rules(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, \
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, \
             RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, \
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, \
             DEFAULT",
        );
        assert_eq!(
            m.name("CN=Duke,OU=ServiceUsers,O=Org,C=US").unwrap(),
            "duke"
        );
        assert_eq!(
            m.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US").unwrap(),
            "duke@sme"
        );
        assert_eq!(m.name("cn=duke,ou=sme,dc=mycp,dc=com").unwrap(), "DUKE@SME");
        assert_eq!(
            m.name("cN=duke,OU=JavaSoft,O=Sun Microsystems").unwrap(),
            "DUKE"
        );
        assert_eq!(
            m.name("OU=JavaSoft,O=Sun Microsystems,C=US").unwrap(),
            "OU=JavaSoft,O=Sun Microsystems,C=US"
        );
        // No DEFAULT: a name no rule matches whole has no principal.
        let strict = rules("RULE:^CN=([^,]+),O=corum$/$1/");
        assert_eq!(strict.name("CN=alice,O=corum").unwrap(), "alice");
        assert_eq!(strict.name("CN=alice,O=corum,C=US"), None);
        assert_eq!(strict.name("X,CN=alice,O=corum"), None);
        assert!(rules("DEFAULT").is_default());
        assert!(!strict.is_default());
    }

    /// An escaped comma in a common name (RFC 2253's `\,`) stays in the group.
    #[test]
    fn escaped_commas_in_the_name_are_kept() {
        let m = rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT");
        assert_eq!(
            m.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz").unwrap(),
            "Tkac\\, Adam"
        );
    }

    /// Java's replacement rules: `$N` beyond the pattern's groups is text, `$12` with fewer
    /// than 12 groups is `$1` and `2`, `\` quotes, `${name}` names a group; an empty result
    /// lets the next rule try.
    #[test]
    fn replacements_follow_javas_rules() {
        let m = rules("RULE:^CN=(\\w+),O=(\\w+)$/$2:$1 $3 $12 \\$ \\\\ \\//");
        assert_eq!(
            m.name("CN=alice,O=corum").unwrap(),
            "corum:alice $3 alice2 $ \\ /"
        );
        let named = rules("RULE:^CN=(?P<user>\\w+),O=(\\w+)$/${user}@$2/");
        assert_eq!(named.name("CN=bob,O=corum").unwrap(), "bob@corum");
        let empty_then_default = rules("RULE:^CN=(\\w*),O=corum$/$1/,DEFAULT");
        assert_eq!(
            empty_then_default.name("CN=,O=corum").unwrap(),
            "CN=,O=corum"
        );
        assert_eq!(empty_then_default.name("CN=x,O=corum").unwrap(), "x");
        let none = rules("RULE:^CN=([a-z]+)$/$1/");
        assert_eq!(none.name("CN=alice"), Some("alice".into()));
        assert_eq!(none.name("CN=Alice"), None);
    }

    proptest::proptest! {
        /// Any text parses or is refused with a reason, and a parsed mapping names any
        /// distinguished name without panicking.
        #[test]
        fn any_value_parses_or_is_refused(
            text in "[ ,DEFAULTRULE:/\\\\$L{}()a-z0-9.*?^\\[\\]|+]{0,40}",
            dn in ".{0,40}",
        ) {
            for value in [text.clone(), format!("RULE:{text}"), format!("DEFAULT,RULE:{text}")] {
                match PrincipalMapping::parse(&value) {
                    Ok(m) => {
                        let _ = m.name(&dn);
                    }
                    Err(e) => proptest::prop_assert!(!e.reason.is_empty()),
                }
            }
        }
    }
}
