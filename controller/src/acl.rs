//! Kafka's ACL model (KIP-801's StandardAuthorizer): the ACL types with Kafka's wire codes,
//! the ACLs of the image ([`AclsImage`], indexed for authorization), filters (DescribeAcls,
//! DeleteAcls) and the decision ([`Authorizer::authorize`]).
//!
//! # The decision
//!
//! | step | outcome |
//! |---|---|
//! | the principal is in `super.users` | allowed |
//! | an ACL matching the resource, the principal (or `User:*`), the host (or `*`) denies the operation (its own, or ALL) | denied: deny wins |
//! | such an ACL allows the operation: its own, ALL, or one that implies it (DESCRIBE by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS) | allowed |
//! | some ACL matches the resource (for anybody) | denied |
//! | no ACL matches the resource | `allow.everyone.if.no.acl.found` |
//!
//! An ACL matches a resource of its type when it is LITERAL and names it or `*`, or PREFIXED
//! and names a prefix of it. A deny ACL denies exactly its operation (or all): denying READ
//! does not deny DESCRIBE, as in Kafka.
//!
//! # The index
//!
//! Per resource type, a persistent hash map from a literal name to the ACLs naming it, one
//! from a prefix to the prefixed ACLs naming it, and the lengths of the prefixes present (with
//! their counts). A decision looks up the name, `*`, and the name cut at each prefix length
//! present: a handful of hash lookups and a scan of the few ACLs each holds, whatever the total
//! number of ACLs. A counting filter of the prefixes (one FNV-1a pass over the name gives
//! every cut's hash) skips the lookups of cuts that no prefix can be. The maps are `imbl`'s, so the image clones in O(1) like the rest of it.

use std::sync::Arc;

use corum_types::Uuid;

use crate::records::AccessControlEntryRecordV1;

/// Declares a Kafka enum with its wire codes and names.
macro_rules! kafka_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$m])*
        ///
        /// Archivable (rkyv) so an authorization refusal carries it
        /// ([`AuthorizationFailure`]); the variant order is then a wire format: append only.
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
            rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
        )]
        #[rkyv(derive(Debug, PartialEq, Eq))]
        #[repr(u8)]
        pub enum $name {
            $($(#[$vm])* $variant,)*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The value of Kafka's wire code `code`, if it names one.
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's name (as `kafka-acls` prints it).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// The value Kafka's name `text` (any case, `-` for `_`) names.
            pub fn parse(text: &str) -> Option<$name> {
                let norm = text.trim().to_ascii_uppercase().replace('-', "_");
                Self::ALL_VALUES.iter().copied().find(|v| v.name() == norm)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// What an ACL is about (Kafka's `ResourceType`, without UNKNOWN and ANY).
    ResourceType {
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
}

kafka_enum! {
    /// How an ACL's resource name matches (Kafka's `PatternType`, without UNKNOWN, ANY, MATCH).
    PatternType {
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
}

kafka_enum! {
    /// An operation (Kafka's `AclOperation`, without UNKNOWN and ANY).
    AclOperation {
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
}

kafka_enum! {
    /// Allow or deny (Kafka's `AclPermissionType`, without UNKNOWN and ANY).
    AclPermissionType {
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
}

/// Kafka's codes of the filter-only values.
pub mod codes {
    /// UNKNOWN of every ACL enum.
    pub const UNKNOWN: i8 = 0;
    /// ANY of every ACL enum (matches every value in a filter).
    pub const ANY: i8 = 1;
    /// PatternType MATCH: the ACLs that would apply to the named resource.
    pub const MATCH: i8 = 2;
}

/// The only name of the CLUSTER resource (Kafka's `Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name of a LITERAL ACL that matches every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal of an ACL that matches every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host of an ACL that matches every host.
pub const WILDCARD_HOST: &str = "*";
/// The principal of a PLAINTEXT connection (Kafka's `KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// One ACL: who may (or may not) do what on which resources, from which host.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name` (Kafka's `KafkaPrincipal` string), `User:*` for everyone.
    pub principal: String,
    /// An address, or `*` for every host.
    pub host: String,
    pub operation: AclOperation,
    pub permission_type: AclPermissionType,
}

/// An ACL as the wire and the log carry it: Kafka's int8 codes, unchecked.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AclBindingV1 {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// Why an ACL or a filter is refused (Kafka answers INVALID_REQUEST with the message).
pub type Invalid = std::borrow::Cow<'static, str>;

impl AclBinding {
    /// Checks an ACL to create as Kafka's controller does (`AclControlManager.validateNewAcl`
    /// and the listener's checks): known resource type, pattern LITERAL or PREFIXED, a known
    /// operation and permission, a non-empty resource name (`kafka-cluster` for CLUSTER), a
    /// `Type:name` principal and a non-empty host.
    pub fn validate(raw: &AclBindingV1) -> Result<AclBinding, Invalid> {
        let resource_type = ResourceType::from_code(raw.resource_type)
            .ok_or_else(|| format!("invalid resource type {}", raw.resource_type))?;
        let pattern_type = PatternType::from_code(raw.pattern_type)
            .ok_or_else(|| format!("invalid pattern type {}", raw.pattern_type))?;
        let operation = AclOperation::from_code(raw.operation)
            .ok_or_else(|| format!("invalid operation {}", raw.operation))?;
        let permission_type = AclPermissionType::from_code(raw.permission_type)
            .ok_or_else(|| format!("invalid permission type {}", raw.permission_type))?;
        if raw.resource_name.is_empty() {
            return Err("resource name should not be empty".into());
        }
        if resource_type == ResourceType::Cluster && raw.resource_name != CLUSTER_NAME {
            return Err(format!(
                "the only valid name for the CLUSTER resource is {CLUSTER_NAME}, not {:?}",
                raw.resource_name
            )
            .into());
        }
        check_principal(&raw.principal)?;
        if raw.host.is_empty() {
            return Err("host should not be empty (use * for every host)".into());
        }
        Ok(AclBinding {
            resource_type,
            resource_name: raw.resource_name.clone(),
            pattern_type,
            principal: raw.principal.clone(),
            host: raw.host.clone(),
            operation,
            permission_type,
        })
    }

    /// The wire form.
    pub fn to_raw(&self) -> AclBindingV1 {
        AclBindingV1 {
            resource_type: self.resource_type.code(),
            resource_name: self.resource_name.clone(),
            pattern_type: self.pattern_type.code(),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation.code(),
            permission_type: self.permission_type.code(),
        }
    }

    /// The record that creates this ACL under `id`.
    pub fn to_record(&self, id: Uuid) -> AccessControlEntryRecordV1 {
        AccessControlEntryRecordV1 {
            id,
            resource_type: self.resource_type.code(),
            resource_name: self.resource_name.clone(),
            pattern_type: self.pattern_type.code(),
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation.code(),
            permission_type: self.permission_type.code(),
        }
    }

    /// The ACL of a record (`None`: a code no ACL has).
    pub fn from_record_fields(
        resource_type: i8,
        resource_name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission_type: i8,
    ) -> Option<AclBinding> {
        Some(AclBinding {
            resource_type: ResourceType::from_code(resource_type)?,
            resource_name: resource_name.to_owned(),
            pattern_type: PatternType::from_code(pattern_type)?,
            principal: principal.to_owned(),
            host: host.to_owned(),
            operation: AclOperation::from_code(operation)?,
            permission_type: AclPermissionType::from_code(permission_type)?,
        })
    }

    /// Whether this ACL's pattern applies to the resource `name` of its type.
    fn applies_to(&self, name: &str) -> bool {
        match self.pattern_type {
            PatternType::Literal => {
                self.resource_name == name || self.resource_name == WILDCARD_RESOURCE
            }
            PatternType::Prefixed => name.starts_with(self.resource_name.as_str()),
        }
    }
}

/// Checks Kafka's principal form `Type:name` (`SecurityUtils.parseKafkaPrincipal`).
pub fn check_principal(principal: &str) -> Result<(), Invalid> {
    match principal.split_once(':') {
        Some((kind, _)) if !kind.is_empty() => Ok(()),
        _ => {
            Err(format!("could not parse principal from {principal:?} (expected Type:name)").into())
        }
    }
}

/// A filter of ACLs as the wire carries it (Kafka's `AclBindingFilter`): codes that may be
/// ANY (and MATCH for the pattern), names that may be absent (any).
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AclFilterV1 {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission_type: i8,
}

/// How a filter matches patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatternFilter {
    Any,
    /// The ACLs that apply to the named resource (literal, `*`, prefixes).
    Match,
    Is(PatternType),
}

/// A checked [`AclFilterV1`]; `None` fields match anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    resource_type: Option<ResourceType>,
    resource_name: Option<String>,
    pattern: PatternFilter,
    principal: Option<String>,
    host: Option<String>,
    operation: Option<AclOperation>,
    permission_type: Option<AclPermissionType>,
}

fn any_or<T>(code: i8, what: &str, parse: fn(i8) -> Option<T>) -> Result<Option<T>, Invalid> {
    if code == codes::ANY {
        return Ok(None);
    }
    parse(code)
        .map(Some)
        .ok_or_else(|| format!("invalid {what} {code} in a filter").into())
}

impl AclFilter {
    /// Checks a filter as Kafka does (`AclBindingFilter.findIndefiniteField`: an UNKNOWN code
    /// is refused).
    pub fn validate(raw: &AclFilterV1) -> Result<AclFilter, Invalid> {
        let pattern = match raw.pattern_type {
            codes::ANY => PatternFilter::Any,
            codes::MATCH => PatternFilter::Match,
            code => PatternFilter::Is(
                PatternType::from_code(code)
                    .ok_or_else(|| format!("invalid pattern type {code} in a filter"))?,
            ),
        };
        Ok(AclFilter {
            resource_type: any_or(raw.resource_type, "resource type", ResourceType::from_code)?,
            resource_name: raw.resource_name.clone(),
            pattern,
            principal: raw.principal.clone(),
            host: raw.host.clone(),
            operation: any_or(raw.operation, "operation", AclOperation::from_code)?,
            permission_type: any_or(
                raw.permission_type,
                "permission type",
                AclPermissionType::from_code,
            )?,
        })
    }

    /// The filter matching every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission_type: None,
        }
    }

    /// Whether `acl` passes the filter.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        let pattern = match (&self.pattern, &self.resource_name) {
            (PatternFilter::Any, None) | (PatternFilter::Match, None) => true,
            (PatternFilter::Any, Some(n)) => acl.resource_name == *n,
            (PatternFilter::Is(p), None) => acl.pattern_type == *p,
            (PatternFilter::Is(p), Some(n)) => acl.pattern_type == *p && acl.resource_name == *n,
            (PatternFilter::Match, Some(n)) => acl.applies_to(n),
        };
        pattern
            && self.resource_type.is_none_or(|t| t == acl.resource_type)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self
                .permission_type
                .is_none_or(|p| p == acl.permission_type)
    }
}

/// One ACL in the decision index: its id, the ACL, and what a decision reads of it kept inline
/// (a decision walks these in a row without following a pointer per ACL, nor one to the host's
/// text when it is `*`, the usual case).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    id: Uuid,
    acl: Arc<AclBinding>,
    operation: AclOperation,
    permission: AclPermissionType,
    any_host: bool,
}

impl Entry {
    fn new(id: Uuid, acl: Arc<AclBinding>) -> Entry {
        Entry {
            id,
            operation: acl.operation,
            permission: acl.permission_type,
            any_host: acl.host == WILDCARD_HOST,
            acl,
        }
    }

    /// Whether this ACL applies to a client at `host`.
    fn applies_to_host(&self, host: &str) -> bool {
        self.any_host || self.acl.host == host
    }
}

/// The ACLs naming one resource pattern, by principal (`User:*` is one of them): a decision
/// reads only its principal's and `User:*`'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ResourceAcls {
    by_principal: std::collections::HashMap<String, Vec<Entry>, FastHash>,
}

impl ResourceAcls {
    fn is_empty(&self) -> bool {
        self.by_principal.is_empty()
    }

    fn push(&mut self, id: Uuid, acl: Arc<AclBinding>) {
        self.by_principal
            .entry(acl.principal.clone())
            .or_default()
            .push(Entry::new(id, acl));
    }

    fn remove(&mut self, id: Uuid, principal: &str) {
        if let Some(list) = self.by_principal.get_mut(principal) {
            list.retain(|e| e.id != id);
            if list.is_empty() {
                self.by_principal.remove(principal);
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.by_principal.values().flatten()
    }

    /// Whether `f` returns true for an ACL of `principal` or of `User:*`.
    fn any_of(&self, principal: &str, f: &mut impl FnMut(&Entry) -> bool) -> bool {
        let mine = self.by_principal.get(principal).into_iter().flatten();
        let everyone = if principal == WILDCARD_PRINCIPAL {
            None
        } else {
            self.by_principal.get(WILDCARD_PRINCIPAL)
        };
        mine.chain(everyone.into_iter().flatten()).any(f)
    }
}

type Entries = Arc<ResourceAcls>;

/// aHash with fixed keys: the index's maps hash resource names and principals (nothing an
/// attacker chooses to collide could do worse than slow its own decisions), and fixed keys
/// keep equal images equal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FastHash;

impl std::hash::BuildHasher for FastHash {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        ahash::RandomState::with_seeds(0x636f, 0x7275, 0x6d61, 0x636c).build_hasher()
    }
}

/// A persistent map by name with [`FastHash`].
type NameMap = imbl::GenericHashMap<String, Entries, FastHash, imbl::shared_ptr::DefaultSharedPtr>;

/// The ACLs of one resource type, indexed for decisions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct TypeIndex {
    literal: NameMap,
    prefixed: NameMap,
    /// The lengths of the prefixes in `prefixed`, ascending, with how many prefixes have each.
    prefix_lens: Arc<Vec<(usize, usize)>>,
    /// Which (length, prefix) pairs `prefixed` may hold: a decision skips the map's lookup
    /// for a cut of the name that no prefix can be.
    prefix_filter: PrefixFilter,
}

/// Slots of a [`PrefixFilter`], as a power of two.
const PREFIX_FILTER_BITS: u32 = 16;

/// A counting filter of the prefixes of a [`TypeIndex`]: per slot, how many prefixes hash
/// there ([`prefix_hash`] of the prefix, mixed with its length). A zero says a cut of a name
/// is no prefix, without the lookup in the persistent map (a few dependent cache misses at
/// 100,000 ACLs); a count above zero says maybe. It is derived from `prefixed`, so two
/// indexes are equal whatever their filters (one that held a prefix and lost it keeps its
/// slots allocated).
#[derive(Clone, Debug, Default)]
struct PrefixFilter(Arc<Vec<u32>>);

impl PartialEq for PrefixFilter {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PrefixFilter {}

/// One step of FNV-1a over a name's bytes: the hash of each prefix comes from the previous
/// one, so a decision hashes the name once for all its cuts.
fn prefix_hash_step(h: u64, byte: u8) -> u64 {
    (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
}

const PREFIX_HASH_START: u64 = 0xcbf2_9ce4_8422_2325;

fn prefix_hash(prefix: &str) -> u64 {
    prefix.bytes().fold(PREFIX_HASH_START, prefix_hash_step)
}

impl PrefixFilter {
    fn slot(len: usize, hash: u64) -> usize {
        let mixed = (hash ^ (len as u64).wrapping_mul(0xff51_afd7_ed55_8ccd))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> (64 - PREFIX_FILTER_BITS)) as usize
    }

    fn add(&mut self, prefix: &str) {
        let counts = Arc::make_mut(&mut self.0);
        if counts.is_empty() {
            counts.resize(1 << PREFIX_FILTER_BITS, 0);
        }
        counts[Self::slot(prefix.len(), prefix_hash(prefix))] += 1;
    }

    fn remove(&mut self, prefix: &str) {
        let counts = Arc::make_mut(&mut self.0);
        if let Some(c) = counts.get_mut(Self::slot(prefix.len(), prefix_hash(prefix))) {
            *c -= 1;
        }
    }

    /// Whether a prefix of length `len` whose [`prefix_hash`] is `hash` may be present.
    fn may_hold(&self, len: usize, hash: u64) -> bool {
        self.0.get(Self::slot(len, hash)).is_some_and(|&c| c > 0)
    }
}

impl TypeIndex {
    fn map(&mut self, p: PatternType) -> &mut NameMap {
        match p {
            PatternType::Literal => &mut self.literal,
            PatternType::Prefixed => &mut self.prefixed,
        }
    }

    fn insert(&mut self, id: Uuid, acl: Arc<AclBinding>) {
        let name = acl.resource_name.clone();
        let pattern = acl.pattern_type;
        let map = self.map(pattern);
        let new_key = !map.contains_key(&name);
        Arc::make_mut(map.entry(name.clone()).or_default()).push(id, acl);
        if pattern == PatternType::Prefixed && new_key {
            self.prefix_filter.add(&name);
            let lens = Arc::make_mut(&mut self.prefix_lens);
            match lens.binary_search_by_key(&name.len(), |(l, _)| *l) {
                Ok(i) => lens[i].1 += 1,
                Err(i) => lens.insert(i, (name.len(), 1)),
            }
        }
    }

    fn remove(&mut self, id: Uuid, acl: &AclBinding) {
        let pattern = acl.pattern_type;
        let map = self.map(pattern);
        let Some(entries) = map.get_mut(acl.resource_name.as_str()) else {
            return;
        };
        Arc::make_mut(entries).remove(id, &acl.principal);
        if !entries.is_empty() {
            return;
        }
        map.remove(acl.resource_name.as_str());
        if pattern == PatternType::Prefixed {
            self.prefix_filter.remove(&acl.resource_name);
            let lens = Arc::make_mut(&mut self.prefix_lens);
            if let Ok(i) = lens.binary_search_by_key(&acl.resource_name.len(), |(l, _)| *l) {
                lens[i].1 -= 1;
                if lens[i].1 == 0 {
                    lens.remove(i);
                }
            }
        }
    }

    /// Calls `f` with every ACL of `principal` (or `User:*`) that applies to the resource
    /// `name`, until it returns true (then: `(true, true)`); the first is whether any ACL (of
    /// anybody) applies to it.
    fn visit(
        &self,
        name: &str,
        principal: &str,
        mut f: impl FnMut(&Entry) -> bool,
    ) -> (bool, bool) {
        let mut found = false;
        let lists = [
            self.literal.get(name),
            if name == WILDCARD_RESOURCE {
                None
            } else {
                self.literal.get(WILDCARD_RESOURCE)
            },
        ];
        for list in lists.into_iter().flatten() {
            found = true;
            if list.any_of(principal, &mut f) {
                return (true, true);
            }
        }
        let bytes = name.as_bytes();
        let (mut hash, mut hashed) = (PREFIX_HASH_START, 0);
        for &(len, _) in self.prefix_lens.iter() {
            if len > name.len() {
                break;
            }
            while hashed < len {
                hash = prefix_hash_step(hash, bytes[hashed]);
                hashed += 1;
            }
            if !name.is_char_boundary(len) || !self.prefix_filter.may_hold(len, hash) {
                continue;
            }
            if let Some(list) = self.prefixed.get(&name[..len]) {
                found = true;
                if list.any_of(principal, &mut f) {
                    return (true, true);
                }
            }
        }
        (found, false)
    }
}

/// Every ACL of the image, by id and indexed for decisions. Cloning is O(1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AclsImage {
    by_id: imbl::OrdMap<Uuid, Arc<AclBinding>>,
    /// By [`ResourceType::code`] - 2.
    index: [TypeIndex; 6],
}

fn slot(t: ResourceType) -> usize {
    (t.code() - 2) as usize
}

impl AclsImage {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn get(&self, id: Uuid) -> Option<&AclBinding> {
        self.by_id.get(&id).map(|a| &**a)
    }

    /// Whether `other` is this very image (a clone of it, unchanged since): O(1).
    pub fn same(&self, other: &AclsImage) -> bool {
        self.by_id.ptr_eq(&other.by_id)
    }

    pub fn contains_id(&self, id: Uuid) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Every ACL with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (Uuid, &AclBinding)> + '_ {
        self.by_id.iter().map(|(id, a)| (*id, &**a))
    }

    /// The id of an ACL equal to `acl`, if any (looked up in the index).
    pub fn find(&self, acl: &AclBinding) -> Option<Uuid> {
        let t = &self.index[slot(acl.resource_type)];
        let map = match acl.pattern_type {
            PatternType::Literal => &t.literal,
            PatternType::Prefixed => &t.prefixed,
        };
        map.get(acl.resource_name.as_str())?
            .iter()
            .find(|e| *e.acl == *acl)
            .map(|e| e.id)
    }

    /// The ACLs passing `filter`, with their ids, in id order.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclFilter,
    ) -> impl Iterator<Item = (Uuid, &'a AclBinding)> + 'a {
        self.iter().filter(move |(_, a)| filter.matches(a))
    }

    /// Adds an ACL (an AccessControlEntryRecord). Checked by the caller: a new id.
    pub(crate) fn replay_create(&mut self, id: Uuid, acl: AclBinding) {
        let acl = Arc::new(acl);
        self.index[slot(acl.resource_type)].insert(id, acl.clone());
        self.by_id.insert(id, acl);
    }

    /// [`Self::replay_create`] for other crates' tests and benches (the image changes only by
    /// replay).
    #[doc(hidden)]
    pub fn replay_create_for_tests(&mut self, id: Uuid, acl: AclBinding) {
        self.replay_create(id, acl);
    }

    /// Removes the ACL `id` (a RemoveAccessControlEntryRecord); false when there is none.
    pub(crate) fn replay_remove(&mut self, id: Uuid) -> bool {
        let Some(acl) = self.by_id.remove(&id) else {
            return false;
        };
        self.index[slot(acl.resource_type)].remove(id, &acl);
        true
    }

    /// Checks that the index holds exactly the ACLs by id (tests and the simulator).
    pub fn check_structure(&self) {
        let mut indexed = 0;
        for (i, t) in self.index.iter().enumerate() {
            for (pattern, map) in [
                (PatternType::Literal, &t.literal),
                (PatternType::Prefixed, &t.prefixed),
            ] {
                for (name, entries) in map.iter() {
                    assert!(!entries.is_empty(), "empty ACL list kept for {name:?}");
                    for e in entries.iter() {
                        let (id, a) = (&e.id, &e.acl);
                        assert_eq!(*e, Entry::new(*id, a.clone()), "inline fields of {id}");
                        indexed += 1;
                        assert_eq!(self.by_id.get(id), Some(a), "indexed ACL {id} by id");
                        assert_eq!(slot(a.resource_type), i);
                        assert_eq!(a.pattern_type, pattern);
                        assert_eq!(&a.resource_name, name);
                    }
                }
            }
            let mut lens: Vec<(usize, usize)> = Vec::new();
            for name in t.prefixed.keys() {
                match lens.binary_search_by_key(&name.len(), |(l, _)| *l) {
                    Ok(i) => lens[i].1 += 1,
                    Err(i) => lens.insert(i, (name.len(), 1)),
                }
            }
            assert_eq!(*t.prefix_lens, lens, "prefix lengths");
            let mut counts = vec![0u32; 1 << PREFIX_FILTER_BITS];
            for name in t.prefixed.keys() {
                counts[PrefixFilter::slot(name.len(), prefix_hash(name))] += 1;
            }
            if t.prefix_filter.0.is_empty() {
                assert!(t.prefixed.is_empty(), "prefixes without a filter");
            } else {
                assert_eq!(*t.prefix_filter.0, counts, "prefix filter counts");
            }
        }
        assert_eq!(indexed, self.by_id.len(), "every ACL indexed once");
    }
}

/// The authorizer's settings (Kafka's keys).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Kafka's `super.users` value: principals separated by `;` (blanks around them ignored).
    pub fn parse_super_users(value: &str) -> Vec<String> {
        value
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// Whether an ALLOW ACL of `granted` allows `op` (Kafka's implications).
fn allow_implies(granted: AclOperation, op: AclOperation) -> bool {
    use AclOperation as O;
    granted == op
        || granted == O::All
        || (op == O::Describe && matches!(granted, O::Read | O::Write | O::Delete | O::Alter))
        || (op == O::DescribeConfigs && granted == O::AlterConfigs)
}

/// A decision's inputs besides the resource.
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    /// `Type:name`.
    pub principal: &'a str,
    /// The client's address as text (an IP).
    pub host: &'a str,
}

/// Kafka's StandardAuthorizer over an [`AclsImage`]: see the module doc.
#[derive(Clone, Debug, Default)]
pub struct Authorizer {
    pub config: AuthorizerConfig,
    pub acls: AclsImage,
}

impl Authorizer {
    pub fn new(config: AuthorizerConfig, acls: AclsImage) -> Authorizer {
        Authorizer { config, acls }
    }

    /// Whether `who` may do `op` on the resource `name` of type `resource_type`.
    pub fn authorize(
        &self,
        who: Requester<'_>,
        op: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.config.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let mut allowed = false;
        let (found, denied) =
            self.acls.index[slot(resource_type)].visit(name, who.principal, |e| {
                if !e.applies_to_host(who.host) {
                    return false;
                }
                match e.permission {
                    AclPermissionType::Deny => {
                        e.operation == op || e.operation == AclOperation::All
                    }
                    AclPermissionType::Allow => {
                        allowed |= allow_implies(e.operation, op);
                        false
                    }
                }
            });
        if denied {
            return false;
        }
        if allowed {
            return true;
        }
        !found && self.config.allow_everyone_if_no_acl_found
    }
}

/// A request, or one item of it, refused by the authorizer: who asked and the permission it
/// lacks. Answers carry it (`ApiError::AuthorizationFailed` for one item of a request that
/// answers per item, `corum_protocol::RpcError::AuthorizationFailed` for a whole request), so
/// a client can say which ACL is missing. Its message starts with Kafka's message for the
/// code ([`AuthorizationFailure::kafka_error_code`]: `Topic authorization failed`, `Cluster
/// authorization failed`, ...) and names the permission:
/// `Cluster authorization failed: User:CN=tenant,O=corum is not authorized to ALTER on CLUSTER kafka-cluster`.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(derive(Debug))]
pub struct AuthorizationFailure {
    /// The requester's principal, as its listener derived it (`User:CN=tenant,O=corum`,
    /// `User:ANONYMOUS`).
    pub principal: String,
    /// The operation it may not do.
    pub operation: AclOperation,
    /// On what.
    pub resource_type: ResourceType,
    pub resource_name: String,
}

impl AuthorizationFailure {
    /// Kafka's code for a refusal on this resource type: TOPIC_AUTHORIZATION_FAILED (29),
    /// GROUP_ (30), CLUSTER_ (31), TRANSACTIONAL_ID_ (53), DELEGATION_TOKEN_ (65); a user
    /// resource is the cluster's (Kafka authorizes its user APIs on the cluster).
    pub fn kafka_error_code(&self) -> i16 {
        match self.resource_type {
            ResourceType::Topic => 29,
            ResourceType::Group => 30,
            ResourceType::Cluster | ResourceType::User => 31,
            ResourceType::TransactionalId => 53,
            ResourceType::DelegationToken => 65,
        }
    }

    /// Kafka's message for [`AuthorizationFailure::kafka_error_code`], without its full stop.
    fn kafka_message(&self) -> &'static str {
        match self.resource_type {
            ResourceType::Topic => "Topic authorization failed",
            ResourceType::Group => "Group authorization failed",
            ResourceType::Cluster | ResourceType::User => "Cluster authorization failed",
            ResourceType::TransactionalId => "Transactional Id authorization failed",
            ResourceType::DelegationToken => "Delegation Token authorization failed",
        }
    }
}

impl std::fmt::Display for AuthorizationFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} is not authorized to {} on {} {}",
            self.kafka_message(),
            self.principal,
            self.operation,
            self.resource_type,
            self.resource_name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn acl(
        t: ResourceType,
        name: &str,
        p: PatternType,
        principal: &str,
        op: AclOperation,
        perm: AclPermissionType,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission_type: perm,
        }
    }

    fn image(acls: &[AclBinding]) -> AclsImage {
        let mut img = AclsImage::default();
        for (i, a) in acls.iter().enumerate() {
            img.replay_create(Uuid([i as u8 + 1; 16]), a.clone());
        }
        img.check_structure();
        img
    }

    fn alice() -> Requester<'static> {
        Requester {
            principal: "User:alice",
            host: "10.0.0.1",
        }
    }

    use AclOperation as O;
    use AclPermissionType::{Allow, Deny};
    use PatternType::{Literal, Prefixed};
    use ResourceType::{Cluster, Group, Topic};

    #[test]
    fn codes_round_trip_and_names_parse() {
        for t in ResourceType::ALL_VALUES {
            assert_eq!(ResourceType::from_code(t.code()), Some(*t));
            assert_eq!(ResourceType::parse(&t.name().to_lowercase()), Some(*t));
        }
        for o in AclOperation::ALL_VALUES {
            assert_eq!(AclOperation::from_code(o.code()), Some(*o));
        }
        assert_eq!(
            AclOperation::parse("describe-configs"),
            Some(O::DescribeConfigs)
        );
        assert_eq!(ResourceType::from_code(codes::ANY), None);
        assert_eq!(PatternType::from_code(codes::MATCH), None);
        assert_eq!(AclPermissionType::from_code(0), None);
    }

    #[test]
    fn deny_wins_over_allow() {
        let a = Authorizer::new(
            AuthorizerConfig::default(),
            image(&[
                acl(Topic, "orders", Literal, "User:alice", O::Read, Allow),
                acl(Topic, "ord", Prefixed, "User:*", O::Read, Deny),
            ]),
        );
        assert!(!a.authorize(alice(), O::Read, Topic, "orders"));
        // The deny is of READ only: DESCRIBE (implied by the READ allowed) stays allowed.
        assert!(a.authorize(alice(), O::Describe, Topic, "orders"));
    }

    #[test]
    fn prefixed_literal_and_wildcard_names_match() {
        let a = Authorizer::new(
            AuthorizerConfig::default(),
            image(&[
                acl(Topic, "pay-", Prefixed, "User:alice", O::Write, Allow),
                acl(Topic, "*", Literal, "User:alice", O::Read, Allow),
                acl(Group, "g1", Literal, "User:alice", O::Read, Allow),
            ]),
        );
        assert!(a.authorize(alice(), O::Write, Topic, "pay-eu"));
        assert!(a.authorize(alice(), O::Write, Topic, "pay-"));
        assert!(!a.authorize(alice(), O::Write, Topic, "pay"));
        assert!(!a.authorize(alice(), O::Write, Topic, "other"));
        assert!(a.authorize(alice(), O::Read, Topic, "anything"));
        assert!(a.authorize(alice(), O::Read, Group, "g1"));
        assert!(!a.authorize(alice(), O::Read, Group, "g2"));
        // Another resource type is another index.
        assert!(!a.authorize(alice(), O::Read, ResourceType::TransactionalId, "g1"));
    }

    #[test]
    fn implications_follow_kafka() {
        for (granted, implied) in [
            (O::Read, O::Describe),
            (O::Write, O::Describe),
            (O::Delete, O::Describe),
            (O::Alter, O::Describe),
            (O::AlterConfigs, O::DescribeConfigs),
        ] {
            let a = Authorizer::new(
                AuthorizerConfig::default(),
                image(&[acl(Topic, "t", Literal, "User:alice", granted, Allow)]),
            );
            assert!(
                a.authorize(alice(), implied, Topic, "t"),
                "{granted} implies {implied}"
            );
            assert!(!a.authorize(alice(), O::Create, Topic, "t"));
        }
        let all = Authorizer::new(
            AuthorizerConfig::default(),
            image(&[acl(
                Cluster,
                CLUSTER_NAME,
                Literal,
                "User:alice",
                O::All,
                Allow,
            )]),
        );
        for op in O::ALL_VALUES {
            assert!(all.authorize(alice(), *op, Cluster, CLUSTER_NAME));
        }
        // DESCRIBE does not imply READ; a deny of ALL denies everything.
        let a = Authorizer::new(
            AuthorizerConfig::default(),
            image(&[
                acl(Topic, "t", Literal, "User:alice", O::Describe, Allow),
                acl(Topic, "u", Literal, "User:alice", O::All, Allow),
                acl(Topic, "u", Literal, "User:*", O::All, Deny),
            ]),
        );
        assert!(!a.authorize(alice(), O::Read, Topic, "t"));
        assert!(!a.authorize(alice(), O::Describe, Topic, "u"));
    }

    #[test]
    fn principals_and_hosts_match_exactly_or_by_wildcard() {
        let mut by_host = acl(Topic, "t", Literal, "User:alice", O::Read, Allow);
        by_host.host = "10.0.0.2".into();
        let a = Authorizer::new(
            AuthorizerConfig::default(),
            image(&[by_host, acl(Topic, "u", Literal, "User:*", O::Read, Allow)]),
        );
        assert!(!a.authorize(alice(), O::Read, Topic, "t"));
        let other_host = Requester {
            principal: "User:alice",
            host: "10.0.0.2",
        };
        assert!(a.authorize(other_host, O::Read, Topic, "t"));
        let bob = Requester {
            principal: "User:bob",
            host: "10.0.0.2",
        };
        assert!(!a.authorize(bob, O::Read, Topic, "t"));
        assert!(a.authorize(bob, O::Read, Topic, "u"));
    }

    #[test]
    fn super_users_and_allow_everyone() {
        let acls = image(&[acl(Topic, "t", Literal, "User:bob", O::Read, Allow)]);
        let open = Authorizer::new(
            AuthorizerConfig {
                super_users: AuthorizerConfig::parse_super_users(" User:root ; User:alice;"),
                allow_everyone_if_no_acl_found: false,
            },
            acls.clone(),
        );
        assert_eq!(open.config.super_users, ["User:root", "User:alice"]);
        assert!(open.authorize(alice(), O::Delete, Topic, "t"));
        let closed = Authorizer::new(AuthorizerConfig::default(), acls.clone());
        assert!(!closed.authorize(alice(), O::Read, Topic, "t"));
        assert!(!closed.authorize(alice(), O::Read, Topic, "no-acl"));
        let everyone = Authorizer::new(
            AuthorizerConfig {
                super_users: vec![],
                allow_everyone_if_no_acl_found: true,
            },
            acls,
        );
        // An ACL on the resource (for someone else) means no fallback.
        assert!(!everyone.authorize(alice(), O::Read, Topic, "t"));
        assert!(everyone.authorize(alice(), O::Read, Topic, "no-acl"));
    }

    #[test]
    fn validation_is_kafkas() {
        let good = acl(Topic, "t", Literal, "User:a", O::Read, Allow).to_raw();
        assert!(AclBinding::validate(&good).is_ok());
        let bad = |f: &dyn Fn(&mut AclBindingV1)| {
            let mut r = good.clone();
            f(&mut r);
            AclBinding::validate(&r).unwrap_err()
        };
        bad(&|r| r.resource_type = codes::ANY);
        bad(&|r| r.pattern_type = codes::MATCH);
        bad(&|r| r.pattern_type = codes::ANY);
        bad(&|r| r.operation = codes::ANY);
        bad(&|r| r.operation = codes::UNKNOWN);
        bad(&|r| r.permission_type = codes::ANY);
        bad(&|r| r.resource_name.clear());
        bad(&|r| r.principal = "alice".into());
        bad(&|r| r.host.clear());
        bad(&|r| {
            r.resource_type = Cluster.code();
            r.resource_name = "c".into()
        });
        let unknown_filter = AclFilterV1 {
            resource_type: codes::UNKNOWN,
            resource_name: None,
            pattern_type: codes::ANY,
            principal: None,
            host: None,
            operation: codes::ANY,
            permission_type: codes::ANY,
        };
        assert!(AclFilter::validate(&unknown_filter).is_err());
    }

    #[test]
    fn filters_match_any_match_and_exact() {
        let lit = acl(Topic, "orders", Literal, "User:a", O::Read, Allow);
        let pre = acl(Topic, "ord", Prefixed, "User:a", O::Read, Allow);
        let star = acl(Topic, "*", Literal, "User:b", O::Write, Deny);
        let f = |pattern: i8, name: Option<&str>| {
            AclFilter::validate(&AclFilterV1 {
                resource_type: Topic.code(),
                resource_name: name.map(str::to_owned),
                pattern_type: pattern,
                principal: None,
                host: None,
                operation: codes::ANY,
                permission_type: codes::ANY,
            })
            .unwrap()
        };
        let which = |f: &AclFilter| [&lit, &pre, &star].map(|a| f.matches(a));
        assert_eq!(which(&f(codes::MATCH, Some("orders"))), [true, true, true]);
        assert_eq!(which(&f(codes::ANY, Some("orders"))), [true, false, false]);
        assert_eq!(which(&f(Literal.code(), None)), [true, false, true]);
        assert_eq!(
            which(&f(Prefixed.code(), Some("ord"))),
            [false, true, false]
        );
        assert_eq!(which(&AclFilter::any()), [true, true, true]);
    }

    fn any_acl() -> impl Strategy<Value = AclBinding> {
        (
            prop::sample::select(vec![Topic, Group]),
            "[ab]{1,4}",
            prop::sample::select(vec![Literal, Prefixed]),
            prop::sample::select(vec!["User:a", "User:b", "User:*"]),
            prop::sample::select(vec!["*", "h1"]),
            prop::sample::select(vec![O::Read, O::Write, O::Describe, O::All]),
            prop::sample::select(vec![Allow, Deny]),
        )
            .prop_map(|(t, name, p, who, host, op, perm)| {
                let mut a = acl(t, &name, p, who, op, perm);
                if p == Literal && name == "bbbb" {
                    a.resource_name = "*".into();
                }
                a.host = host.into();
                a
            })
    }

    /// The spec of the decision, straight from the module doc, over a plain list.
    fn reference(
        acls: &[AclBinding],
        config: &AuthorizerConfig,
        who: Requester<'_>,
        op: AclOperation,
        t: ResourceType,
        name: &str,
    ) -> bool {
        if config.super_users.iter().any(|s| s == who.principal) {
            return true;
        }
        let on: Vec<&AclBinding> = acls
            .iter()
            .filter(|a| a.resource_type == t && a.applies_to(name))
            .collect();
        let mine: Vec<&&AclBinding> = on
            .iter()
            .filter(|a| a.principal == who.principal || a.principal == "User:*")
            .filter(|a| a.host == who.host || a.host == "*")
            .collect();
        if mine
            .iter()
            .any(|a| a.permission_type == Deny && (a.operation == op || a.operation == O::All))
        {
            return false;
        }
        if mine
            .iter()
            .any(|a| a.permission_type == Allow && allow_implies(a.operation, op))
        {
            return true;
        }
        on.is_empty() && config.allow_everyone_if_no_acl_found
    }

    proptest! {
        /// The indexed decision equals the reference over any ACLs, after any removals, and
        /// the index stays consistent.
        #[test]
        fn indexed_decision_equals_the_reference(
            acls in prop::collection::vec(any_acl(), 0..24),
            removed in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
            everyone in any::<bool>(),
            queries in prop::collection::vec((
                prop::sample::select(vec!["User:a", "User:b", "User:c"]),
                prop::sample::select(vec!["h1", "h2"]),
                prop::sample::select(vec![O::Read, O::Write, O::Describe, O::Alter]),
                prop::sample::select(vec![Topic, Group]),
                "[ab]{0,5}",
            ), 1..16),
        ) {
            let mut img = AclsImage::default();
            let mut live: Vec<(Uuid, AclBinding)> = Vec::new();
            for (i, a) in acls.iter().enumerate() {
                let id = Uuid([i as u8 + 1; 16]);
                img.replay_create(id, a.clone());
                live.push((id, a.clone()));
            }
            for r in removed {
                if live.is_empty() {
                    break;
                }
                let (id, _) = live.remove(r.index(live.len()));
                prop_assert!(img.replay_remove(id));
            }
            img.check_structure();
            let config = AuthorizerConfig {
                super_users: vec!["User:c".into()],
                allow_everyone_if_no_acl_found: everyone,
            };
            let list: Vec<AclBinding> = live.iter().map(|(_, a)| a.clone()).collect();
            for (id, a) in &live {
                prop_assert_eq!(img.find(a).map(|found| img.get(found) == Some(a)), Some(true));
                prop_assert!(img.contains_id(*id));
            }
            let auth = Authorizer::new(config.clone(), img);
            for (p, h, op, t, name) in queries {
                let who = Requester { principal: p, host: h };
                prop_assert_eq!(
                    auth.authorize(who, op, t, &name),
                    reference(&list, &config, who, op, t, &name),
                    "{} {} {} {:?} {:?}", p, h, op, t, name
                );
            }
        }
    }
}
