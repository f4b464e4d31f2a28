//! Sequential specifications of one key: what a single copy of the state would answer.
//!
//! A [`Model`] has a state and a step function. An operation carries its recorded result, and
//! the step refuses it (`None`) when that result is impossible in the state; an operation of
//! unknown outcome carries no result and the step applies its effect. Values and topic ids are
//! interned per key ([`crate::keys`]) so that states are small and cheap to hash.
//!
//! | model | state | operations |
//! |---|---|---|
//! | [`RegisterModel`]: one config key of one resource | the value (`None`: not set) | write (set or delete), read |
//! | [`TopicModel`]: one topic name | absent, or exists with an id (known or not yet) | create, delete, describe |

use std::fmt::Debug;
use std::hash::Hash;

/// An operation of one key with the times that bound it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timed<O> {
    pub invoke_ns: u64,
    /// `None`: the outcome is unknown, and the operation may take effect at any time after its
    /// invocation, or never.
    pub complete_ns: Option<u64>,
    pub op: O,
}

/// A sequential specification.
///
/// Obligations of an implementation, which the search's shortcuts rely on:
/// - a read (`is_read`) that `step` accepts leaves the state unchanged, or only pins down a
///   part the state left open (a topic id not yet known); and a sequence that a read was
///   part of stays valid without it.
/// - `causes(w, o)` holds exactly when `o`'s result is possible in the state `w` leaves
///   where it changes the state, whatever the state before `w` was; and the state after a
///   non-read depends on that operation alone. The lost-write check needs the "only if";
///   the shrinker's proof ([`crate::shrink`]) needs the "if" and the last clause.
pub trait Model: Sized {
    type State: Clone + Eq + Hash + Debug;
    type Op: Clone + Eq + Debug;

    /// The model for these operations (a model may precompute facts of the whole set, such
    /// as which topic ids some answer named).
    fn for_ops(ops: &[Timed<Self::Op>]) -> Self;
    /// The state before any operation.
    fn init(&self) -> Self::State;
    /// The state after `op`, or `None` if `op`'s recorded result cannot happen in `state`.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;
    /// Whether `op` only observes (changes nothing, whatever its outcome).
    fn is_read(&self, op: &Self::Op) -> bool;
    /// Whether `observer`'s recorded result is possible right after `writer` changed the
    /// state, whatever came before `writer`: `writer` may be the cause of what `observer` saw.
    /// (An unknown-outcome create changes the state only where the topic is absent.)
    fn causes(&self, writer: &Self::Op, observer: &Self::Op) -> bool;
}

/// One config key of one resource: a register of an optional value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterOp {
    /// Set (`Some`, an interned value) or delete (`None`).
    Write(Option<u32>),
    /// A read that saw this value (`None`: not set).
    Read(Option<u32>),
}

/// The register's specification. Its state is the value, `None` before any write.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegisterModel;

impl Model for RegisterModel {
    type State = Option<u32>;
    type Op = RegisterOp;

    fn for_ops(_ops: &[Timed<RegisterOp>]) -> Self {
        RegisterModel
    }

    fn init(&self) -> Option<u32> {
        None
    }

    fn step(&self, state: &Option<u32>, op: &RegisterOp) -> Option<Option<u32>> {
        match *op {
            RegisterOp::Write(value) => Some(value),
            RegisterOp::Read(seen) => (seen == *state).then_some(*state),
        }
    }

    fn is_read(&self, op: &RegisterOp) -> bool {
        matches!(op, RegisterOp::Read(_))
    }

    fn causes(&self, writer: &RegisterOp, observer: &RegisterOp) -> bool {
        match (writer, observer) {
            (RegisterOp::Write(written), RegisterOp::Read(seen)) => written == seen,
            _ => false,
        }
    }
}

/// One topic name: create, delete, describe, with ids interned per name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicOp {
    Create(CreateResult),
    Delete(DeleteResult),
    /// A describe that saw the topic with this id (`None`: absent).
    Describe(Option<u32>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateResult {
    /// Created; the id if the answer named one.
    Created(Option<u32>),
    AlreadyExists,
    /// Unknown outcome: created if absent, else nothing.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteResult {
    Deleted,
    UnknownTopic,
    /// Unknown outcome: absent afterwards either way.
    Unknown,
}

/// A topic name's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TopicState {
    Absent,
    /// Exists; `None` while no answer has named the id of this incarnation of the topic.
    Exists(Option<u32>),
}

/// The topic specification. Topic ids are unique: the controller draws a new one for every
/// creation. So an id that a create's answer named (a *claimed* id) was made by that create,
/// and a creation whose id no answer named can only be one of the other ids.
#[derive(Clone, Debug, Default)]
pub struct TopicModel {
    /// Indexed by interned id: whether a create's answer named it.
    claimed: Vec<bool>,
}

impl TopicModel {
    fn is_claimed(&self, id: u32) -> bool {
        self.claimed.get(id as usize).copied().unwrap_or(false)
    }
}

impl Model for TopicModel {
    type State = TopicState;
    type Op = TopicOp;

    fn for_ops(ops: &[Timed<TopicOp>]) -> Self {
        let mut claimed = Vec::new();
        for op in ops {
            if let TopicOp::Create(CreateResult::Created(Some(id))) = op.op {
                let i = id as usize;
                if claimed.len() <= i {
                    claimed.resize(i + 1, false);
                }
                claimed[i] = true;
            }
        }
        TopicModel { claimed }
    }

    fn init(&self) -> TopicState {
        TopicState::Absent
    }

    fn step(&self, state: &TopicState, op: &TopicOp) -> Option<TopicState> {
        use TopicState::{Absent, Exists};
        match (*op, *state) {
            (TopicOp::Create(CreateResult::Created(id)), Absent) => Some(Exists(id)),
            (TopicOp::Create(CreateResult::Created(_)), Exists(_)) => None,
            (TopicOp::Create(CreateResult::AlreadyExists), Exists(_)) => Some(*state),
            (TopicOp::Create(CreateResult::AlreadyExists), Absent) => None,
            (TopicOp::Create(CreateResult::Unknown), Absent) => Some(Exists(None)),
            (TopicOp::Create(CreateResult::Unknown), Exists(_)) => Some(*state),
            (TopicOp::Delete(DeleteResult::Deleted), Exists(_)) => Some(Absent),
            (TopicOp::Delete(DeleteResult::Deleted), Absent) => None,
            (TopicOp::Delete(DeleteResult::UnknownTopic), Absent) => Some(Absent),
            (TopicOp::Delete(DeleteResult::UnknownTopic), Exists(_)) => None,
            (TopicOp::Delete(DeleteResult::Unknown), _) => Some(Absent),
            (TopicOp::Describe(None), Absent) => Some(Absent),
            (TopicOp::Describe(None), Exists(_)) => None,
            (TopicOp::Describe(Some(_)), Absent) => None,
            (TopicOp::Describe(Some(seen)), Exists(Some(id))) => (seen == id).then_some(*state),
            // The first answer to name this incarnation's id pins it, unless a create's answer
            // named that id: then that create made it, not this incarnation's.
            (TopicOp::Describe(Some(seen)), Exists(None)) => {
                (!self.is_claimed(seen)).then_some(Exists(Some(seen)))
            }
        }
    }

    fn is_read(&self, op: &TopicOp) -> bool {
        matches!(
            op,
            TopicOp::Describe(_)
                | TopicOp::Create(CreateResult::AlreadyExists)
                | TopicOp::Delete(DeleteResult::UnknownTopic)
        )
    }

    fn causes(&self, writer: &TopicOp, observer: &TopicOp) -> bool {
        let after = match writer {
            TopicOp::Create(CreateResult::Created(id)) => TopicState::Exists(*id),
            TopicOp::Create(CreateResult::Unknown) => TopicState::Exists(None),
            TopicOp::Delete(DeleteResult::Deleted | DeleteResult::Unknown) => TopicState::Absent,
            _ => return false,
        };
        self.step(&after, observer).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(op: TopicOp) -> Timed<TopicOp> {
        Timed {
            invoke_ns: 0,
            complete_ns: Some(1),
            op,
        }
    }

    /// Every read the topic model accepts leaves the state as it was, or pins an id the state
    /// left open: the obligation the search's shortcut for reads relies on.
    #[test]
    fn topic_reads_change_nothing_but_an_open_id() {
        let model = TopicModel::for_ops(&[timed(TopicOp::Create(CreateResult::Created(Some(0))))]);
        let states = [
            TopicState::Absent,
            TopicState::Exists(None),
            TopicState::Exists(Some(0)),
            TopicState::Exists(Some(1)),
        ];
        let reads = [
            TopicOp::Describe(None),
            TopicOp::Describe(Some(0)),
            TopicOp::Describe(Some(1)),
            TopicOp::Create(CreateResult::AlreadyExists),
            TopicOp::Delete(DeleteResult::UnknownTopic),
        ];
        for state in states {
            for read in reads {
                assert!(model.is_read(&read));
                if let Some(after) = model.step(&state, &read) {
                    let pinned = state == TopicState::Exists(None)
                        && matches!(after, TopicState::Exists(Some(_)));
                    assert!(
                        after == state || pinned,
                        "{read:?} at {state:?} gave {after:?}"
                    );
                }
            }
        }
        // Id 0 was named by a create: an incarnation of unknown id cannot be it.
        assert_eq!(
            model.step(&TopicState::Exists(None), &TopicOp::Describe(Some(0))),
            None
        );
        assert_eq!(
            model.step(&TopicState::Exists(None), &TopicOp::Describe(Some(1))),
            Some(TopicState::Exists(Some(1)))
        );
    }

    /// `causes` holds only where the observer's result follows the writer from any state the
    /// writer changes.
    #[test]
    fn causes_holds_from_every_state() {
        let model = TopicModel::for_ops(&[timed(TopicOp::Create(CreateResult::Created(Some(0))))]);
        let ops = [
            TopicOp::Create(CreateResult::Created(Some(0))),
            TopicOp::Create(CreateResult::Created(None)),
            TopicOp::Create(CreateResult::AlreadyExists),
            TopicOp::Create(CreateResult::Unknown),
            TopicOp::Delete(DeleteResult::Deleted),
            TopicOp::Delete(DeleteResult::UnknownTopic),
            TopicOp::Delete(DeleteResult::Unknown),
            TopicOp::Describe(None),
            TopicOp::Describe(Some(0)),
            TopicOp::Describe(Some(1)),
        ];
        let states = [
            TopicState::Absent,
            TopicState::Exists(None),
            TopicState::Exists(Some(0)),
            TopicState::Exists(Some(1)),
        ];
        for writer in ops {
            for observer in ops {
                if !model.causes(&writer, &observer) {
                    continue;
                }
                for state in states {
                    let changed = model.step(&state, &writer).filter(|after| *after != state);
                    if let Some(after) = changed {
                        assert!(
                            model.step(&after, &observer).is_some(),
                            "{writer:?} then {observer:?} from {state:?}"
                        );
                    }
                }
            }
        }
        let register = RegisterModel;
        assert!(register.causes(&RegisterOp::Write(Some(3)), &RegisterOp::Read(Some(3))));
        assert!(register.causes(&RegisterOp::Write(None), &RegisterOp::Read(None)));
        assert!(!register.causes(&RegisterOp::Write(Some(3)), &RegisterOp::Read(None)));
    }
}
