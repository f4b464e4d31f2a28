//! The checked-in metadata record code is exactly what `kafka/metadata/generate.py` makes of
//! the specs in Kafka's jars: the test runs the generator into a temporary directory and
//! compares. It fails when someone edited the generated files by hand, changed the generator
//! without regenerating, or the jars (compat/pom.xml) changed under the code. It needs
//! `python3`, `rustfmt` and the jars of `compat/install.sh`, and fails (never skips) without
//! them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate is in the repository")
        .to_path_buf()
}

/// A directory that is removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path.strip_prefix(dir).expect("under dir").to_path_buf());
            }
        }
    }
    files.sort();
    files
}

/// The first line where two texts differ, for the failure message.
fn first_difference(want: &str, got: &str) -> String {
    let (mut want_lines, mut got_lines) = (want.lines(), got.lines());
    for number in 1.. {
        match (want_lines.next(), got_lines.next()) {
            (None, None) => break,
            (w, g) if w != g => {
                return format!(
                    "line {number}:\n  generated:  {}\n  checked in: {}",
                    w.unwrap_or("(end of file)"),
                    g.unwrap_or("(end of file)")
                );
            }
            _ => {}
        }
    }
    "only in line endings".to_owned()
}

#[test]
fn generated_code_is_current() {
    let repo = repo();
    let out = TempDir(
        std::env::temp_dir().join(format!("corum-metadata-generate-{}", std::process::id())),
    );
    let script = repo.join("kafka/metadata/generate.py");
    let run = Command::new("python3")
        .arg(&script)
        .arg("--out")
        .arg(&out.0)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run python3 ({e}): the metadata record generator needs Python 3.11 on \
                 the PATH"
            )
        });
    assert!(
        run.status.success(),
        "{} failed ({}): {}\n(Kafka's jars come from compat/install.sh; rustfmt from rustup)",
        script.display(),
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let written = files_under(&out.0);
    assert!(
        written.len() >= 3,
        "the generator wrote only {written:?} (expected generated.rs, arbitrary.rs, json.rs)"
    );
    let mut stale = Vec::new();
    for rel in &written {
        let want = std::fs::read_to_string(out.0.join(rel)).expect("a file the generator wrote");
        let got = std::fs::read_to_string(repo.join(rel)).unwrap_or_default();
        if want != got {
            stale.push(format!(
                "{}: {}",
                rel.display(),
                first_difference(&want, &got)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "the checked-in generated code differs from what kafka/metadata/generate.py makes of \
         the specs in compat/jars; run `python3 kafka/metadata/generate.py` and review the \
         diff:\n{}",
        stale.join("\n")
    );
}
