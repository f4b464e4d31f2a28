//! `corum bench floor`: three voter processes and a client, on glommio and on blocking threads.

use std::time::Duration;

use crate::common::corum;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A short run of each runtime makes measured writes through three voter processes, charges
/// them CPU, orders its percentiles, gives the ratio and leaves no file behind.
#[test]
fn both_runtimes_make_measured_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = corum(
        &["bench", "floor", "--dir", d, "--seconds", "0.3", "--json"],
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["runtime"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["glommio", "std"], "{v}");
    for r in runs {
        assert!(r["writes"].as_u64().unwrap() > 10, "{r}");
        let (p50, p99) = (r["p50_us"].as_u64().unwrap(), r["p99_us"].as_u64().unwrap());
        assert!(p50 >= 1 && p50 <= p99, "{r}");
        for cpu in ["leader_cpu_us_per_write", "follower_cpu_us_per_write"] {
            assert!(r[cpu].as_f64().unwrap() > 0.0, "{cpu}: {r}");
        }
        let sum = r["voters_cpu_us_per_write"].as_f64().unwrap();
        let parts = r["leader_cpu_us_per_write"].as_f64().unwrap()
            + 2.0 * r["follower_cpu_us_per_write"].as_f64().unwrap();
        assert!((sum - parts).abs() < 1e-6 * sum.max(1.0), "{r}");
    }
    assert!(v["glommio_over_std_cpu"].as_f64().unwrap() > 0.0, "{v}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A voter whose followers do not answer exits with the reason instead of waiting, and its
/// file is gone; a `--dir` that is not a directory is refused before anything starts.
#[test]
fn a_voter_without_followers_fails_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // Bound and dropped: nothing listens there.
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let followers = format!("{gone},{gone}");
    for runtime in ["std", "glommio"] {
        let o = corum(
            &[
                "bench",
                "floor",
                "--dir",
                d,
                "--runtime",
                runtime,
                "--role",
                "leader",
                "--followers",
                &followers,
            ],
            Duration::from_secs(60),
        );
        assert!(!o.status.success(), "{runtime}");
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!("connecting to {gone}")),
            "{runtime}: {err}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{runtime}: {left:?}");
    }
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let o = corum(
        &[
            "bench",
            "floor",
            "--dir",
            file.to_str().unwrap(),
            "--seconds",
            "0.3",
        ],
        Duration::from_secs(60),
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("is not a directory"),
        "{}",
        text(&o.stderr)
    );
}
