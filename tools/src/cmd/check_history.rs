//! `corum check-history FILE.jsonl`: runs [`corum_check`]'s checks on a recorded history
//! (linearizability per key, lost acknowledged writes, broker epochs, observed offsets) and
//! prints the report. Exit status: 0 every check passed, 1 a violation (the report shows the
//! smallest failing sub-history and the seed to replay), 2 undecided within the budget, or a
//! file that cannot be read (the error names the line).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use corum_check::{check, CheckLimits, Conclusion, History, Limits};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The history: JSON lines as `corum_check::history` describes them.
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
    /// Search steps per key (a call tried or a backtrack); a key not decided within them is
    /// reported undecided.
    #[arg(long, default_value_t = 5_000_000, value_name = "STEPS")]
    pub budget: u64,
    /// Search steps for shrinking each violation, all its candidates together (default: ten
    /// times --budget).
    #[arg(long, value_name = "STEPS")]
    pub shrink_budget: Option<u64>,
    /// Memory for one key's search cache, in MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub cache_mib: u64,
    /// Give up (undecided) on whatever is not decided after this many seconds. Unlike the
    /// step budget it depends on the machine, so the same file may be decided elsewhere.
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<u64>,
}

/// Exit status for a history that breaks a check.
const EXIT_VIOLATION: u8 = 1;
/// Exit status for an undecided history or one that cannot be read.
const EXIT_UNDECIDED: u8 = 2;

pub fn run(args: Args) -> ExitCode {
    let history = match History::read(&args.file) {
        Ok(history) => history,
        Err(e) => {
            eprintln!("error: {}: {e}", args.file.display());
            return ExitCode::from(EXIT_UNDECIDED);
        }
    };
    let limits = CheckLimits {
        per_key: Limits {
            steps_max: args.budget,
            cache_bytes_max: args.cache_mib.saturating_mul(1 << 20),
            deadline: args
                .time_limit
                .map(|s| Instant::now() + Duration::from_secs(s)),
        },
        shrink_steps_max: args.shrink_budget.unwrap_or(args.budget.saturating_mul(10)),
    };
    let report = check(&history, &limits);
    print!("{report}");
    match report.conclusion() {
        Conclusion::Pass => ExitCode::SUCCESS,
        Conclusion::Violation => ExitCode::from(EXIT_VIOLATION),
        Conclusion::Undecided => ExitCode::from(EXIT_UNDECIDED),
    }
}
