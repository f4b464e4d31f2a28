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

/// A resource as the image's map keeps it: shared, so that copying a map node on write (the
/// image is persistent: the committed and in-flight images share nodes, and each write
/// copies the nodes on its path) bumps a count per key instead of copying every name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ResourceKey(Arc<ConfigResource>);

impl std::borrow::Borrow<ConfigResource> for ResourceKey {
    fn borrow(&self) -> &ConfigResource {
        &self.0
    }
}

/// Explicitly set configs by resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigsImage {
    by_resource: OrdMap<ResourceKey, Arc<BTreeMap<String, String>>>,
}

impl ConfigsImage {
    /// The explicitly set configs of `resource` (empty if none).
    pub fn get(&self, resource: &ConfigResource) -> Option<&BTreeMap<String, String>> {
        self.by_resource.get(resource).map(|m| &**m)
    }

    pub fn value(&self, resource: &ConfigResource, key: &str) -> Option<&str> {
        self.get(resource)
            .and_then(|m| m.get(key))
            .map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ConfigResource, &BTreeMap<String, String>)> + '_ {
        self.by_resource.iter().map(|(k, v)| (&*k.0, &**v))
    }

    /// Sets (`value` is `Some`) or deletes one key of one resource.
    pub(crate) fn replay(
        &mut self,
        resource_type: ConfigResourceType,
        resource_name: &str,
        key: &str,
        value: Option<&str>,
    ) {
        let resource = ConfigResource {
            resource_type,
            name: resource_name.to_owned(),
        };
        match value {
            Some(v) => {
                if !self.by_resource.contains_key(&resource) {
                    self.by_resource
                        .insert(ResourceKey(Arc::new(resource.clone())), Arc::default());
                }
                let entry = self
                    .by_resource
                    .get_mut(&resource)
                    .expect("inserted above if missing");
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
                if let Some(map) = self.by_resource.get_mut(&resource) {
                    Arc::make_mut(map).remove(key);
                    if map.is_empty() {
                        self.by_resource.remove(&resource);
                    }
                }
            }
        }
    }

    /// Drops every config of a removed topic.
    pub(crate) fn remove_topic(&mut self, name: &str) {
        self.by_resource.remove(&ConfigResource::topic(name));
    }
}
