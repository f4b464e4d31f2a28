//! `corum features describe|upgrade|downgrade`: finalized feature levels (KIP-584), in the
//! shape of Kafka's `kafka-features`.
//!
//! | command | request | prints |
//! |---|---|---|
//! | `describe` | DescribeFeatures | per feature: the active controller's supported range, the finalized level, the epoch |
//! | `upgrade --feature NAME=LEVEL ... [--dry-run]` | UpdateFeatures, no downgrade allowed | per feature: upgraded, or the error |
//! | `downgrade --feature NAME=LEVEL ... [--unsafe] [--dry-run]` | UpdateFeatures allowing downgrades | per feature: downgraded, or the error |
//!
//! A feature is finalized at one level, as in Kafka (whose finalized range lost its minimum in
//! 3.x): `NAME=LEVEL` finalizes `[LEVEL, LEVEL]`, and level 0 removes the feature (a
//! downgrade). The controller checks every level against its own supported range and those of
//! every registered controller and broker; an upgrade that would lower a level is refused
//! (Kafka's INVALID_UPDATE_VERSION). `--dry-run` validates without writing (Kafka's
//! `validate_only`).
//!
//! `--unsafe` is accepted for scripts written for `kafka-features` and sent the same way: Kafka
//! separates a safe downgrade (no metadata lost) from an unsafe one, but corum's records do not
//! depend on any feature level, so every corum downgrade is safe and both are one request
//! (`allow_downgrade`), as the Kafka listener also maps them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use corum_client::{RequestBody, ResponseBody};
use corum_controller::control::feature_control::{
    DescribeFeaturesResponse, FeatureUpdate, UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use serde::Serialize;

use crate::cmd::admin::{call, finish, to_json, with_client, ConnectArgs, ItemError, Outcome};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand, Debug)]
pub enum What {
    /// Supported ranges and finalized levels (DescribeFeatures).
    Describe(DescribeArgs),
    /// Raise finalized levels (UpdateFeatures).
    Upgrade(UpdateArgs),
    /// Lower finalized levels, or remove a feature with level 0 (UpdateFeatures).
    Downgrade(DowngradeArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct UpdateArgs {
    #[command(flatten)]
    pub conn: ConnectArgs,
    /// A feature and its new level, `NAME=LEVEL` (repeat for more).
    #[arg(long = "feature", value_name = "NAME=LEVEL", required = true, value_parser = parse_feature)]
    pub features: Vec<(String, u16)>,
    /// Validate only: change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct DowngradeArgs {
    #[command(flatten)]
    pub update: UpdateArgs,
    /// Kafka's unsafe downgrade; every corum downgrade is safe, so this changes nothing (see
    /// the module doc).
    #[arg(long = "unsafe")]
    pub unsafe_downgrade: bool,
}

/// Parses `NAME=LEVEL` (a level from 0 to 65535).
pub fn parse_feature(s: &str) -> Result<(String, u16), String> {
    let (name, level) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=LEVEL"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?} names no feature"));
    }
    let level = level
        .trim()
        .parse::<u16>()
        .map_err(|_| format!("{s:?}: the level must be a number from 0 to 65535"))?;
    Ok((name.to_owned(), level))
}

/// Which way an update goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Upgrade,
    Downgrade,
}

impl Direction {
    fn past(self) -> &'static str {
        match self {
            Direction::Upgrade => "upgraded",
            Direction::Downgrade => "downgraded",
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Describe(a) => {
            let r = with_client(&a.conn, |client| async move {
                call(&client, RequestBody::DescribeFeatures, |r| match r {
                    ResponseBody::DescribeFeatures(r) => Ok(r),
                    other => Err(other),
                })
                .await
            })?;
            finish(render_described(&r), a.conn.json)
        }
        What::Upgrade(a) => update(a, Direction::Upgrade),
        What::Downgrade(a) => update(a.update, Direction::Downgrade),
    }
}

fn update(a: UpdateArgs, direction: Direction) -> anyhow::Result<()> {
    let req = update_request(&a, direction);
    let r = with_client(&a.conn, |client| async move {
        call(&client, RequestBody::UpdateFeatures(req), |r| match r {
            ResponseBody::UpdateFeatures(r) => Ok(r),
            other => Err(other),
        })
        .await
    })?;
    finish(
        render_updated(&r, &a.features, direction, a.dry_run),
        a.conn.json,
    )
}

/// The UpdateFeatures request: each feature finalized at its one level (0 removes it),
/// downgrades allowed only for `downgrade`.
pub fn update_request(a: &UpdateArgs, direction: Direction) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest {
        updates: a
            .features
            .iter()
            .map(|(name, level)| FeatureUpdate {
                name: name.clone(),
                min_level: *level,
                max_level: *level,
                allow_downgrade: direction == Direction::Downgrade,
            })
            .collect(),
        validate_only: a.dry_run,
    }
}

#[derive(Serialize, Default)]
struct FeatureJson {
    name: String,
    supported_min_level: Option<u16>,
    supported_max_level: Option<u16>,
    finalized_level: Option<u16>,
}

fn dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The outcome of a DescribeFeatures answer: one line per feature the active controller
/// supports or the cluster finalized, in name order, as `kafka-features describe` prints them
/// (levels as numbers; `-` where there is none).
pub fn render_described(r: &DescribeFeaturesResponse) -> Outcome {
    let mut features: BTreeMap<&str, FeatureJson> = BTreeMap::new();
    for s in &r.supported {
        let f = features.entry(&s.name).or_default();
        f.supported_min_level = Some(s.min_level);
        f.supported_max_level = Some(s.max_level);
    }
    for fin in &r.finalized {
        features.entry(&fin.name).or_default().finalized_level = Some(fin.max_level);
    }
    let epoch = r.finalized_epoch.map(|o| o.0);
    let mut text = String::new();
    let mut rows = Vec::new();
    for (name, mut f) in features {
        let _ = writeln!(
            text,
            "Feature: {name}\tSupportedMinVersion: {}\tSupportedMaxVersion: {}\t\
             FinalizedVersionLevel: {}\tEpoch: {}",
            dash(f.supported_min_level),
            dash(f.supported_max_level),
            dash(f.finalized_level),
            dash(epoch),
        );
        f.name = name.to_owned();
        rows.push(f);
    }
    Outcome::ok(
        text,
        serde_json::json!({ "finalized_epoch": epoch, "features": to_json(&rows) }),
    )
}

#[derive(Serialize)]
struct UpdatedJson {
    name: String,
    level: Option<u16>,
    error: Option<ItemError>,
}

/// The outcome of an UpdateFeatures answer for the `asked` updates.
pub fn render_updated(
    r: &UpdateFeaturesResponse,
    asked: &[(String, u16)],
    direction: Direction,
    dry_run: bool,
) -> Outcome {
    let mut out = Outcome::default();
    let mut rows = Vec::new();
    for (name, result) in &r.results {
        let level = asked.iter().find(|(n, _)| n == name).map(|(_, l)| *l);
        let error = match result {
            Ok(()) => {
                let level = dash(level);
                let _ = if dry_run {
                    writeln!(
                        out.text,
                        "{name} can be {} to {level} (dry run: nothing changed).",
                        direction.past()
                    )
                } else {
                    writeln!(out.text, "{name} was {} to {level}.", direction.past())
                };
                None
            }
            Err(e) => {
                let e = ItemError::api(e);
                out.failures.push((format!("feature {name:?}"), e.clone()));
                Some(e)
            }
        };
        rows.push(UpdatedJson {
            name: name.clone(),
            level,
            error,
        });
    }
    out.json = serde_json::json!({ "dry_run": dry_run, "features": to_json(&rows) });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use corum_client::SupportedFeatureV1;
    use corum_controller::control::feature_control::FinalizedFeatureLevel;
    use corum_controller::ApiError;
    use corum_types::LogOffset;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        what: What,
    }

    fn parse(args: &[&str]) -> Result<What, clap::Error> {
        let mut v = vec!["features", args[0], "--bootstrap", "127.0.0.1:9"];
        v.extend_from_slice(&args[1..]);
        Cli::try_parse_from(v).map(|c| c.what)
    }

    /// `NAME=LEVEL` needs a name and a level in 0..=65535.
    #[test]
    fn feature_syntax() {
        assert_eq!(
            parse_feature("metadata.version=27").unwrap(),
            ("metadata.version".into(), 27)
        );
        assert_eq!(parse_feature("x=0").unwrap(), ("x".into(), 0));
        assert!(parse_feature("x").is_err());
        assert!(parse_feature("=3").is_err());
        assert!(parse_feature("x=-1").is_err());
        assert!(parse_feature("x=65536").is_err());
    }

    /// Upgrades never allow a downgrade, downgrades (with or without --unsafe) always do;
    /// each level is finalized alone; --dry-run is validate-only; --feature is required.
    #[test]
    fn requests_by_direction() {
        let What::Upgrade(a) = parse(&[
            "upgrade",
            "--feature",
            "metadata.version=20",
            "--feature",
            "x=3",
        ])
        .unwrap() else {
            panic!("not upgrade")
        };
        let r = update_request(&a, Direction::Upgrade);
        assert!(!r.validate_only);
        assert_eq!(
            r.updates,
            [
                FeatureUpdate {
                    name: "metadata.version".into(),
                    min_level: 20,
                    max_level: 20,
                    allow_downgrade: false
                },
                FeatureUpdate {
                    name: "x".into(),
                    min_level: 3,
                    max_level: 3,
                    allow_downgrade: false
                }
            ]
        );
        for args in [
            &["downgrade", "--feature", "x=0", "--dry-run"][..],
            &["downgrade", "--feature", "x=0", "--dry-run", "--unsafe"],
        ] {
            let What::Downgrade(a) = parse(args).unwrap() else {
                panic!("not downgrade")
            };
            let r = update_request(&a.update, Direction::Downgrade);
            assert!(r.validate_only);
            assert_eq!((r.updates[0].max_level, r.updates[0].min_level), (0, 0));
            assert!(r.updates[0].allow_downgrade);
        }
        assert!(parse(&["upgrade"]).is_err(), "--feature is required");
    }

    /// Describe lists supported and finalized features together, in name order, with `-`
    /// for what is missing.
    #[test]
    fn described_features() {
        let r = DescribeFeaturesResponse {
            finalized: vec![
                FinalizedFeatureLevel {
                    name: "metadata.version".into(),
                    min_level: 20,
                    max_level: 20,
                },
                FinalizedFeatureLevel {
                    name: "a.version".into(),
                    min_level: 1,
                    max_level: 1,
                },
            ],
            finalized_epoch: Some(LogOffset(41)),
            supported: vec![SupportedFeatureV1 {
                name: "metadata.version".into(),
                min_level: 7,
                max_level: 27,
            }],
        };
        let o = render_described(&r);
        assert_eq!(
            o.text,
            "Feature: a.version\tSupportedMinVersion: -\tSupportedMaxVersion: -\t\
             FinalizedVersionLevel: 1\tEpoch: 41\n\
             Feature: metadata.version\tSupportedMinVersion: 7\tSupportedMaxVersion: 27\t\
             FinalizedVersionLevel: 20\tEpoch: 41\n"
        );
        assert_eq!(o.json["finalized_epoch"], 41);
        let f = &o.json["features"][1];
        assert_eq!(f["name"], "metadata.version");
        assert_eq!(
            (
                &f["supported_min_level"],
                &f["supported_max_level"],
                &f["finalized_level"]
            ),
            (
                &serde_json::json!(7),
                &serde_json::json!(27),
                &serde_json::json!(20)
            )
        );
        let none = render_described(&DescribeFeaturesResponse {
            finalized: vec![],
            finalized_epoch: None,
            supported: r.supported.clone(),
        });
        assert!(
            none.text.ends_with("FinalizedVersionLevel: -\tEpoch: -\n"),
            "{}",
            none.text
        );
        assert_eq!(
            none.json["features"][0]["finalized_level"],
            serde_json::Value::Null
        );
    }

    /// Updated features are printed with their new level; refused ones are failures named
    /// INVALID_UPDATE_VERSION.
    #[test]
    fn updated_features() {
        let r = UpdateFeaturesResponse {
            results: vec![
                ("a".into(), Ok(())),
                (
                    "b".into(),
                    Err(ApiError::FeatureLevelOutOfRange {
                        feature: "b".into(),
                        min_level: 9,
                        max_level: 9,
                        reason: "no".into(),
                    }),
                ),
            ],
        };
        let asked = [("a".to_owned(), 3u16), ("b".to_owned(), 9)];
        let o = render_updated(&r, &asked, Direction::Downgrade, false);
        assert_eq!(o.text, "a was downgraded to 3.\n");
        assert_eq!(o.failures[0].0, "feature \"b\"");
        assert_eq!(o.failures[0].1.name, "INVALID_UPDATE_VERSION");
        assert_eq!(o.json["features"][1]["error"]["code"], 95);
        assert_eq!(o.json["features"][0]["level"], 3);
        let o = render_updated(&r, &asked, Direction::Upgrade, true);
        assert_eq!(
            o.text,
            "a can be upgraded to 3 (dry run: nothing changed).\n"
        );
        assert_eq!(o.json["dry_run"], true);
    }
}
