//! A minimal Kafka client for `--protocol kafka`: one connection, one request in flight, the
//! request encoded and the response decoded with the same codec crate the listener uses. It
//! finds the active controller with a Metadata request (its `controller_id`'s endpoint).

use std::net::SocketAddr;

use anyhow::Context;
use bytes::{BufMut, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Largest answer accepted.
const RESPONSE_BYTES_MAX: usize = 64 << 20;

/// One Kafka connection.
pub(crate) struct KafkaConnection {
    /// Buffered: an answer's size prefix and body are one receive, not two.
    stream: TcpStream<glommio::net::Preallocated>,
    next_id: i32,
}

impl KafkaConnection {
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<KafkaConnection> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to the Kafka listener {addr}: {e}"))?;
        stream.set_nodelay(true).ok();
        Ok(KafkaConnection {
            stream: stream.buffered(),
            next_id: 1,
        })
    }

    /// Sends `request` as `api` at `version` and waits for its answer.
    pub(crate) async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<Resp> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let mut buf = BytesMut::with_capacity(128);
        buf.put_i32(0);
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(id)
            .with_client_id(Some(StrBytes::from_static_str("corum-loadgen")))
            .encode(&mut buf, api.request_header_version(version))?;
        request.encode(&mut buf, version)?;
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf).await?;
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).await?;
        let len = usize::try_from(i32::from_be_bytes(prefix)).context("negative answer size")?;
        anyhow::ensure!(len <= RESPONSE_BYTES_MAX, "answer of {len} bytes");
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, api.response_header_version(version))?;
        anyhow::ensure!(
            header.correlation_id == id,
            "answer to request {} where {id} was expected",
            header.correlation_id
        );
        Resp::decode(&mut body, version)
    }
}

/// The Kafka endpoint of the active controller, as Metadata at `bootstrap` names it.
pub(crate) async fn controller(bootstrap: SocketAddr) -> anyhow::Result<SocketAddr> {
    let mut c = KafkaConnection::connect(bootstrap).await?;
    let md: MetadataResponse = c
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(Some(Vec::new())),
        )
        .await?;
    let b = md
        .brokers
        .iter()
        .find(|b| b.node_id == md.controller_id)
        .with_context(|| {
            format!(
                "Metadata names controller {:?} but not its endpoint",
                md.controller_id
            )
        })?;
    let endpoint = format!("{}:{}", b.host.as_str(), b.port);
    corum_client::parse_bootstrap(&endpoint)?
        .into_iter()
        .next()
        .with_context(|| format!("{endpoint} resolves to no address"))
}
