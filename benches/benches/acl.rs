//! Authorization benches: Kafka's StandardAuthorizer decision over corum's ACL image.
//!
//! - `acl/authorize_100k_acls`: one decision (`Authorizer::authorize`) against 100,000 ACLs
//!   of 10,000 principals: literal topic ACLs (60%), prefixed topic ACLs with prefixes of 4 to
//!   16 characters (20%), literal group ACLs (15%), `User:*` ACLs on 1,000 shared topics (5%),
//!   10 ACLs on every topic (`*`); 4% are deny ACLs. Queries mix hits on literal, prefixed
//!   and shared names, misses, and implied operations (DESCRIBE from READ). Criterion reports the mean; the bench also
//!   times 1,000,000 decisions one by one and prints p50/p99/p99.9/max from an HDR histogram
//!   (target: p99 ≤ 2 µs).

use std::hint::black_box;
use std::time::Instant;

use corum_controller::acl::{
    AclBinding, AclOperation, AclPermissionType, AclsImage, Authorizer, AuthorizerConfig,
    PatternType, Requester, ResourceType,
};
use corum_types::Uuid;
use criterion::{criterion_group, criterion_main, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const ACLS: usize = 100_000;
const PRINCIPALS: usize = 10_000;
const TEAMS: usize = 200;

fn principal(i: usize) -> String {
    format!("User:svc-{i}")
}

fn acls(rng: &mut ChaCha8Rng) -> AclsImage {
    use AclOperation as O;
    let mut image = AclsImage::default();
    for i in 0..ACLS {
        let who = principal(rng.gen_range(0..PRINCIPALS));
        let team = rng.gen_range(0..TEAMS);
        let roll = rng.gen_range(0..100);
        let (t, name, p) = match roll {
            0..60 => (
                ResourceType::Topic,
                format!("team{team}-events-{i}"),
                PatternType::Literal,
            ),
            60..80 => {
                let prefix = match rng.gen_range(0..3) {
                    0 => format!("team{team}-"),
                    1 => format!("team{team}-events-"),
                    _ => format!("t{team}-"),
                };
                (ResourceType::Topic, prefix, PatternType::Prefixed)
            }
            80..95 => (
                ResourceType::Group,
                format!("group-{i}"),
                PatternType::Literal,
            ),
            // A few principals may use every topic.
            _ if i % 10_000 == 0 => (ResourceType::Topic, "*".to_owned(), PatternType::Literal),
            _ => (
                ResourceType::Topic,
                format!("shared-{}", i % 1000),
                PatternType::Literal,
            ),
        };
        let deny = roll % 25 == 3;
        let acl = AclBinding {
            resource_type: t,
            resource_name: name,
            pattern_type: p,
            principal: if roll >= 95 && i % 10_000 != 0 {
                "User:*".to_owned()
            } else {
                who
            },
            host: "*".to_owned(),
            operation: [O::Read, O::Write, O::Describe, O::All][rng.gen_range(0..4)],
            permission_type: if deny {
                AclPermissionType::Deny
            } else {
                AclPermissionType::Allow
            },
        };
        let bits = (u128::from(rng.gen::<u64>()) << 64) | u128::from(rng.gen::<u64>());
        image.replay_create_for_tests(Uuid::from_random_bits(bits), acl);
    }
    image
}

/// Queries: principal, operation, resource type, name.
fn queries(rng: &mut ChaCha8Rng, n: usize) -> Vec<(String, AclOperation, ResourceType, String)> {
    use AclOperation as O;
    (0..n)
        .map(|_| {
            let who = principal(rng.gen_range(0..PRINCIPALS));
            let team = rng.gen_range(0..TEAMS);
            let i = rng.gen_range(0..ACLS);
            let op = [O::Read, O::Write, O::Describe, O::Create][rng.gen_range(0..4)];
            match rng.gen_range(0..5) {
                0 => (
                    who,
                    op,
                    ResourceType::Topic,
                    format!("team{team}-events-{i}"),
                ),
                1 => (
                    who,
                    op,
                    ResourceType::Topic,
                    format!("t{team}-payments-{i}"),
                ),
                2 => (who, op, ResourceType::Group, format!("group-{i}")),
                3 => (who, op, ResourceType::Topic, format!("shared-{}", i % 1000)),
                _ => (who, op, ResourceType::Topic, format!("unrelated-topic-{i}")),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let authorizer = Authorizer::new(
        AuthorizerConfig {
            super_users: vec!["User:admin".into()],
            allow_everyone_if_no_acl_found: false,
        },
        acls(&mut rng),
    );
    let qs = queries(&mut rng, 65_536);
    let decide = |q: &(String, AclOperation, ResourceType, String)| {
        authorizer.authorize(
            Requester {
                principal: &q.0,
                host: "10.1.2.3",
            },
            q.1,
            q.2,
            &q.3,
        )
    };

    // Percentiles: every decision timed on its own (Instant's own cost, ~20 ns, included).
    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).unwrap();
    let mut allowed = 0usize;
    for round in 0..16 {
        for q in &qs {
            let start = Instant::now();
            let a = black_box(decide(black_box(q)));
            let ns = start.elapsed().as_nanos() as u64;
            if round > 0 {
                hist.saturating_record(ns.max(1));
                allowed += usize::from(a);
            }
        }
    }
    println!(
        "acl/authorize_100k_acls: {} decisions timed one by one: p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns ({:.1}% allowed)",
        hist.len(),
        hist.value_at_quantile(0.50),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.max(),
        100.0 * allowed as f64 / hist.len() as f64
    );

    let mut i = 0usize;
    c.bench_function("acl/authorize_100k_acls", |b| {
        b.iter(|| {
            i = (i + 1) & (qs.len() - 1);
            black_box(decide(&qs[i]))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
