//! A fixed-bucket latency histogram, the form every latency figure of a node takes (metrics
//! render it in Prometheus' cumulative form).

use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets (commit latency, log sync
/// duration: a lone durable 4 KiB write takes under 100 µs on a fast device).
pub const LATENCY_BUCKETS_S: [f64; 16] = [
    0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 5.0,
];

/// A fixed-bucket latency histogram (Prometheus' cumulative form is made at rendering).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// Per bucket of [`LATENCY_BUCKETS_S`] (not cumulative), then the +Inf bucket.
    pub counts: [u64; LATENCY_BUCKETS_S.len() + 1],
    pub sum_us: u64,
    pub count: u64,
}

impl LatencyHistogram {
    pub fn record(&mut self, latency: Duration) {
        let s = latency.as_secs_f64();
        let i = LATENCY_BUCKETS_S
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        self.counts[i] += 1;
        self.sum_us += u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.count += 1;
    }
}
