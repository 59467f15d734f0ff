//! The connection to one transceiver's `Bridge` service and the credentials every call on it
//! carries.

use std::error::Error;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status, Streaming};
use voxgate_proto::bridge::bridge_client::BridgeClient;
use voxgate_proto::bridge::{TapRequest, Uplink};

/// A connected HTTP/2 channel to a transceiver's gRPC port, and the `authorization` metadata
/// (if any) each request gets. Cheap to clone; clones share the connection and the count of
/// downlink messages refused for their size.
#[derive(Clone, Debug)]
pub struct Bridge {
    channel: Channel,
    authorization: Option<MetadataValue<Ascii>>,
    refused: Arc<AtomicU64>,
}

impl Bridge {
    pub fn new(channel: Channel, authorization: Option<MetadataValue<Ascii>>) -> Bridge {
        Bridge {
            channel,
            authorization,
            refused: Arc::default(),
        }
    }

    /// Connects once.
    pub async fn connect(
        endpoint: &Endpoint,
        authorization: Option<MetadataValue<Ascii>>,
    ) -> Result<Bridge, ConnectError> {
        match endpoint.connect().await {
            Ok(channel) => Ok(Bridge::new(channel, authorization)),
            Err(source) => Err(ConnectError {
                url: endpoint.uri().to_string(),
                source,
            }),
        }
    }

    /// Connects, trying up to `tries` times `pause` apart (a transceiver that is starting).
    pub async fn connect_retrying(
        endpoint: &Endpoint,
        authorization: Option<MetadataValue<Ascii>>,
        tries: u32,
        pause: Duration,
    ) -> Result<Bridge, ConnectError> {
        let mut attempt = 1;
        loop {
            match Bridge::connect(endpoint, authorization.clone()).await {
                Ok(bridge) => return Ok(bridge),
                Err(e) if attempt >= tries => return Err(e),
                Err(_) => attempt += 1,
            }
            tokio::time::sleep(pause).await;
        }
    }

    pub fn client(&self) -> BridgeClient<Channel> {
        BridgeClient::new(self.channel.clone())
    }

    /// `message` as a request with this bridge's credentials.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        request
    }

    /// A listen-only copy of `session_id`'s uplink (PCM at the owner's rate), and with
    /// `downlink` of what is sent to the caller too (`SentAudio`, `Cleared`).
    pub async fn tap(&self, session_id: &str, downlink: bool) -> Result<Streaming<Uplink>, Status> {
        let request = self.request(TapRequest {
            session_id: session_id.to_owned(),
            downlink,
            ..Default::default()
        });
        Ok(self.client().tap(request).await?.into_inner())
    }

    /// Downlink messages refused so far, on any call made through this bridge, because they
    /// were over the transceiver's message limit.
    pub fn refused(&self) -> u64 {
        self.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn refusals(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.refused)
    }
}

/// `Bearer <token>` as `authorization` metadata.
pub fn bearer(token: &str) -> Result<MetadataValue<Ascii>, InvalidToken> {
    MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| InvalidToken)
}

/// A token that cannot be sent as a header value (the message does not echo it).
#[derive(Debug, thiserror::Error)]
#[error("not a valid header value")]
pub struct InvalidToken;

#[derive(Debug, thiserror::Error)]
#[error("cannot connect to the bridge at {url}: {}", error_chain(.source))]
pub struct ConnectError {
    url: String,
    #[source]
    source: tonic::transport::Error,
}

/// `e` and its sources, colon-separated (tonic's transport errors say little by themselves).
pub fn error_chain(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
