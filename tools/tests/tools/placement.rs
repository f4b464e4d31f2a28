//! `corum placement` through the binary: flags resolve to shards, bad flags are clear errors
//! before anything starts, and `--start` really starts one executor per shard.

use std::process::Command;

fn corum(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_corum"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run corum")
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Core 0 alone makes one combined shard; asking for it unpinned and started runs it.
#[test]
fn one_core_is_combined_and_starts() {
    let o = corum(&["placement", "--cores", "0", "--no-pin", "--start"]);
    assert!(o.status.success(), "stderr: {}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("combined"), "{out}");
    assert!(out.contains("shard0 started"), "{out}");
}

/// A core that is not online, a controller core outside the set and an empty list are refused
/// with a message naming the problem, and no shard starts.
#[test]
fn bad_flags_are_refused_before_start() {
    let o = corum(&["placement", "--cores", "4000", "--start"]);
    assert!(!o.status.success());
    assert!(!stdout(&o).contains("started"));
    assert!(stderr(&o).contains("4000"), "{}", stderr(&o));

    let o = corum(&["placement", "--cores", "0", "--controller-core", "1"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).to_lowercase().contains("controller"),
        "{}",
        stderr(&o)
    );

    let o = corum(&["placement", "--cores", ""]);
    assert!(!o.status.success());
}
