//! The node's modules form no cycle: no module imports one that imports it back, directly or
//! through others (the drivers sit above the pure cores and the port, never beside each other).
//! Read from the source: every `crate::<module>` a module's non-test code names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level module a source file belongs to (`driver/mod.rs` → `driver`).
fn module_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .expect("a file below src")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The crate's modules named as `crate::<name>` in `code`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines() {
        // Comments name modules without importing them.
        let mut rest = line.split("//").next().unwrap_or("");
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `corum_crate::`, not this crate
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let module = module_of(path.strip_prefix(&src).expect("below src"));
            if module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            // Test modules may reach anywhere; the rule is about the code that ships.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let deps = graph.entry(module.clone()).or_default();
            deps.extend(named_modules(code).into_iter().filter(|m| *m != module));
        }
    }
    graph
}

/// A cycle in `graph`, if there is one (depth-first), as the modules along it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|m| m == at) {
            let mut c = path[i..].to_vec();
            c.push(at.to_owned());
            return Some(c);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at.to_owned());
        for next in graph.get(at).into_iter().flatten() {
            if let Some(c) = visit(graph, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(at.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn the_node_modules_form_no_cycle() {
    let g = graph();
    assert!(g.contains_key("driver") && g.contains_key("service") && g.contains_key("port"));
    assert!(g["driver"].contains("port") && g["service"].contains("port"));
    assert_eq!(cycle(&g), None, "module graph: {g:#?}");
}

#[test]
fn a_cycle_is_found() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        named_modules("use crate::port::X;\nlet y = corum_crate::z; // crate::no\n"),
        ["port".to_owned()].into()
    );
}
