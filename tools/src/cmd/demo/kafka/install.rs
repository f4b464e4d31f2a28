//! Where `corum demo --kafka` finds Java and Apache Kafka's jars, and what it says when either
//! is missing.
//!
//! | what | where, in order |
//! |------|-----------------|
//! | Java | `$JAVA_HOME/bin/java` when `JAVA_HOME` is set, else `java` on the `PATH`; `java -version` must say 17 or newer (Kafka 4's brokers need it) |
//! | jars | `--kafka-jars DIR`, else `$CORUM_KAFKA_JARS`, else `compat/jars` under the current directory, else `compat/jars` under each directory above the executable (a checkout's `target/debug/corum` finds the checkout's) |
//!
//! A directory of jars is Kafka's when it holds `kafka_2.13-VERSION.jar` (the broker) and
//! `kafka-tools-*.jar` (the producer and consumer tools the demo runs): what
//! `compat/install.sh` copies from Maven Central, and what the `libs/` directory of Apache's
//! release tarball holds. A directory named by the flag or the variable is the only one
//! tried: a mistyped path fails rather than falling back to another install.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::cmd::demo::cluster::spawn_guarded;

/// The Kafka release corum's broker suite runs, and so the one the how-to names.
pub const KAFKA_VERSION_TESTED: &str = "4.1.2";
/// The environment variable naming the jars directory when `--kafka-jars` is not given.
pub const JARS_ENV: &str = "CORUM_KAFKA_JARS";
/// Kafka 4's brokers and tools need Java 17.
pub const JAVA_MAJOR_MIN: u32 = 17;
/// `java -version` answers in well under a second; a hung JVM must not hang the demo.
const JAVA_VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// A Java runtime and a directory of Kafka's jars, both checked.
#[derive(Clone, Debug)]
pub struct KafkaInstall {
    pub java: PathBuf,
    /// As `java -version` prints it (`17.0.15`).
    pub java_version: String,
    pub jars: PathBuf,
    /// From the broker jar's name (`4.1.2`).
    pub kafka_version: String,
}

impl KafkaInstall {
    /// Finds Java and the jars (see the module doc), or fails with one message that says
    /// what is missing and exactly how to get it.
    pub fn find(jars_flag: Option<&Path>) -> anyhow::Result<KafkaInstall> {
        let java = find_java(std::env::var_os("JAVA_HOME"), std::env::var_os("PATH"))
            .and_then(|java| java_version(&java).map(|v| (java, v)));
        let exe = std::env::current_exe().ok();
        let cwd = std::env::current_dir().ok();
        let env = std::env::var_os(JARS_ENV).filter(|v| !v.is_empty());
        let candidates = jar_candidates(jars_flag, env.as_deref(), cwd.as_deref(), exe.as_deref());
        let jars = find_jars(&candidates);
        match (java, jars) {
            (Ok((java, java_version)), Ok((jars, kafka_version))) => Ok(KafkaInstall {
                java,
                java_version,
                jars,
                kafka_version,
            }),
            (java, jars) => {
                let mut problems = Vec::new();
                if let Err(e) = java {
                    problems.push(java_howto(&e));
                }
                if let Err(tried) = jars {
                    problems.push(jars_howto(&tried));
                }
                anyhow::bail!(
                    "corum demo --kafka runs Apache Kafka's own brokers, which need Java and \
                     Kafka's jars:\n{}",
                    problems.join("\n")
                )
            }
        }
    }

    /// The `-cp` value that loads every jar of the directory.
    pub fn classpath(&self) -> OsString {
        let mut cp = self.jars.clone().into_os_string();
        cp.push("/*");
        cp
    }
}

/// Where to look for the jars, in order, and whether the place was named by the user (then
/// it is the only one).
fn jar_candidates(
    flag: Option<&Path>,
    env: Option<&std::ffi::OsStr>,
    cwd: Option<&Path>,
    exe: Option<&Path>,
) -> Vec<(PathBuf, &'static str)> {
    if let Some(dir) = flag {
        return vec![(dir.to_path_buf(), "--kafka-jars")];
    }
    if let Some(dir) = env {
        return vec![(PathBuf::from(dir), JARS_ENV)];
    }
    let mut out: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(cwd) = cwd {
        out.push((cwd.join("compat/jars"), "the current directory"));
    }
    if let Some(exe) = exe {
        let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
        for dir in exe.ancestors().skip(1) {
            let candidate = dir.join("compat/jars");
            if !out.iter().any(|(p, _)| *p == candidate) {
                out.push((candidate, "above the corum executable"));
            }
        }
    }
    out
}

/// The first candidate that holds Kafka's jars, with the Kafka version; else every place
/// tried and why it was refused.
fn find_jars(
    candidates: &[(PathBuf, &'static str)],
) -> Result<(PathBuf, String), Vec<(PathBuf, String)>> {
    let mut tried = Vec::new();
    for (dir, why) in candidates {
        match kafka_jars_in(dir) {
            // Absolute, so that what the demo prints and the JVMs load say the same.
            Ok(version) => return Ok((std::fs::canonicalize(dir).unwrap_or(dir.clone()), version)),
            Err(reason) => tried.push((dir.clone(), format!("{reason} ({why})"))),
        }
    }
    Err(tried)
}

/// The Kafka version of the jars in `dir`, or why `dir` is not a directory of Kafka's jars.
pub fn kafka_jars_in(dir: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read it: {e}"))?;
    let mut version = None;
    let mut tools = false;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(v) = name
            .strip_prefix("kafka_2.13-")
            .and_then(|rest| rest.strip_suffix(".jar"))
        {
            // Not the -sources or -test jars of a Maven download.
            if v.chars().all(|c| c.is_ascii_digit() || c == '.') {
                version = Some(v.to_owned());
            }
        }
        tools |= name.starts_with("kafka-tools-") && name.ends_with(".jar");
    }
    match (version, tools) {
        (Some(v), true) => Ok(v),
        (None, _) => Err("no kafka_2.13-VERSION.jar in it".into()),
        (Some(_), false) => Err("no kafka-tools-VERSION.jar in it".into()),
    }
}

/// How to get the jars, after where they were looked for.
pub fn jars_howto(tried: &[(PathBuf, String)]) -> String {
    let mut out = String::from("  - no Kafka jars found; looked in:\n");
    for (dir, why) in tried {
        out.push_str(&format!("      {}: {why}\n", dir.display()));
    }
    let v = KAFKA_VERSION_TESTED;
    out.push_str(&format!(
        "    get Kafka {v}'s jars (the version corum is tested with) one of these ways:\n\
         \x20     * in a corum checkout: compat/install.sh (it puts them in compat/jars, found when corum\n\
         \x20       runs in the checkout or was built there, else pass --kafka-jars CHECKOUT/compat/jars;\n\
         \x20       it also installs the compatibility suite's other clients and needs a JDK and Maven),\n\
         \x20       or only the jars: (cd compat && mvn -B -q dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=jars)\n\
         \x20     * Apache's release: curl -fLO https://archive.apache.org/dist/kafka/{v}/kafka_2.13-{v}.tgz && tar xzf kafka_2.13-{v}.tgz\n\
         \x20       then: corum demo --kafka --kafka-jars kafka_2.13-{v}/libs   (or {JARS_ENV}=kafka_2.13-{v}/libs)"
    ));
    out
}

/// How to get Java, after what was wrong.
fn java_howto(problem: &str) -> String {
    format!(
        "  - {problem}\n    install a Java runtime {JAVA_MAJOR_MIN} or newer (Debian/Ubuntu: apt-get install \
         openjdk-17-jre-headless) and put `java` on the PATH, or set JAVA_HOME"
    )
}

/// `$JAVA_HOME/bin/java` if `JAVA_HOME` is set, else the first `java` on `path`.
fn find_java(java_home: Option<OsString>, path: Option<OsString>) -> Result<PathBuf, String> {
    if let Some(home) = java_home.filter(|h| !h.is_empty()) {
        let java = PathBuf::from(&home).join("bin/java");
        return if is_executable(&java) {
            Ok(java)
        } else {
            Err(format!(
                "JAVA_HOME is {} but {} is not an executable",
                Path::new(&home).display(),
                java.display()
            ))
        };
    }
    let path = path.unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("java"))
        .find(|java| is_executable(java))
        .ok_or_else(|| "no `java` on the PATH, and JAVA_HOME is not set".to_owned())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `java -version` (bounded) and checks the major version.
fn java_version(java: &Path) -> Result<String, String> {
    let run = || -> anyhow::Result<(bool, String)> {
        let dir = std::env::temp_dir();
        let out = dir.join(format!("corum-demo-java-version-{}", std::process::id()));
        let file = std::fs::File::create(&out).context("creating a temporary file")?;
        let mut child = spawn_guarded(
            Command::new(java)
                .arg("-version")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(file)),
        )
        .context("running it")?;
        let status = child.wait_timeout(JAVA_VERSION_TIMEOUT)?;
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        let status = status.with_context(|| {
            format!("`java -version` did not answer within {JAVA_VERSION_TIMEOUT:?}")
        })?;
        Ok((status.success(), text))
    };
    let (ok, text) = run().map_err(|e| format!("{}: {e:#}", java.display()))?;
    let first = text.lines().next().unwrap_or("").trim().to_owned();
    if !ok {
        return Err(format!("{} -version failed: {first}", java.display()));
    }
    match parse_java_version(&text) {
        Some((major, version)) if major >= JAVA_MAJOR_MIN => Ok(version),
        Some((_, version)) => Err(format!(
            "{} is Java {version}; Kafka's brokers need {JAVA_MAJOR_MIN} or newer",
            java.display()
        )),
        None => Err(format!(
            "{} -version printed no version: {first}",
            java.display()
        )),
    }
}

/// The major version and the version string of `java -version`'s output: the first quoted
/// string of its first line (`openjdk version "17.0.15" 2025-04-15`; `1.8.0_402` is 8).
pub fn parse_java_version(text: &str) -> Option<(u32, String)> {
    let line = text.lines().find(|l| l.contains(" version \""))?;
    let (_, rest) = line.split_once('"')?;
    let (version, _) = rest.split_once('"')?;
    let mut parts = version.split(['.', '_', '-', '+']);
    let first: u32 = parts.next()?.parse().ok()?;
    let major = if first == 1 {
        parts.next()?.parse().ok()?
    } else {
        first
    };
    Some((major, version.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java's version lines parse to their major version, old and new numbering alike.
    #[test]
    fn java_versions() {
        assert_eq!(
            parse_java_version("openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime"),
            Some((17, "17.0.15".into()))
        );
        assert_eq!(
            parse_java_version("java version \"1.8.0_402\"\n"),
            Some((8, "1.8.0_402".into()))
        );
        assert_eq!(
            parse_java_version("openjdk version \"21\" 2023-09-19"),
            Some((21, "21".into()))
        );
        assert_eq!(
            parse_java_version("Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version \"22-ea\""),
            Some((22, "22-ea".into()))
        );
        assert_eq!(parse_java_version("bash: java: not found"), None);
    }

    /// A directory holds Kafka's jars only with the broker jar and the tools jar; the
    /// version comes from the broker jar's name.
    #[test]
    fn jar_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        assert!(kafka_jars_in(&d.join("missing"))
            .unwrap_err()
            .contains("cannot read"));
        assert!(kafka_jars_in(d).unwrap_err().contains("kafka_2.13"));
        std::fs::write(d.join("kafka_2.13-4.1.2.jar"), "").unwrap();
        std::fs::write(d.join("kafka_2.13-4.1.2-sources.jar"), "").unwrap();
        assert!(kafka_jars_in(d).unwrap_err().contains("kafka-tools"));
        std::fs::write(d.join("kafka-tools-4.1.2.jar"), "").unwrap();
        assert_eq!(kafka_jars_in(d).unwrap(), "4.1.2");
    }

    /// A directory named by the flag or the variable is the only one tried; otherwise the
    /// current directory's `compat/jars` comes first, then those above the executable.
    #[test]
    fn where_jars_are_looked_for() {
        let flag = Path::new("/opt/kafka/libs");
        let env = std::ffi::OsStr::new("/env/libs");
        let cwd = Path::new("/home/u");
        let exe = Path::new("/repo/target/debug/corum");
        let dirs = |c: Vec<(PathBuf, &str)>| c.into_iter().map(|(p, _)| p).collect::<Vec<_>>();
        assert_eq!(
            dirs(jar_candidates(Some(flag), Some(env), Some(cwd), Some(exe))),
            [PathBuf::from("/opt/kafka/libs")]
        );
        assert_eq!(
            dirs(jar_candidates(None, Some(env), Some(cwd), Some(exe))),
            [PathBuf::from("/env/libs")]
        );
        let all = dirs(jar_candidates(None, None, Some(cwd), Some(exe)));
        assert_eq!(all[0], PathBuf::from("/home/u/compat/jars"));
        assert!(all.contains(&PathBuf::from("/repo/compat/jars")), "{all:?}");
        assert!(
            all.contains(&PathBuf::from("/repo/target/compat/jars")),
            "{all:?}"
        );
    }

    /// The how-to names every place tried and the three ways to get the jars.
    #[test]
    fn howto_says_how() {
        let text = jars_howto(&[(PathBuf::from("/x/compat/jars"), "cannot read it".into())]);
        for needle in [
            "/x/compat/jars: cannot read it",
            "compat/install.sh",
            "dependency:copy-dependencies",
            "https://archive.apache.org/dist/kafka/4.1.2/kafka_2.13-4.1.2.tgz",
            "--kafka-jars kafka_2.13-4.1.2/libs",
            "CORUM_KAFKA_JARS",
        ] {
            assert!(text.contains(needle), "{needle:?} missing:\n{text}");
        }
    }

    /// JAVA_HOME wins over the PATH, and a JAVA_HOME without bin/java is an error naming it.
    #[test]
    fn java_lookup() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("jdk");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let e = find_java(Some(home.clone().into_os_string()), None).unwrap_err();
        assert!(e.contains("JAVA_HOME"), "{e}");
        let java = home.join("bin/java");
        std::fs::write(&java, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&java, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            find_java(Some(home.into_os_string()), Some("/nonexistent".into())).unwrap(),
            java
        );
        let e = find_java(None, Some("/nonexistent".into())).unwrap_err();
        assert!(e.contains("PATH"), "{e}");
        assert_eq!(
            find_java(None, Some(tmp.path().join("jdk/bin").into_os_string())).unwrap(),
            java
        );
    }
}
