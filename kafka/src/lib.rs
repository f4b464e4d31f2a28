//! Kafka's wire protocol at corum's edge: what a Kafka listener of a corum node speaks.
//!
//! Kafka clients (kcat, librdkafka, kafka-python, aiokafka, kafkajs, Kafka's own tools) send
//! size-prefixed requests with a Kafka request header; this crate parses them, serves the
//! admin and controller APIs of [`apis::SERVED`] by translating each into corum's own requests
//! ([`corum_protocol::RequestBody`]) through a [`Backend`] — in a node, the same call path
//! the private protocol uses, so a write is answered once, at commit — and encodes the answer
//! at the request's version. Sans-IO: the node's listener moves the bytes; tests drive a
//! [`Backend`] over an in-process controller.
//!
//! | module | what |
//! |---|---|
//! | [`frame`] | the size prefix and `socket.request.max.bytes` |
//! | [`request`] | header and body decoding, KIP-511, what closes a connection |
//! | [`apis`] | the served APIs and versions (what ApiVersions advertises) |
//! | [`service`] | dispatch to [`api`]'s translations |
//! | [`response`] | response header rules and encoding |
//! | [`errors`] | corum's errors as Kafka error codes |
//! | [`log`] | the metadata log rendered for Kafka brokers: RecordBatches, metadata and control records, snapshots |
//! | [`sasl`] | SASL on `SASL_PLAINTEXT`/`SASL_SSL` listeners: the per-connection state, PLAIN, SCRAM, Kafka's JAAS text |
//! | [`alloc`] | the allocator that keeps a lying array length from aborting the process |
//!
//! Message types come from the `kafka-protocol` crate (generated from Kafka 4.1's message
//! schemas), so every version of every served API is the one Kafka defines.

pub mod alloc;
pub mod api;
pub mod apis;
pub mod auth;
pub mod backend;
pub mod errors;
pub mod frame;
pub mod log;
pub mod metadata;
pub mod request;
pub mod response;
pub mod sasl;
pub mod service;

pub use apis::ServedApis;
pub use backend::{Backend, ListenerContext};
pub use errors::KafkaError;
pub use request::{parse, Parsed, RequestError, RequestHead};

/// The name of API `key` as Kafka's request metrics spell it (`Fetch`, `BrokerHeartbeat`).
pub fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key)
        .map_or_else(|_| format!("Unknown{key}"), |api| format!("{api:?}"))
}

use bytes::Bytes;

/// What the listener does with one request's bytes.
#[derive(Debug)]
pub enum Outcome {
    /// Send these bytes (size prefix included).
    Reply(response::Encoded),
    /// Close the connection; log the reason with the peer.
    Close(String),
}

/// Parses, serves and encodes one request (the bytes after its size prefix).
pub async fn answer<B: Backend>(ctx: &ListenerContext, backend: &B, bytes: Bytes) -> Outcome {
    let parsed = match request::parse(bytes, &ctx.served) {
        Ok(p) => p,
        Err(e) => return Outcome::Close(e.to_string()),
    };
    let answer = service::serve(ctx, backend, parsed).await;
    match response::encode_answer(answer) {
        Ok(encoded) => Outcome::Reply(encoded),
        Err(e) => Outcome::Close(e.to_string()),
    }
}

/// The tests decode hostile bytes: the process allocator must be the one a node uses.
#[cfg(test)]
#[global_allocator]
static ALLOC: alloc::NoReserveLarge = alloc::NoReserveLarge;
