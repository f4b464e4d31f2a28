//! The KIP-631 controller state machine.
