//! Dynamic configs: per resource (a topic by name, a broker by id, or the cluster-wide broker
//! default) a map of explicitly set keys.

use std::fmt;
use std::sync::Arc;

use imbl::OrdMap;

use crate::records::ConfigResourceType;

/// What a set of configs belongs to. For brokers `name` is the id in decimal, or empty for the
/// cluster-wide default.
#[derive(
    Clone,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug))]
pub struct ConfigResource {
    pub resource_type: ConfigResourceType,
    pub name: String,
}

impl ConfigResource {
    pub fn topic(name: &str) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: name.to_owned(),
        }
    }
}

/// A resource's name as the image's maps keep it: inline up to 23 bytes (every broker id, most
/// topic names), so a lookup compares names inside the map's nodes without following a pointer
/// per step; longer names are shared, so copying a map node on write (the image is persistent:
/// the committed and in-flight images share nodes, and each write copies the nodes on its path)
/// bumps a count instead of copying the name.
type Name = smol_str::SmolStr;

/// One resource's explicitly set configs: its keys in order, each with its value.
///
/// Copy on write and never changed in place: the image is persistent (the in-flight image and
/// a revert point share each resource's map), so a set or delete builds the resource's next map
/// in one allocation and swaps it in, and a set to the value already held or a delete of an
/// absent key builds nothing. Keys and values are kept inline up to 23 bytes (`log.retention.ms`
/// and most values) and shared past that, so building the next map copies the entries it keeps
/// without allocating for them.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigMap(Arc<[(Name, Name)]>);

impl ConfigMap {
    /// Wraps entries already in key order with no key twice.
    fn from_sorted(entries: Arc<[(Name, Name)]>) -> Self {
        debug_assert!(
            entries.windows(2).all(|w| w[0].0 < w[1].0),
            "config keys in order, each once"
        );
        ConfigMap(entries)
    }

    fn single(key: &str, value: &str) -> Self {
        ConfigMap::from_sorted(Arc::new([(Name::new(key), Name::new(value))]))
    }

    /// Where `key` is (`Ok`), or where it would go (`Err`).
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// What setting (`value` is `Some`) or deleting `key` makes of this map, built in one
    /// allocation (the value's too, past 23 bytes: the other entries are cloned from this map,
    /// inline or shared); `None` when that changes nothing (the value already set, or the key
    /// absent), so nothing is built. Deleting the only key gives the empty map, which allocates
    /// nothing.
    fn edited(&self, key: &str, value: Option<&str>) -> Option<ConfigMap> {
        match (self.position(key), value) {
            (Ok(at), Some(v)) if self.0[at].1 == v => None,
            (Ok(at), Some(v)) => {
                let entry = (self.0[at].0.clone(), Name::new(v));
                Some(self.splice(at, at + 1, Some(entry)))
            }
            (Err(at), Some(v)) => Some(self.splice(at, at, Some((Name::new(key), Name::new(v))))),
            (Err(_), None) => None,
            (Ok(_), None) if self.len() == 1 => Some(ConfigMap::default()),
            (Ok(at), None) => Some(self.splice(at, at + 1, None)),
        }
    }

    /// The entries before `from`, then `entry`, then those from `to` on, in one allocation:
    /// the chained iterator knows its exact length, so the slice is built in place.
    fn splice(&self, from: usize, to: usize, entry: Option<(Name, Name)>) -> Self {
        let entries = self.0[..from]
            .iter()
            .cloned()
            .chain(entry)
            .chain(self.0[to..].iter().cloned())
            .collect();
        ConfigMap::from_sorted(entries)
    }

    /// Sets `key` to `value`: a new map for this handle only, any other handle on the old one
    /// (an older image's) keeps it. Nothing is built when the value is already set.
    pub(crate) fn insert(&mut self, key: &str, value: &str) {
        if let Some(next) = self.edited(key, Some(value)) {
            *self = next;
        }
    }

    /// Deletes `key`, as [`ConfigMap::insert`] sets one. Nothing is built when it is absent.
    pub(crate) fn remove(&mut self, key: &str) {
        if let Some(next) = self.edited(key, None) {
            *self = next;
        }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).ok().map(|i| self.0[i].1.as_str())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Number of keys set.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys with their values, in key order.
    pub fn iter(&self) -> ConfigIter<'_> {
        ConfigIter(self.0.iter())
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Whether `self` and `other` are the same map in memory, not only equal.
    #[cfg(test)]
    fn shares_with(&self, other: &ConfigMap) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The empty map (shares a static empty slice: no allocation).
impl Default for ConfigMap {
    fn default() -> Self {
        ConfigMap(Arc::default())
    }
}

/// A key given more than once keeps its last value, as records replayed in that order would.
impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ConfigMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(Name, Name)> = iter
            .into_iter()
            .map(|(k, v)| (Name::new(k.as_ref()), Name::new(v.as_ref())))
            .collect();
        // Stable, so a key's entries stay in the order given; the first of each run is kept
        // and takes the run's last value.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            same
        });
        ConfigMap::from_sorted(entries.into())
    }
}

/// Shown as a map of keys to values, as a `BTreeMap<String, String>` of the same entries.
impl fmt::Debug for ConfigMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a ConfigMap {
    type Item = (&'a str, &'a str);
    type IntoIter = ConfigIter<'a>;

    fn into_iter(self) -> ConfigIter<'a> {
        self.iter()
    }
}

/// A [`ConfigMap`]'s keys with their values, in key order.
#[derive(Clone, Debug)]
pub struct ConfigIter<'a>(std::slice::Iter<'a, (Name, Name)>);

impl<'a> Iterator for ConfigIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for ConfigIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl ExactSizeIterator for ConfigIter<'_> {}

impl std::iter::FusedIterator for ConfigIter<'_> {}

/// One resource type's explicitly set configs, by resource name. A resource with no key set
/// has no entry.
type ByName = OrdMap<Name, ConfigMap>;

/// Explicitly set configs by resource: one map per resource type, each looked up by the name
/// as a `&str`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigsImage {
    topics: ByName,
    brokers: ByName,
}

impl ConfigsImage {
    fn of(&self, resource_type: ConfigResourceType) -> &ByName {
        match resource_type {
            ConfigResourceType::Topic => &self.topics,
            ConfigResourceType::Broker => &self.brokers,
        }
    }

    fn of_mut(&mut self, resource_type: ConfigResourceType) -> &mut ByName {
        match resource_type {
            ConfigResourceType::Topic => &mut self.topics,
            ConfigResourceType::Broker => &mut self.brokers,
        }
    }

    /// The explicitly set configs of `resource` (`None` if none: never an empty map).
    pub fn get(&self, resource: &ConfigResource) -> Option<&ConfigMap> {
        self.of(resource.resource_type).get(resource.name.as_str())
    }

    pub fn value(&self, resource: &ConfigResource, key: &str) -> Option<&str> {
        self.get(resource).and_then(|m| m.get(key))
    }

    /// Every resource with configs set, in the order of [`ConfigResource`] (topics, then
    /// brokers; by name within each), with its type, name and configs.
    pub fn iter(&self) -> impl Iterator<Item = (ConfigResourceType, &str, &ConfigMap)> + '_ {
        let of = |rt: ConfigResourceType| {
            self.of(rt)
                .iter()
                .map(move |(name, m)| (rt, name.as_str(), m))
        };
        of(ConfigResourceType::Topic).chain(of(ConfigResourceType::Broker))
    }

    /// Sets (`value` is `Some`) or deletes one key of one resource.
    ///
    /// A set is the hot path (the configs workload sets one key per request), so it looks the
    /// resource up once, for writing: that makes the name map's nodes on its path unshared, as
    /// any write does (copying those the revert point still shares, once per batch), and then
    /// builds the resource's next [`ConfigMap`] only if the value changes. A set to the value
    /// already held thus builds and copies no config map; it is rare, too (the alter handlers
    /// leave unchanged keys out of their records), and reading the resource first as well, so
    /// that such a set left the name map's nodes shared too, would cost every set a second
    /// lookup (a quarter of this function's instructions in the service bench). A delete is
    /// rare, so it reads first: a delete of a key not set copies nothing at all.
    pub(crate) fn replay(
        &mut self,
        resource_type: ConfigResourceType,
        resource_name: &str,
        key: &str,
        value: Option<&str>,
    ) {
        let by_name = self.of_mut(resource_type);
        match value {
            Some(v) => match by_name.get_mut(resource_name) {
                Some(map) => {
                    if let Some(next) = map.edited(key, Some(v)) {
                        *map = next;
                    }
                }
                None => {
                    by_name.insert(Name::new(resource_name), ConfigMap::single(key, v));
                }
            },
            None => {
                let Some(next) = by_name
                    .get(resource_name)
                    .and_then(|map| map.edited(key, None))
                else {
                    return;
                };
                if next.is_empty() {
                    by_name.remove(resource_name);
                } else {
                    *by_name
                        .get_mut(resource_name)
                        .expect("the resource was just read") = next;
                }
            }
        }
    }

    /// Drops every config of a removed topic.
    pub(crate) fn remove_topic(&mut self, name: &str) {
        self.topics.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use proptest::prelude::*;

    /// What the image holds, as the plainest map of resources to their keys.
    type Model = BTreeMap<ConfigResource, BTreeMap<String, String>>;

    /// Keys inline and past 23 bytes (kept shared), in an order unlike their sorted one.
    const KEYS: [&str; 5] = [
        "retention.ms",
        "cleanup.policy",
        "log.cleaner.delete.retention.ms",
        "a",
        "max.message.bytes",
    ];

    fn op() -> impl Strategy<Value = (ConfigResourceType, String, String, Option<String>)> {
        let resource_type = prop_oneof![
            Just(ConfigResourceType::Topic),
            Just(ConfigResourceType::Broker)
        ];
        // Short names (kept inline) and names past 23 bytes (kept shared), the empty default;
        // few of them, so that resources gather several keys and lose them again.
        let name = prop_oneof![
            Just(String::new()),
            "[0-2]",
            "[a-b]",
            "long-topic-name-past-inline-[a-b]",
        ];
        let key = proptest::sample::select(&KEYS[..]).prop_map(str::to_owned);
        // Values repeat often (sets that change nothing); some are past 23 bytes.
        let value = proptest::option::weighted(
            0.7,
            prop_oneof!["[0-9]", "value-past-twenty-three-bytes-[0-9]"],
        );
        (resource_type, name, key, value)
    }

    fn apply_to_model(model: &mut Model, resource: ConfigResource, key: &str, value: Option<&str>) {
        match value {
            Some(v) => {
                model
                    .entry(resource)
                    .or_default()
                    .insert(key.to_owned(), v.to_owned());
            }
            None => {
                if let Some(m) = model.get_mut(&resource) {
                    m.remove(key);
                    if m.is_empty() {
                        model.remove(&resource);
                    }
                }
            }
        }
    }

    /// Checks that `image` holds exactly what `model` holds: the resources listed in
    /// `ConfigResource` order, each resource's keys in key order, and every lookup.
    fn check(image: &ConfigsImage, model: &Model) -> Result<(), TestCaseError> {
        let listed: Vec<(ConfigResource, Vec<(String, String)>)> = image
            .iter()
            .map(|(rt, name, m)| {
                let keys = m
                    .iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                (
                    ConfigResource {
                        resource_type: rt,
                        name: name.to_owned(),
                    },
                    keys,
                )
            })
            .collect();
        let expected: Vec<(ConfigResource, Vec<(String, String)>)> = model
            .iter()
            .map(|(r, m)| (r.clone(), m.clone().into_iter().collect()))
            .collect();
        prop_assert_eq!(listed, expected);
        for (resource, keys) in model {
            let map = image.get(resource).expect("a resource with keys has a map");
            prop_assert_eq!(map.len(), keys.len());
            prop_assert!(!map.is_empty());
            prop_assert!(map.keys().eq(keys.keys().map(String::as_str)));
            prop_assert_eq!(format!("{map:?}"), format!("{keys:?}"));
            for key in KEYS {
                let want = keys.get(key).map(String::as_str);
                prop_assert_eq!(map.get(key), want);
                prop_assert_eq!(map.contains_key(key), want.is_some());
                prop_assert_eq!(image.value(resource, key), want);
            }
        }
        Ok(())
    }

    proptest! {
        /// Sets, overwrites and deletes (of present keys, the last key, and absent keys) leave
        /// the image holding what the model holds, read back by resource and key, listed in
        /// `ConfigResource` order (topics first, names in order) and by key within a resource;
        /// a clone taken midway still holds what the model held then.
        #[test]
        fn replay_keeps_what_a_plain_map_keeps(
            ops in proptest::collection::vec(op(), 0..120),
            midway in 0usize..120,
        ) {
            let mut image = ConfigsImage::default();
            let mut model = Model::new();
            let mut earlier = (image.clone(), model.clone());
            for (i, (rt, name, key, value)) in ops.iter().enumerate() {
                if i == midway {
                    earlier = (image.clone(), model.clone());
                }
                image.replay(*rt, name, key, value.as_deref());
                let resource = ConfigResource { resource_type: *rt, name: name.clone() };
                apply_to_model(&mut model, resource, key, value.as_deref());
            }
            check(&image, &model)?;
            check(&earlier.0, &earlier.1)?;
            prop_assert_eq!(image == earlier.0, model == earlier.1);
        }

        /// A map collected from pairs holds what a `BTreeMap` collected from them holds: a
        /// key given twice keeps its last value.
        #[test]
        fn collecting_keeps_what_a_plain_map_keeps(
            pairs in proptest::collection::vec(
                (proptest::sample::select(&KEYS[..]), "[0-9]{1,2}"),
                0..12,
            ),
        ) {
            let map: ConfigMap = pairs.iter().map(|(k, v)| (k, v)).collect();
            let plain: BTreeMap<&str, &str> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            prop_assert!(map.iter().eq(plain.into_iter()));
        }
    }

    fn broker(name: &str) -> ConfigResource {
        ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: name.to_owned(),
        }
    }

    /// Replays a set of `key` on broker `name`.
    fn set_broker(image: &mut ConfigsImage, name: &str, key: &str, value: &str) {
        image.replay(ConfigResourceType::Broker, name, key, Some(value));
    }

    /// A set or delete on one image leaves the maps it shared with a clone as they were.
    #[test]
    fn a_write_leaves_the_map_a_clone_shares_unchanged() {
        let mut image = ConfigsImage::default();
        set_broker(&mut image, "1", "log.retention.ms", "1");
        set_broker(&mut image, "1", "cleanup.policy", "delete");
        let revert_point = image.clone();
        let shared = revert_point.get(&broker("1")).expect("set above").clone();
        assert!(shared.shares_with(image.get(&broker("1")).expect("set above")));

        set_broker(&mut image, "1", "log.retention.ms", "2");
        image.replay(ConfigResourceType::Broker, "1", "cleanup.policy", None);
        set_broker(&mut image, "1", "a.new.key", "x");

        let after = image.get(&broker("1")).expect("keys left");
        assert!(after
            .iter()
            .eq([("a.new.key", "x"), ("log.retention.ms", "2")]));
        let before = revert_point.get(&broker("1")).expect("untouched");
        assert!(before.shares_with(&shared));
        assert!(before
            .iter()
            .eq([("cleanup.policy", "delete"), ("log.retention.ms", "1")]));

        // The same through a map handle.
        let mut copy = shared.clone();
        copy.insert("log.retention.ms", "3");
        copy.remove("cleanup.policy");
        assert!(copy.iter().eq([("log.retention.ms", "3")]));
        assert!(shared
            .iter()
            .eq([("cleanup.policy", "delete"), ("log.retention.ms", "1")]));
    }

    /// A delete of a key not set copies nothing: neither a config map nor the name map's
    /// nodes the image shares with a clone (a revert point). A set to the value already held
    /// builds no config map: the resource keeps the very map the clone holds.
    #[test]
    fn a_write_that_changes_nothing_copies_nothing() {
        let set_both = |image: &mut ConfigsImage| {
            set_broker(image, "1", "log.retention.ms", "1");
            image.replay(
                ConfigResourceType::Topic,
                "t",
                "cleanup.policy",
                Some("compact"),
            );
        };
        let mut image = ConfigsImage::default();
        set_both(&mut image);
        let revert_point = image.clone();

        image.replay(ConfigResourceType::Broker, "1", "cleanup.policy", None);
        image.replay(ConfigResourceType::Broker, "2", "cleanup.policy", None);
        image.replay(ConfigResourceType::Topic, "t", "retention.ms", None);
        image.replay(ConfigResourceType::Topic, "u", "retention.ms", None);
        assert!(image.brokers.ptr_eq(&revert_point.brokers));
        assert!(image.topics.ptr_eq(&revert_point.topics));

        set_both(&mut image);
        assert_eq!(image, revert_point);
        let map = image.get(&broker("1")).expect("set above");
        assert!(map.shares_with(revert_point.get(&broker("1")).expect("set above")));
        let topic = image.get(&ConfigResource::topic("t")).expect("set above");
        assert!(topic.shares_with(
            revert_point
                .get(&ConfigResource::topic("t"))
                .expect("set above")
        ));

        let mut handle = map.clone();
        handle.insert("log.retention.ms", "1");
        handle.remove("absent");
        assert!(handle.shares_with(map));
    }

    /// Deleting a resource's last key removes the resource, as if it had never had one.
    #[test]
    fn deleting_the_last_key_removes_the_resource() {
        let mut image = ConfigsImage::default();
        set_broker(&mut image, "1", "log.retention.ms", "1");
        image.replay(ConfigResourceType::Broker, "1", "log.retention.ms", None);
        assert_eq!(image.get(&broker("1")), None);
        assert_eq!(image, ConfigsImage::default());

        let mut map: ConfigMap = [("k", "v")].into_iter().collect();
        map.remove("k");
        assert!(map.is_empty());
        assert_eq!(map, ConfigMap::default());
    }
}
