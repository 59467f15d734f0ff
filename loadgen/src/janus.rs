//! Signaling against the Janus WebRTC gateway's HTTP API, so the same simulated clients can
//! load Janus's echotest plugin as a peer baseline.
//!
//! One call per step, as a browser's janus.js would do: `create` a Janus session, `attach`
//! `janus.plugin.echotest`, send the offer as a `message` with a `jsep`, then long-poll the
//! session's event queue until the plugin's event carries the answer. `destroy` ends it.

use std::time::Duration;

use reqwest::blocking::Client;
use serde_json::{json, Value};

/// How long one long poll may wait for events (Janus answers a keepalive after 30 s).
const POLL_TIMEOUT: Duration = Duration::from_secs(35);

/// Failures of a Janus exchange.
#[derive(Debug, thiserror::Error)]
pub enum JanusError {
    #[error("janus request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("janus answered an error: {0}")]
    Janus(String),
    #[error("unexpected janus reply: {0}")]
    Unexpected(String),
    #[error("no answer from janus within {0:?}")]
    Timeout(Duration),
}

/// A Janus session with one echotest handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JanusHandle {
    pub session: u64,
    pub handle: u64,
}

/// A blocking Janus HTTP client (one per signaling thread).
pub struct JanusClient {
    http: Client,
    base: String,
    next_tx: u64,
}

impl JanusClient {
    /// `base` is the API root, e.g. `http://127.0.0.1:8088/janus`.
    pub fn new(base: &str) -> Result<JanusClient, JanusError> {
        let http = Client::builder()
            .timeout(POLL_TIMEOUT + Duration::from_secs(5))
            .no_proxy()
            .build()?;
        Ok(JanusClient {
            http,
            base: base.trim_end_matches('/').to_string(),
            next_tx: 0,
        })
    }

    fn transaction(&mut self) -> String {
        self.next_tx += 1;
        format!("lg{}", self.next_tx)
    }

    fn post(&mut self, path: &str, mut body: Value) -> Result<Value, JanusError> {
        let tx = self.transaction();
        body["transaction"] = Value::String(tx);
        let v: Value = self
            .http
            .post(format!("{}{}", self.base, path))
            .json(&body)
            .send()?
            .error_for_status()?
            .json()?;
        check(&v)?;
        Ok(v)
    }

    /// Creates a session, attaches echotest, sends `offer_sdp`; returns the handle and the
    /// answer SDP.
    pub fn negotiate(
        &mut self,
        offer_sdp: &str,
        max_wait: Duration,
    ) -> Result<(JanusHandle, String), JanusError> {
        let created = self.post("", json!({"janus": "create"}))?;
        let session = data_id(&created)?;
        let attached = self.post(
            &format!("/{session}"),
            json!({"janus": "attach", "plugin": "janus.plugin.echotest"}),
        )?;
        let handle = data_id(&attached)?;
        let h = JanusHandle { session, handle };
        self.post(
            &format!("/{session}/{handle}"),
            json!({
                "janus": "message",
                "body": {"audio": true, "video": false, "data": true},
                "jsep": {"type": "offer", "sdp": offer_sdp},
            }),
        )?;
        // The offer carries every client candidate; tell Janus none will be trickled, or it
        // keeps ICE waiting for more.
        self.post(
            &format!("/{session}/{handle}"),
            json!({"janus": "trickle", "candidate": {"completed": true}}),
        )?;
        let deadline = std::time::Instant::now() + max_wait;
        while std::time::Instant::now() < deadline {
            let v: Value = self
                .http
                .get(format!("{}/{session}?maxev=10", self.base))
                .send()?
                .error_for_status()?
                .json()?;
            let events = match v {
                Value::Array(a) => a,
                other => vec![other],
            };
            for e in &events {
                check(e)?;
                if let Some(sdp) = answer_sdp(e) {
                    return Ok((h, sdp.to_string()));
                }
            }
        }
        Err(JanusError::Timeout(max_wait))
    }

    /// Ends the Janus session (and its handle).
    pub fn destroy(&mut self, h: JanusHandle) -> Result<(), JanusError> {
        self.post(&format!("/{}", h.session), json!({"janus": "destroy"}))
            .map(|_| ())
    }
}

fn check(v: &Value) -> Result<(), JanusError> {
    if v["janus"] == "error" {
        return Err(JanusError::Janus(v["error"].to_string()));
    }
    if let Some(err) = v["plugindata"]["data"].get("error") {
        return Err(JanusError::Janus(err.to_string()));
    }
    Ok(())
}

fn data_id(v: &Value) -> Result<u64, JanusError> {
    v["data"]["id"]
        .as_u64()
        .ok_or_else(|| JanusError::Unexpected(v.to_string()))
}

/// The answer SDP of a plugin event, if it carries one.
pub fn answer_sdp(event: &Value) -> Option<&str> {
    let jsep = event.get("jsep")?;
    (jsep["type"] == "answer").then(|| jsep["sdp"].as_str())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_is_found_in_a_plugin_event() {
        let e = json!({"janus": "event", "sender": 7, "plugindata": {"plugin": "janus.plugin.echotest", "data": {"echotest": "event", "result": "ok"}}, "jsep": {"type": "answer", "sdp": "v=0\r\n"}});
        assert_eq!(answer_sdp(&e), Some("v=0\r\n"));
        assert!(check(&e).is_ok());
        assert_eq!(answer_sdp(&json!({"janus": "keepalive"})), None);
        assert_eq!(
            answer_sdp(&json!({"jsep": {"type": "offer", "sdp": "x"}})),
            None
        );
    }

    #[test]
    fn janus_errors_are_reported() {
        let e = json!({"janus": "error", "error": {"code": 458, "reason": "No such session"}});
        assert!(matches!(check(&e), Err(JanusError::Janus(_))));
        let p =
            json!({"janus": "event", "plugindata": {"data": {"error_code": 411, "error": "bad"}}});
        assert!(matches!(check(&p), Err(JanusError::Janus(_))));
    }
}
