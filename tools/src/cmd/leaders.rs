//! `corum leaders elect --election-type preferred|unclean (--topic T --partition P |
//! --all-topic-partitions)`: leader elections (ElectLeaders), in the shape of Kafka's
//! `kafka-leader-election`.
//!
//! | election | what the controller does |
//! |---|---|
//! | `preferred` | moves leadership to the first assigned replica if it is an unfenced ISR member |
//! | `unclean` | for a partition without a leader: an eligible ISR member, or failing that any unfenced replica (which becomes the whole ISR and may lose data) |
//!
//! Each partition ends one of three ways, as `kafka-leader-election` reports them:
//!
//! | outcome | printed | exit code |
//! |---|---|---|
//! | `elected` | `Successfully completed leader election (PREFERRED) for partitions t-0, ...` | 0 |
//! | `not_needed` (Kafka's ELECTION_NOT_NEEDED: the right leader already leads) | `Valid replica already elected for partitions t-0, ...` | 0 |
//! | `failed` (any other error) | in the error line, with Kafka's error name | 1 |
//!
//! With `--all-topic-partitions` the controller reports only partitions whose leader changed
//! or whose election failed for another reason than "not needed", so a cluster whose leaders
//! are all in place prints nothing and exits 0.

use std::fmt::Write as _;

use corum_client::{RequestBody, ResponseBody};
use corum_controller::control::replication_control::{
    ElectLeadersRequest, ElectLeadersResponse, ElectionType,
};
use corum_controller::{ApiError, PartitionId};
use serde::Serialize;

use crate::cmd::admin::{call, finish, to_json, with_client, ConnectArgs, ItemError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Elect leaders (ElectLeaders).
    Elect(ElectArgs),
}

/// `--election-type`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[value(rename_all = "lower")]
pub enum Election {
    /// The first assigned replica, if it is an unfenced ISR member.
    Preferred,
    /// A leaderless partition's ISR member, or any unfenced replica (may lose data).
    Unclean,
}

impl Election {
    fn request(self) -> ElectionType {
        match self {
            Election::Preferred => ElectionType::Preferred,
            Election::Unclean => ElectionType::Unclean,
        }
    }

    fn upper(self) -> &'static str {
        match self {
            Election::Preferred => "PREFERRED",
            Election::Unclean => "UNCLEAN",
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["topic", "all_topic_partitions"])))]
pub struct ElectArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// Which leader to elect.
    #[arg(long, value_enum, ignore_case = true)]
    pub election_type: Election,
    /// The topic of the one partition to elect for (with --partition).
    #[arg(long, requires = "partition")]
    pub topic: Option<String>,
    /// The partition of --topic.
    #[arg(long, requires = "topic")]
    pub partition: Option<u32>,
    /// Every partition of every topic.
    #[arg(long)]
    pub all_topic_partitions: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let What::Elect(a) = args.what;
    let req = elect_request(&a);
    let r = with_client(&a.conn, |client| async move {
        call(&client, RequestBody::ElectLeaders(req), |r| match r {
            ResponseBody::ElectLeaders(r) => Ok(r),
            other => Err(other),
        })
        .await
    })?;
    finish(render_elected(&r, a.election_type), a.conn.json)
}

/// The ElectLeaders request of `a` (`partitions: None` for every partition).
pub fn elect_request(a: &ElectArgs) -> ElectLeadersRequest {
    let partitions = match (&a.topic, a.partition) {
        (Some(t), Some(p)) if !a.all_topic_partitions => Some(vec![(t.clone(), PartitionId(p))]),
        _ => None,
    };
    ElectLeadersRequest {
        election_type: a.election_type.request(),
        partitions,
    }
}

/// How one partition's election ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElectionOutcome {
    Elected,
    NotNeeded,
    Failed,
}

#[derive(Serialize)]
struct PartitionJson {
    topic: String,
    partition: u32,
    outcome: ElectionOutcome,
    leader: Option<u32>,
    error: Option<ItemError>,
}

/// The outcome of an ElectLeaders answer (see the module doc's table).
pub fn render_elected(r: &ElectLeadersResponse, election: Election) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    let (mut elected, mut not_needed) = (Vec::new(), Vec::new());
    for (topic, pid, result) in &r.partitions {
        let name = format!("{topic}-{}", pid.get());
        let (outcome, leader, error) = match result {
            Ok(leader) => {
                elected.push(name);
                (ElectionOutcome::Elected, Some(leader.0), None)
            }
            Err(e @ ApiError::ElectionNotNeeded { .. }) => {
                not_needed.push(name);
                (ElectionOutcome::NotNeeded, None, Some(ItemError::api(e)))
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures.push((format!("partition {name}"), e.clone()));
                (ElectionOutcome::Failed, None, Some(e))
            }
        };
        rows.push(PartitionJson {
            topic: topic.clone(),
            partition: pid.get(),
            outcome,
            leader,
            error,
        });
    }
    if !elected.is_empty() {
        let _ = writeln!(
            out.text,
            "Successfully completed leader election ({}) for partitions {}",
            election.upper(),
            elected.join(", ")
        );
    }
    if !not_needed.is_empty() {
        let _ = writeln!(
            out.text,
            "Valid replica already elected for partitions {}",
            not_needed.join(", ")
        );
    }
    out.json = serde_json::json!({
        "election_type": election.upper().to_ascii_lowercase(),
        "partitions": to_json(&rows),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use corum_controller::TopicId;
    use corum_types::{NodeId, Uuid};

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        what: What,
    }

    fn parse(args: &[&str]) -> Result<ElectArgs, clap::Error> {
        let mut v = vec!["leaders", "elect", "--bootstrap", "127.0.0.1:9"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| {
            let What::Elect(a) = c.what;
            a
        })
    }

    /// One partition needs both --topic and --partition; --all-topic-partitions excludes them;
    /// one of the two scopes is required; the election type is case-insensitive.
    #[test]
    fn scopes() {
        let a = parse(&[
            "--election-type",
            "PREFERRED",
            "--topic",
            "t",
            "--partition",
            "2",
        ])
        .unwrap();
        let r = elect_request(&a);
        assert_eq!(r.election_type, ElectionType::Preferred);
        assert_eq!(r.partitions, Some(vec![("t".to_owned(), PartitionId(2))]));
        let a = parse(&["--election-type", "unclean", "--all-topic-partitions"]).unwrap();
        let r = elect_request(&a);
        assert_eq!(
            (r.election_type, r.partitions),
            (ElectionType::Unclean, None)
        );
        assert!(parse(&["--election-type", "preferred"]).is_err());
        assert!(parse(&["--election-type", "preferred", "--topic", "t"]).is_err());
        assert!(parse(&["--election-type", "preferred", "--partition", "0"]).is_err());
        assert!(parse(&[
            "--election-type",
            "preferred",
            "--topic",
            "t",
            "--partition",
            "0",
            "--all-topic-partitions"
        ])
        .is_err());
        assert!(parse(&["--election-type", "random", "--all-topic-partitions"]).is_err());
    }

    /// Elected and not-needed partitions are reported as kafka-leader-election does and do not
    /// fail; any other error does, with Kafka's name.
    #[test]
    fn outcomes() {
        let id = TopicId(Uuid([1; 16]));
        let r = ElectLeadersResponse {
            partitions: vec![
                ("t".into(), PartitionId(0), Ok(NodeId(3))),
                ("t".into(), PartitionId(1), Ok(NodeId(2))),
                (
                    "t".into(),
                    PartitionId(2),
                    Err(ApiError::ElectionNotNeeded {
                        topic_id: id,
                        partition: PartitionId(2),
                    }),
                ),
                (
                    "u".into(),
                    PartitionId(0),
                    Err(ApiError::PreferredLeaderNotAvailable {
                        topic_id: id,
                        partition: PartitionId(0),
                    }),
                ),
            ],
        };
        let o = render_elected(&r, Election::Preferred);
        assert_eq!(
            o.text,
            "Successfully completed leader election (PREFERRED) for partitions t-0, t-1\n\
             Valid replica already elected for partitions t-2\n"
        );
        assert_eq!(o.failures.len(), 1);
        assert_eq!(o.failures[0].0, "partition u-0");
        assert_eq!(o.failures[0].1.name, "PREFERRED_LEADER_NOT_AVAILABLE");
        let p = &o.json["partitions"];
        assert_eq!(o.json["election_type"], "preferred");
        assert_eq!(p[0]["outcome"], "elected");
        assert_eq!(p[0]["leader"], 3);
        assert_eq!(p[2]["outcome"], "not_needed");
        assert_eq!(p[2]["error"]["name"], "ELECTION_NOT_NEEDED");
        assert_eq!(p[3]["outcome"], "failed");

        let o = render_elected(
            &ElectLeadersResponse { partitions: vec![] },
            Election::Unclean,
        );
        assert_eq!(o.text, "");
        assert!(o.failures.is_empty());
        assert_eq!(o.json["partitions"], serde_json::json!([]));
    }
}
