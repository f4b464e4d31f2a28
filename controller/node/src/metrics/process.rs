//! The standard `process_*` metrics of the node's own process, read from `/proc` at each
//! scrape (what Prometheus client libraries export under these names, so dashboards and
//! `corum loadgen --metrics` read them as they read any process's):
//!
//! | metric                           | type    | from                                              |
//! |----------------------------------|---------|---------------------------------------------------|
//! | `process_cpu_seconds_total`      | counter | `/proc/self/stat` utime + stime (clock ticks)     |
//! | `process_start_time_seconds`     | gauge   | `/proc/self/stat` starttime + `/proc/stat` btime  |
//! | `process_resident_memory_bytes`  | gauge   | `/proc/self/status` `VmRSS`                       |
//! | `process_virtual_memory_bytes`   | gauge   | `/proc/self/stat` vsize                           |
//! | `process_threads`                | gauge   | `/proc/self/stat` num_threads                     |
//! | `process_open_fds`               | gauge   | entries of `/proc/self/fd`                        |
//!
//! `/proc` reports CPU and start times in `USER_HZ` ticks, which the kernel fixes at 100 per
//! second for user space on every architecture corum runs on (x86-64, aarch64), whatever the
//! kernel's own tick rate: [`USER_HZ`].
//!
//! The parsers are pure (text in, numbers or a [`ProcError`] out) and tested on fixed texts;
//! [`ProcessStats::read`] is the only part that reads files.

use std::path::Path;

use super::family;

/// Clock ticks per second of the times in `/proc/<pid>/stat` (the kernel's `USER_HZ`).
pub const USER_HZ: f64 = 100.0;

/// Why a `/proc` file could not be read or understood.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("reading {path}: {source}")]
    Io {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Format { path: &'static str, reason: String },
}

/// The figures of one scrape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time, all threads, since the process started.
    pub cpu_seconds: f64,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub threads: u64,
    pub open_fds: u64,
}

/// The fields used from `/proc/<pid>/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFields {
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub threads: u64,
    /// Ticks after boot.
    pub start_ticks: u64,
    pub vsize_bytes: u64,
}

const STAT: &str = "/proc/self/stat";
const STATUS: &str = "/proc/self/status";
const SYSTEM_STAT: &str = "/proc/stat";
const FDS: &str = "/proc/self/fd";

/// Parses one `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may
/// hold spaces and parentheses itself, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<StatFields, ProcError> {
    let bad = |reason: String| ProcError::Format { path: STAT, reason };
    let close = text
        .rfind(')')
        .ok_or_else(|| bad("no ')' closing the command name".into()))?;
    // After the command name: field 3 (state) is index 0, field N is index N - 3.
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize, name: &str| -> Result<u64, ProcError> {
        let raw = fields.get(n - 3).ok_or_else(|| {
            bad(format!(
                "{} fields, no field {n} ({name})",
                fields.len() + 2
            ))
        })?;
        raw.parse()
            .map_err(|_| bad(format!("field {n} ({name}) is {raw:?}, not a count")))
    };
    Ok(StatFields {
        utime_ticks: field(14, "utime")?,
        stime_ticks: field(15, "stime")?,
        threads: field(20, "num_threads")?,
        start_ticks: field(22, "starttime")?,
        vsize_bytes: field(23, "vsize")?,
    })
}

/// The `VmRSS` line of `/proc/<pid>/status`, in bytes (the file gives kB).
pub fn parse_status_rss_bytes(text: &str) -> Result<u64, ProcError> {
    let bad = |reason: String| ProcError::Format {
        path: STATUS,
        reason,
    };
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .ok_or_else(|| bad("no VmRSS line".into()))?;
    let mut parts = line.split_whitespace();
    let (Some(value), Some("kB"), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad(format!("VmRSS is {:?}, not `<n> kB`", line.trim())));
    };
    let kib: u64 = value
        .parse()
        .map_err(|_| bad(format!("VmRSS is {value:?}, not a count")))?;
    kib.checked_mul(1024)
        .ok_or_else(|| bad(format!("VmRSS of {kib} kB overflows")))
}

/// The `btime` line of `/proc/stat`: boot time in seconds since the Unix epoch.
pub fn parse_boot_time_seconds(text: &str) -> Result<u64, ProcError> {
    let bad = |reason: String| ProcError::Format {
        path: SYSTEM_STAT,
        reason,
    };
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .ok_or_else(|| bad("no btime line".into()))?;
    value
        .trim()
        .parse()
        .map_err(|_| bad(format!("btime is {value:?}, not a count")))
}

impl ProcessStats {
    /// The figures from the three files' texts and the count of open descriptors.
    pub fn from_texts(
        stat: &str,
        status: &str,
        system_stat: &str,
        open_fds: u64,
    ) -> Result<ProcessStats, ProcError> {
        let s = parse_stat(stat)?;
        let boot = parse_boot_time_seconds(system_stat)?;
        Ok(ProcessStats {
            cpu_seconds: (s.utime_ticks + s.stime_ticks) as f64 / USER_HZ,
            start_time_seconds: boot as f64 + s.start_ticks as f64 / USER_HZ,
            resident_memory_bytes: parse_status_rss_bytes(status)?,
            virtual_memory_bytes: s.vsize_bytes,
            threads: s.threads,
            open_fds,
        })
    }

    /// Reads this process's figures from `/proc`.
    pub fn read() -> Result<ProcessStats, ProcError> {
        let read = |path: &'static str| {
            std::fs::read_to_string(path).map_err(|source| ProcError::Io { path, source })
        };
        let (stat, status, system_stat) = (read(STAT)?, read(STATUS)?, read(SYSTEM_STAT)?);
        ProcessStats::from_texts(
            &stat,
            &status,
            &system_stat,
            count_open_fds(Path::new(FDS))?,
        )
    }

    /// Appends the `process_*` families.
    pub fn render(&self, out: &mut String) {
        let gauges: [(&str, &str, f64); 5] = [
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds.",
                self.start_time_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                self.resident_memory_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                self.virtual_memory_bytes as f64,
            ),
            (
                "process_threads",
                "Number of OS threads in the process.",
                self.threads as f64,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                self.open_fds as f64,
            ),
        ];
        family(
            out,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            &[(String::new(), self.cpu_seconds)],
        );
        for (name, help, value) in gauges {
            family(out, name, "gauge", help, &[(String::new(), value)]);
        }
    }
}

/// Appends the `process_*` families of this process to a scrape; when `/proc` cannot be read
/// the scrape goes out without them and the reason is logged.
pub fn render_into(out: &mut String) {
    match ProcessStats::read() {
        Ok(stats) => stats.render(out),
        Err(e) => tracing::warn!(error = %e, "process metrics left out of this scrape"),
    }
}

/// Open descriptors: the entries of `/proc/self/fd`, less the one this listing opened.
fn count_open_fds(dir: &Path) -> Result<u64, ProcError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ProcError::Io { path: FDS, source })?;
    let listed = entries.filter(|e| e.is_ok()).count() as u64;
    Ok(listed.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A stat line of a process whose name holds a space and a parenthesis.
    const STAT_LINE: &str = "4242 (corum (x) y) S 1 4242 4242 0 -1 4194560 1200 0 3 0 \
        250 125 0 0 20 0 7 0 12345 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 \
        17 1 0 0 0 0 0\n";

    const STATUS_TEXT: &str = "Name:\tcorum\nUmask:\t0022\nState:\tS (sleeping)\n\
        VmPeak:\t  100000 kB\nVmRSS:\t   20480 kB\nThreads:\t7\n";

    const SYSTEM_STAT_TEXT: &str =
        "cpu  1 2 3 4 5 6 7 0 0 0\nctxt 123\nbtime 1700000000\nprocesses 99\n";

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // The name "corum (x) y" would shift every field if split at the first ')'.
        let s = parse_stat(STAT_LINE).unwrap();
        assert_eq!(
            s,
            StatFields {
                utime_ticks: 250,
                stime_ticks: 125,
                threads: 7,
                start_ticks: 12345,
                vsize_bytes: 987_654_321,
            }
        );
    }

    #[test]
    fn the_figures_combine_the_three_files() {
        // CPU is (utime + stime) / USER_HZ, the start time boot time + starttime / USER_HZ,
        // resident memory VmRSS in bytes.
        let p = ProcessStats::from_texts(STAT_LINE, STATUS_TEXT, SYSTEM_STAT_TEXT, 12).unwrap();
        assert_eq!(p.cpu_seconds, 3.75);
        assert_eq!(p.start_time_seconds, 1_700_000_123.45);
        assert_eq!(p.resident_memory_bytes, 20_480 * 1024);
        assert_eq!(p.virtual_memory_bytes, 987_654_321);
        assert_eq!((p.threads, p.open_fds), (7, 12));
        let mut text = String::new();
        p.render(&mut text);
        for line in [
            "# TYPE process_cpu_seconds_total counter\n",
            "process_cpu_seconds_total 3.75\n",
            "process_start_time_seconds 1700000123.45\n",
            "process_resident_memory_bytes 20971520\n",
            "process_virtual_memory_bytes 987654321\n",
            "process_threads 7\n",
            "process_open_fds 12\n",
        ] {
            assert!(text.contains(line), "{line:?} missing in:\n{text}");
        }
    }

    #[test]
    fn damaged_texts_are_refused_naming_the_file_and_field() {
        // Each malformed input is an error that says which file and which field.
        let cases: [(Result<u64, ProcError>, &str); 7] = [
            (parse_stat("4242 corum S 1").map(|s| s.threads), "no ')'"),
            (
                parse_stat("4242 (corum) S 1 2 3").map(|s| s.threads),
                "field 14 (utime)",
            ),
            (
                parse_stat(&STAT_LINE.replace(" 250 ", " -5 ")).map(|s| s.threads),
                "field 14 (utime) is \"-5\"",
            ),
            (parse_status_rss_bytes("Name:\tcorum\n"), "no VmRSS"),
            (parse_status_rss_bytes("VmRSS:\t 12 MB\n"), "not `<n> kB`"),
            (parse_boot_time_seconds("cpu 1 2\n"), "no btime"),
            (parse_boot_time_seconds("btime soon\n"), "btime is \"soon\""),
        ];
        for (result, needle) in cases {
            let e = result.unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} lacks {needle:?}");
            assert!(e.starts_with("/proc/"), "{e:?} names no file");
        }
    }

    #[test]
    fn this_process_reads_itself() {
        // Against the real /proc: the test process has run, has threads, memory and
        // descriptors, and started before now.
        let p = ProcessStats::read().unwrap();
        assert!(p.cpu_seconds >= 0.0);
        assert!(p.threads >= 1 && p.open_fds >= 3, "{p:?}");
        assert!(p.resident_memory_bytes > 1 << 20, "{p:?}");
        assert!(p.virtual_memory_bytes >= p.resident_memory_bytes, "{p:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86_400.0,
            "started at {}, now {now}",
            p.start_time_seconds
        );
        let mut text = String::new();
        render_into(&mut text);
        assert!(text.contains("process_cpu_seconds_total "), "{text}");
    }

    proptest! {
        #[test]
        fn parsers_never_panic(text in "\\PC{0,200}") {
            // Any text is either understood or refused with an error; nothing panics.
            let _ = parse_stat(&text);
            let _ = parse_status_rss_bytes(&text);
            let _ = parse_boot_time_seconds(&text);
        }

        #[test]
        fn stat_lines_round_trip(name in "[ -~]{0,16}", utime in 0u64..1 << 40, stime in 0u64..1 << 40,
                                 threads in 1u64..10_000, start in 0u64..1 << 40, vsize in 0u64..1 << 50) {
            // Whatever the command name holds, the numbers come back as written.
            let line = format!(
                "1 ({name}) R 0 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 {threads} 0 {start} {vsize} 5 0\n"
            );
            let s = parse_stat(&line).unwrap();
            prop_assert_eq!(
                s,
                StatFields { utime_ticks: utime, stime_ticks: stime, threads, start_ticks: start, vsize_bytes: vsize }
            );
        }
    }
}
