//! The HTTP half of a session: WHIP-shaped signaling against the transceiver, blocking.
//!
//! - `POST {base}/v1/sessions` (`application/sdp` offer, optional bearer token and query string)
//!   → `201 Created`, `Location`, answer SDP.
//! - `PATCH {resource}` with a new offer (ICE restart) → `200 OK`, answer SDP.
//! - `DELETE {resource}` → `204 No Content`.
//! - `GET {resource}` → JSON.
//!
//! Any non-success status becomes [`SignalingError::Status`] with the status code and body
//! text, so a test can assert on e.g. 503. Uses `reqwest::blocking`: call it from a plain
//! thread, not from inside a tokio runtime.

use std::time::Duration;

use reqwest::blocking::{Client, RequestBuilder};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION};
use reqwest::{StatusCode, Url};

/// Time allowed for one signaling request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Failures of one signaling exchange.
#[derive(Debug, thiserror::Error)]
pub enum SignalingError {
    /// The request never got an HTTP answer (connection refused, timeout, ...).
    #[error("signaling request failed: {0}")]
    Transport(#[from] reqwest::Error),
    /// The server answered with a non-success status.
    #[error("signaling answered {status}: {body}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// Response body, as text.
        body: String,
    },
    /// A `201` without a usable `Location` header.
    #[error("201 without a usable Location header")]
    MissingLocation,
    /// The base URL or the `Location` did not form a URL.
    #[error("bad signaling URL {0:?}")]
    BadUrl(String),
}

impl SignalingError {
    /// The HTTP status, when the server answered with an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            SignalingError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// The server-side resource a `POST` created.
#[derive(Debug, Clone)]
pub struct CreatedSession {
    /// The `Location` header as sent, e.g. `/v1/sessions/abc`.
    pub location: String,
    /// `Location` resolved against the request URL; target of PATCH/DELETE/GET.
    pub resource_url: Url,
    /// Last path segment of the resource URL.
    pub session_id: String,
    /// The answer SDP.
    pub answer_sdp: String,
    /// The session's resume credential (`X-Voxgate-Resume`), if the server sent one: what
    /// lets a client carry the call onto a new session (docs/continuity.md).
    pub resume_credential: Option<String>,
}

/// A reusable blocking HTTP client for signaling. Cheap to share across sessions; build one per
/// fleet, not one per session (each owns a background runtime thread).
pub struct SignalingClient {
    http: Client,
}

impl SignalingClient {
    /// A client with a 10 s request timeout that ignores proxy environment variables (tests talk
    /// to loopback).
    pub fn new() -> Result<Self, SignalingError> {
        let http = Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .build()?;
        Ok(SignalingClient { http })
    }

    /// `POST {base_url}/v1/sessions[?query]` with `offer_sdp`.
    pub fn create_session(
        &self,
        base_url: &str,
        token: Option<&str>,
        query: Option<&str>,
        offer_sdp: &str,
    ) -> Result<CreatedSession, SignalingError> {
        let url = sessions_url(base_url, query)?;
        let resp = send_sdp(self.http.post(url.clone()), token, offer_sdp)?;
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or(SignalingError::MissingLocation)?;
        let resume_credential = resp
            .headers()
            .get("x-voxgate-resume")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let resource_url = url
            .join(&location)
            .map_err(|_| SignalingError::BadUrl(location.clone()))?;
        let session_id = resource_url
            .path_segments()
            .and_then(|mut s| s.rfind(|seg| !seg.is_empty()))
            .map(str::to_owned)
            .ok_or(SignalingError::MissingLocation)?;
        let answer_sdp = resp.text()?;
        Ok(CreatedSession {
            location,
            resource_url,
            session_id,
            answer_sdp,
            resume_credential,
        })
    }

    /// `PATCH {resource}` with a new offer (ICE restart); returns the answer SDP.
    pub fn update_session(
        &self,
        resource_url: &Url,
        token: Option<&str>,
        offer_sdp: &str,
    ) -> Result<String, SignalingError> {
        let resp = send_sdp(self.http.patch(resource_url.clone()), token, offer_sdp)?;
        Ok(resp.text()?)
    }

    /// `DELETE {resource}`.
    pub fn delete_session(
        &self,
        resource_url: &Url,
        token: Option<&str>,
    ) -> Result<(), SignalingError> {
        let resp = with_token(self.http.delete(resource_url.clone()), token).send()?;
        let status = resp.status();
        if !status.is_success() {
            return Err(status_error(status, resp));
        }
        Ok(())
    }

    /// `GET {resource}` as JSON.
    pub fn get_session(
        &self,
        resource_url: &Url,
        token: Option<&str>,
    ) -> Result<serde_json::Value, SignalingError> {
        let resp = with_token(self.http.get(resource_url.clone()), token).send()?;
        let status = resp.status();
        if !status.is_success() {
            return Err(status_error(status, resp));
        }
        Ok(resp.json()?)
    }
}

/// `{base}/v1/sessions`, plus `?query` when given (a leading `?` in `query` is tolerated).
fn sessions_url(base_url: &str, query: Option<&str>) -> Result<Url, SignalingError> {
    let mut s = format!("{}/v1/sessions", base_url.trim_end_matches('/'));
    if let Some(q) = query
        .map(|q| q.trim_start_matches('?'))
        .filter(|q| !q.is_empty())
    {
        s.push('?');
        s.push_str(q);
    }
    Url::parse(&s).map_err(|_| SignalingError::BadUrl(s))
}

fn with_token(req: RequestBuilder, token: Option<&str>) -> RequestBuilder {
    match token {
        Some(t) => req.header(AUTHORIZATION, format!("Bearer {t}")),
        None => req,
    }
}

fn status_error(status: StatusCode, resp: reqwest::blocking::Response) -> SignalingError {
    SignalingError::Status {
        status: status.as_u16(),
        body: resp.text().unwrap_or_default(),
    }
}

/// The first `a=ice-ufrag:` value in an SDP, e.g. the server's routing-hint ufrag in an answer.
pub fn sdp_ice_ufrag(sdp: &str) -> Option<&str> {
    sdp.lines()
        .find_map(|l| l.trim_end().strip_prefix("a=ice-ufrag:"))
        .map(str::trim)
}

/// Sends an SDP body (`application/sdp`), turning a non-2xx answer into its typed error.
fn send_sdp(
    req: reqwest::blocking::RequestBuilder,
    token: Option<&str>,
    sdp: &str,
) -> Result<reqwest::blocking::Response, SignalingError> {
    let resp = with_token(req, token)
        .header(CONTENT_TYPE, "application/sdp")
        .body(sdp.to_owned())
        .send()?;
    let status = resp.status();
    if !status.is_success() {
        return Err(status_error(status, resp));
    }
    Ok(resp)
}

#[cfg(test)]
mod tests;
