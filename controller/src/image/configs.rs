//! Dynamic configs: per resource (a topic by name, a broker by id, or the cluster-wide broker
//! default) a map of explicitly set keys.

use std::collections::BTreeMap;
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

/// One resource type's explicitly set configs, by resource name.
type ByName = OrdMap<Name, Arc<BTreeMap<String, String>>>;

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

    /// The explicitly set configs of `resource` (empty if none).
    pub fn get(&self, resource: &ConfigResource) -> Option<&BTreeMap<String, String>> {
        self.of(resource.resource_type)
            .get(resource.name.as_str())
            .map(|m| &**m)
    }

    pub fn value(&self, resource: &ConfigResource, key: &str) -> Option<&str> {
        self.get(resource)
            .and_then(|m| m.get(key))
            .map(String::as_str)
    }

    /// Every resource with configs set, in the order of [`ConfigResource`] (topics, then
    /// brokers; by name within each), with its type, name and configs.
    pub fn iter(
        &self,
    ) -> impl Iterator<Item = (ConfigResourceType, &str, &BTreeMap<String, String>)> + '_ {
        let of = |rt: ConfigResourceType| {
            self.of(rt)
                .iter()
                .map(move |(name, m)| (rt, name.as_str(), &**m))
        };
        of(ConfigResourceType::Topic).chain(of(ConfigResourceType::Broker))
    }

    /// Sets (`value` is `Some`) or deletes one key of one resource.
    pub(crate) fn replay(
        &mut self,
        resource_type: ConfigResourceType,
        resource_name: &str,
        key: &str,
        value: Option<&str>,
    ) {
        let by_name = self.of_mut(resource_type);
        match value {
            Some(v) => {
                // One lookup for a resource that has configs (the common case).
                let Some(entry) = by_name.get_mut(resource_name) else {
                    let map = BTreeMap::from([(key.to_owned(), v.to_owned())]);
                    by_name.insert(Name::new(resource_name), Arc::new(map));
                    return;
                };
                let map = Arc::make_mut(entry);
                // A key set again (the common case) keeps its allocations: no new key, and
                // the value's buffer is reused.
                match map.get_mut(key) {
                    Some(old) => {
                        old.clear();
                        old.push_str(v);
                    }
                    None => {
                        map.insert(key.to_owned(), v.to_owned());
                    }
                }
            }
            None => {
                if let Some(map) = by_name.get_mut(resource_name) {
                    Arc::make_mut(map).remove(key);
                    if map.is_empty() {
                        by_name.remove(resource_name);
                    }
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
    use super::*;
    use proptest::prelude::*;

    /// What the image holds, as the plainest map of resources to their keys.
    type Model = BTreeMap<ConfigResource, BTreeMap<String, String>>;

    fn op() -> impl Strategy<Value = (ConfigResourceType, String, String, Option<String>)> {
        let resource_type = prop_oneof![
            Just(ConfigResourceType::Topic),
            Just(ConfigResourceType::Broker)
        ];
        // Short names (kept inline) and names past 23 bytes (kept shared), the empty default.
        let name = prop_oneof![
            Just(String::new()),
            "[0-9]{1,3}",
            "[a-c]{1,2}",
            "long-topic-name-past-inline-[a-c]{1,2}",
        ];
        let key = prop_oneof![
            Just("retention.ms".to_owned()),
            Just("cleanup.policy".to_owned())
        ];
        let value = proptest::option::of("[0-9]{1,2}");
        (resource_type, name, key, value)
    }

    proptest! {
        /// Sets and deletes leave the image holding what the model holds, read back by
        /// resource and listed in `ConfigResource` order (topics first, names in order).
        #[test]
        fn replay_keeps_what_a_plain_map_keeps(ops in proptest::collection::vec(op(), 0..60)) {
            let mut image = ConfigsImage::default();
            let mut model = Model::new();
            for (rt, name, key, value) in &ops {
                image.replay(*rt, name, key, value.as_deref());
                let resource = ConfigResource { resource_type: *rt, name: name.clone() };
                match value {
                    Some(v) => {
                        model.entry(resource).or_default().insert(key.clone(), v.clone());
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
            let listed: Vec<(ConfigResource, BTreeMap<String, String>)> = image
                .iter()
                .map(|(rt, name, m)| {
                    (ConfigResource { resource_type: rt, name: name.to_owned() }, m.clone())
                })
                .collect();
            let expected: Vec<_> = model.clone().into_iter().collect();
            prop_assert_eq!(listed, expected);
            for (resource, keys) in &model {
                prop_assert_eq!(image.get(resource), Some(keys));
            }
        }
    }
}
