//! A minimal Kafka client for `--protocol kafka`: one connection shared by several logical
//! clients, their requests pipelined on it as Kafka's clients pipeline theirs (a broker or
//! controller answers a connection's requests in the order they came). Requests are encoded
//! and answers decoded with the same codec crate the listener uses. It finds the active
//! controller with Metadata (its `controller_id`'s endpoint) and DescribeQuorum (the leader).
//!
//! A writer task sends whatever requests are queued in one write; a reader task hands each
//! answer to the oldest waiting request, checking its correlation id. When the connection
//! fails, every waiting request and every later one fails.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;

use anyhow::Context;
use bytes::{BufMut, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use kafka_protocol::messages::{
    ApiKey, DescribeQuorumRequest, DescribeQuorumResponse, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Largest answer accepted.
const RESPONSE_BYTES_MAX: usize = 64 << 20;

/// A request waiting for its answer: its correlation id and where the answer's body goes.
type Waiting = (i32, LocalSender<Bytes>);

/// Requests encoded and not yet written, and whether the connection failed.
#[derive(Default)]
struct Outgoing {
    bytes: RefCell<Vec<u8>>,
    closed: Cell<bool>,
}

/// One Kafka connection, shared (behind an `Rc`) by the logical clients that use it.
pub(crate) struct KafkaConnection {
    outgoing: Rc<Outgoing>,
    /// Wakes the writer (a full channel means it is awake already).
    wake_writer: LocalSender<()>,
    waiting: Rc<RefCell<VecDeque<Waiting>>>,
    next_id: Cell<i32>,
    /// The writer and reader tasks; dropping the connection stops them.
    _tasks: [glommio::Task<()>; 2],
}

impl KafkaConnection {
    pub(crate) async fn connect(addr: SocketAddr) -> anyhow::Result<KafkaConnection> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to the Kafka listener {addr}: {e}"))?;
        stream.set_nodelay(true).ok();
        let (reader, writer) = futures_lite::io::split(stream.buffered());
        let (wake_writer, woken) = local_channel::new_bounded(1);
        let outgoing: Rc<Outgoing> = Rc::default();
        let waiting: Rc<RefCell<VecDeque<Waiting>>> = Rc::default();
        let tasks = [
            glommio::spawn_local(write_queued(writer, outgoing.clone(), woken)),
            glommio::spawn_local(read_answers(reader, waiting.clone(), outgoing.clone())),
        ];
        Ok(KafkaConnection {
            outgoing,
            wake_writer,
            waiting,
            next_id: Cell::new(1),
            _tasks: tasks,
        })
    }

    /// Sends `request` as `api` at `version` and waits for its answer; other calls on the
    /// same connection may be in flight meanwhile.
    pub(crate) async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        api: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<Resp> {
        let id = self.next_id.get();
        self.next_id.set(id.wrapping_add(1));
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
        anyhow::ensure!(
            !self.outgoing.closed.get(),
            "the Kafka connection is closed"
        );
        let (answer_tx, answer_rx) = local_channel::new_bounded(1);
        // Queued and awaited in the same step, so answers pair up with requests in order.
        self.outgoing.bytes.borrow_mut().extend_from_slice(&buf);
        self.waiting.borrow_mut().push_back((id, answer_tx));
        let _ = self.wake_writer.try_send(());
        let mut body = answer_rx
            .recv()
            .await
            .context("the Kafka connection closed before the answer")?;
        ResponseHeader::decode(&mut body, api.response_header_version(version))?;
        Resp::decode(&mut body, version)
    }
}

/// Writes every queued request, as many per write as are queued, until the connection or the
/// queue closes.
async fn write_queued<W: futures_lite::AsyncWrite + Unpin>(
    mut writer: W,
    outgoing: Rc<Outgoing>,
    woken: LocalReceiver<()>,
) {
    let mut batch = Vec::new();
    while woken.recv().await.is_some() {
        std::mem::swap(&mut batch, &mut *outgoing.bytes.borrow_mut());
        if batch.is_empty() {
            continue;
        }
        if writer.write_all(&batch).await.is_err() || writer.flush().await.is_err() {
            break;
        }
        batch.clear();
    }
    outgoing.closed.set(true);
}

/// Hands each answer's body (after the size prefix) to the oldest waiting request; stops at
/// the first failure, dropping every waiting request (their calls fail).
async fn read_answers<R: futures_lite::AsyncRead + Unpin>(
    mut reader: R,
    waiting: Rc<RefCell<VecDeque<Waiting>>>,
    outgoing: Rc<Outgoing>,
) {
    let failed = async {
        loop {
            let mut prefix = [0u8; 4];
            reader.read_exact(&mut prefix).await?;
            let len =
                usize::try_from(i32::from_be_bytes(prefix)).context("negative answer size")?;
            anyhow::ensure!(len <= RESPONSE_BYTES_MAX, "answer of {len} bytes");
            let mut body = vec![0u8; len];
            reader.read_exact(&mut body).await?;
            let id = body
                .get(..4)
                .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
                .context("answer shorter than its header")?;
            let (expected, tx) = waiting
                .borrow_mut()
                .pop_front()
                .context("an answer to no request")?;
            anyhow::ensure!(
                id == expected,
                "answer to request {id} where {expected} was expected"
            );
            let _ = tx.try_send(Bytes::from(body));
        }
    };
    let _: anyhow::Result<()> = failed.await;
    outgoing.closed.set(true);
    waiting.borrow_mut().clear();
}

/// The Kafka endpoint of the active controller: the controller Metadata at `bootstrap` names
/// once DescribeQuorum there says it leads. Until its registration is committed, a node names
/// itself (a write then takes an extra hop, forwarded), so this asks again until `deadline`.
pub(crate) async fn controller(
    bootstrap: SocketAddr,
    deadline: std::time::Instant,
) -> anyhow::Result<SocketAddr> {
    let c = KafkaConnection::connect(bootstrap).await?;
    loop {
        let md: MetadataResponse = c
            .call(
                ApiKey::Metadata,
                12,
                &MetadataRequest::default().with_topics(Some(Vec::new())),
            )
            .await?;
        let quorum: DescribeQuorumResponse = c
            .call(ApiKey::DescribeQuorum, 2, &DescribeQuorumRequest::default())
            .await?;
        let leader = quorum
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map(|p| p.leader_id);
        let endpoint = md
            .brokers
            .iter()
            .find(|b| b.node_id == md.controller_id && Some(b.node_id) == leader);
        if let Some(b) = endpoint {
            let endpoint = format!("{}:{}", b.host.as_str(), b.port);
            return corum_client::parse_bootstrap(&endpoint)?
                .into_iter()
                .next()
                .with_context(|| format!("{endpoint} resolves to no address"));
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "Metadata at {bootstrap} names controller {:?}, not the Raft leader {leader:?}",
            md.controller_id
        );
        glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
    }
}
