//! The round trip's data, as Kafka's own tools report it: `ProducerPerformance
//! --payload-monotonic` sends the numbers `0..N` as the messages' values (decimal text) and
//! prints its figures; `ConsoleConsumer` prints each value it reads on a line of its own. The
//! demo parses the first and checks the second: every number consumed, none twice, nothing
//! else.

/// The last summary line of `ProducerPerformance`:
/// `N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P ms 50th,
/// P ms 95th, P ms 99th, P ms 99.9th.`
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProducerFigures {
    pub records: u64,
    pub records_per_sec: f64,
    pub avg_latency_ms: f64,
    pub max_latency_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The figures of the last line with percentiles (the periodic lines have none), or `None`
/// when the tool printed no such line.
pub fn parse_producer_figures(text: &str) -> Option<ProducerFigures> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains(" records sent, ") && l.contains(" 50th"))?;
    let mut f = ProducerFigures::default();
    for field in line.trim().trim_end_matches('.').split(", ") {
        let field = field.trim();
        let number = |suffix: &str| -> Option<f64> {
            field
                .strip_suffix(suffix)
                .and_then(|n| n.trim().parse::<f64>().ok())
        };
        if let Some(n) = field
            .strip_suffix(" records sent")
            .and_then(|n| n.trim().parse().ok())
        {
            f.records = n;
        } else if let Some((rate, _)) = field.split_once(" records/sec") {
            f.records_per_sec = rate.trim().parse().ok()?;
        } else if let Some(n) = number(" ms avg latency") {
            f.avg_latency_ms = n;
        } else if let Some(n) = number(" ms max latency") {
            f.max_latency_ms = n;
        } else if let Some(n) = number(" ms 50th") {
            f.p50_ms = n;
        } else if let Some(n) = number(" ms 99th") {
            f.p99_ms = n;
        }
    }
    Some(f)
}

/// What a consumer's output held, against the `expected` numbers `0..expected`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumed {
    /// Lines read (messages consumed).
    pub messages: u64,
    /// Distinct expected numbers among them.
    pub unique: u64,
    /// Expected numbers read more than once.
    pub duplicates: u64,
    /// Lines that are not a number below `expected`.
    pub foreign: u64,
    /// The smallest expected number not read, if any.
    pub first_missing: Option<u64>,
}

impl Consumed {
    /// Expected numbers never read.
    pub fn missing(&self, expected: u64) -> u64 {
        expected - self.unique
    }

    /// Every number read exactly once, and nothing else.
    pub fn exact(&self, expected: u64) -> bool {
        self.unique == expected && self.duplicates == 0 && self.foreign == 0
    }
}

/// Checks a consumer's output (one value per line) against `0..expected`.
pub fn check_consumed(text: &str, expected: u64) -> Consumed {
    let mut seen = vec![false; usize::try_from(expected).expect("a message count fits in memory")];
    let mut c = Consumed::default();
    for line in text.lines() {
        c.messages += 1;
        match line.trim().parse::<u64>() {
            Ok(n) if n < expected => {
                let slot = &mut seen[n as usize];
                if *slot {
                    c.duplicates += 1;
                } else {
                    *slot = true;
                    c.unique += 1;
                }
            }
            _ => c.foreign += 1,
        }
    }
    c.first_missing = seen.iter().position(|s| !s).map(|i| i as u64);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The final line's figures are read; the periodic lines before it are not.
    #[test]
    fn producer_figures() {
        let text = "\
48213 records sent, 9642.6 records/sec (0.01 MB/sec), 612.4 ms avg latency, 1204.0 ms max latency.
100000 records sent, 31756.113052 records/sec (0.03 MB/sec), 402.51 ms avg latency, 1204.00 ms max latency, 380 ms 50th, 950 ms 95th, 1100 ms 99th, 1190 ms 99.9th.
";
        let f = parse_producer_figures(text).unwrap();
        assert_eq!(f.records, 100_000);
        assert!((f.records_per_sec - 31_756.113_052).abs() < 1e-6);
        assert!((f.avg_latency_ms - 402.51).abs() < 1e-9);
        assert!((f.max_latency_ms - 1204.0).abs() < 1e-9);
        assert!((f.p50_ms - 380.0).abs() < 1e-9);
        assert!((f.p99_ms - 1100.0).abs() < 1e-9);
        assert_eq!(
            parse_producer_figures("48213 records sent, 9642.6 records/sec (0.01 MB/sec).\n"),
            None
        );
    }

    /// Every number once is exact; a duplicate, a gap or a stray line is counted and named.
    #[test]
    fn consumed_check() {
        let c = check_consumed("2\n0\n1\n", 3);
        assert!(c.exact(3), "{c:?}");
        assert_eq!((c.messages, c.missing(3), c.first_missing), (3, 0, None));
        let c = check_consumed("0\n0\n2\nhello\n7\n", 4);
        assert!(!c.exact(4));
        assert_eq!(c.messages, 5);
        assert_eq!((c.unique, c.duplicates, c.foreign), (2, 1, 2));
        assert_eq!((c.missing(4), c.first_missing), (2, Some(1)));
        assert_eq!(check_consumed("", 0), Consumed::default());
    }
}
