//! WHIP-shaped HTTP signaling (RFC 9725) and the operational endpoints.
//!
//! - `POST /v1/sessions` (`application/sdp`) → `201`, `Location: /v1/sessions/{id}`, answer SDP
//! - `PATCH /v1/sessions/{id}` (`application/sdp`, a new offer) → `200` + answer: ICE restart
//! - `DELETE /v1/sessions/{id}` → `204`;  `GET /v1/sessions/{id}` → JSON state and counters
//! - `GET /v1/sessions/{id}/resume` → `200` + a fresh resume credential (docs/continuity.md)
//! - `POST /v1/sessions` with `Authorization: Bearer vr1....` → the call resumes on a new session
//! - `GET /healthz`, `GET /readyz`, `GET /metrics`, and a demo page at `/`
//!
//! This is the HTTP edge only: it checks auth and content types, reads the caller's metadata
//! ([`call_metadata`](crate::control::call_metadata)) and maps [`ControlError`]s to status
//! codes, counting each refusal by reason; the work happens in [`ControlPlane`]. What a
//! request authenticated with (a [`Credential`]) goes with it: a session answers GET, PATCH
//! and DELETE only for the credential that created it and the operator's static token, and
//! is `404` to everyone else, as one that does not exist.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};

use axum::extract::{DefaultBodyLimit, Extension, Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower_http::cors::CorsLayer;
use voxgate_metrics_exposition::Format;

use crate::auth::token_uses::UseRefused;
use crate::auth::{AuthError, Authenticator, Credential, ResumeClaims};
use crate::control::call_metadata::{caller_metadata, CallMetadata};
use crate::control::client_origin::ProxyTrust;
use crate::control::control_error::ResumeFailure;
use crate::control::plane::{ControlError, ControlPlane, Requester};
use crate::control::registry::CallOf;
use crate::control::signaling_server::peer_addr;
use crate::media::session::SessionId;

const INDEX_HTML: &str = include_str!("../../web/index.html");
/// The browser client library (`clients/web`, `@voxgate/client`), built and committed there, so
/// a page can `import { connect } from "/voxgate.js"` with no build step of its own.
const CLIENT_JS: &str = include_str!("../../../clients/web/dist/voxgate.js");

#[derive(Clone)]
pub struct AppState {
    pub control: Arc<ControlPlane>,
    /// The static token and per-call token key (open when neither is set).
    pub auth: Arc<Authenticator>,
    /// Longest a request may take to deliver its body (408 after that).
    pub body_timeout: Duration,
    pub max_body_bytes: usize,
    /// Absolute base URL for `Location` (no trailing slash), or `None` for a relative one.
    pub public_url: Option<Arc<str>>,
    /// Which peers are proxies whose X-Forwarded-For and ingress header are believed.
    pub proxy_trust: Arc<ProxyTrust>,
    /// How long a minted resume credential is valid.
    pub resume_ttl: Duration,
}

/// Response headers of a `201` that name the chosen relay ingress and why.
const INGRESS_HEADER: &str = "x-voxgate-ingress";
const INGRESS_REASON_HEADER: &str = "x-voxgate-ingress-reason";
/// Response headers of a `201`, a `200` to PATCH and the `/resume` refresh: the session's
/// resume credential and how many seconds it is valid.
const RESUME_HEADER: &str = "x-voxgate-resume";
const RESUME_TTL_HEADER: &str = "x-voxgate-resume-ttl";

pub fn router(state: AppState) -> Router {
    let max_body_bytes = state.max_body_bytes;
    let api = Router::new()
        .route("/v1/sessions", post(create_session))
        .route(
            "/v1/sessions/{id}",
            get(get_session).delete(delete_session).patch(patch_session),
        )
        .route("/v1/sessions/{id}/resume", get(refresh_resume))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            read_body_in_time,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    // Token auth is a header (never a cookie), so any origin may call the API.
    let cors = CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION])
        .expose_headers([
            header::LOCATION,
            header::HeaderName::from_static(INGRESS_HEADER),
            header::HeaderName::from_static(INGRESS_REASON_HEADER),
            header::HeaderName::from_static(RESUME_HEADER),
            header::HeaderName::from_static(RESUME_TTL_HEADER),
            header::RETRY_AFTER,
        ]);
    Router::new()
        .route("/", get(|| async { Html(INDEX_HTML) }))
        .route("/voxgate.js", get(client_js))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(api)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), count_status))
        .layer(cors)
        .with_state(state)
}

async fn client_js() -> impl IntoResponse {
    let headers = [
        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
        // The file changes with the binary: a short cache keeps a rolling deploy's pages fresh.
        (header::CACHE_CONTROL, "public, max-age=300"),
    ];
    (headers, CLIENT_JS)
}

impl IntoResponse for ControlError {
    fn into_response(self) -> Response {
        let status = match &self {
            ControlError::BadOffer(_) | ControlError::Rejected(_) => StatusCode::BAD_REQUEST,
            ControlError::AtCapacity(_)
            | ControlError::Draining
            | ControlError::LoopBusy(_)
            | ControlError::LoopsSaturated(_)
            | ControlError::ProcessSaturated(_)
            | ControlError::NoBackend => StatusCode::SERVICE_UNAVAILABLE,
            ControlError::RateLimited(_)
            | ControlError::ClientCap(_)
            | ControlError::SessionRestartLimited(_)
            | ControlError::AddressRestartLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            ControlError::TokenUse(UseRefused::Spent(_)) => StatusCode::UNAUTHORIZED,
            ControlError::TokenUse(UseRefused::Full) => StatusCode::SERVICE_UNAVAILABLE,
            ControlError::NotFound => StatusCode::NOT_FOUND,
            ControlError::Conflict(_) => StatusCode::CONFLICT,
            ControlError::Resume(ResumeFailure::Replayed | ResumeFailure::Stale) => {
                StatusCode::CONFLICT
            }
            ControlError::Resume(ResumeFailure::Unknown) => StatusCode::GONE,
            ControlError::Resume(ResumeFailure::TableFull | ResumeFailure::NoBackend) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ControlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let retry_after = match &self {
            // Whole seconds, rounded up: a client retrying at once would be refused again.
            ControlError::RateLimited(wait)
            | ControlError::SessionRestartLimited(wait)
            | ControlError::AddressRestartLimited(wait) => {
                Some(wait.as_secs_f64().ceil().max(1.0) as u64)
            }
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(1),
            ControlError::ClientCap(_) => Some(1),
            _ => None,
        };
        let mut resp = (status, format!("{self}\n")).into_response();
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

async fn count_status(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    state
        .control
        .metrics
        .signaling_response(resp.status().as_u16());
    resp
}

async fn require_token(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match state.auth.check(presented, now) {
        Ok(credential) => {
            req.extensions_mut().insert(credential);
            next.run(req).await
        }
        Err(e) => {
            state.control.metrics.signaling_rejected(e.reason());
            if let AuthError::Resume(r) = &e {
                state.control.metrics.resume(r.outcome());
            }
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "missing or invalid bearer token\n",
            )
                .into_response()
        }
    }
}

/// Reads the whole request body within `--body-timeout-secs` (408 otherwise) and within
/// `--max-body-bytes` (413), so a client that dribbles its body cannot hold a handler.
async fn read_body_in_time(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let read = axum::body::to_bytes(body, state.max_body_bytes);
    match tokio::time::timeout(state.body_timeout, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_large {
                state.control.metrics.signaling_rejected("body_too_large");
                (StatusCode::PAYLOAD_TOO_LARGE, "request body is too large\n").into_response()
            } else {
                state.control.metrics.signaling_rejected("body_error");
                (StatusCode::BAD_REQUEST, "request body could not be read\n").into_response()
            }
        }
        Err(_) => {
            state.control.metrics.signaling_rejected("body_timeout");
            (
                StatusCode::REQUEST_TIMEOUT,
                "request body did not arrive in time\n",
            )
                .into_response()
        }
    }
}

fn is_content_type(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(expected))
}

fn unsupported_media_type() -> Response {
    (
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "body must be an SDP offer with Content-Type: application/sdp\n",
    )
        .into_response()
}

fn parse_id(id: &str) -> Result<SessionId, ControlError> {
    id.parse().map_err(|_| ControlError::NotFound)
}

/// Counts why the control plane refused a request (both counters where both apply), and
/// hands the error on to become the answer.
fn counted(state: &AppState, e: ControlError) -> ControlError {
    let metrics = &state.control.metrics;
    if let Some(reason) = e.refusal_reason() {
        metrics.session_refused(reason);
    }
    if let Some(reason) = e.rejected_reason() {
        metrics.signaling_rejected(reason);
    }
    e
}

async fn create_session(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    Extension(credential): Extension<Credential>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ControlError> {
    if !is_content_type(&headers, "application/sdp") {
        return Ok(unsupported_media_type());
    }
    let signed = credential.signed_metadata().clone();
    let from_headers = headers.iter().map(|(k, v)| (k.as_str(), v.as_bytes()));
    let caller = match caller_metadata(query.as_deref(), from_headers, signed.len()) {
        Ok(m) => m,
        Err(e) => {
            state.control.metrics.signaling_rejected(e.reason());
            return Ok((StatusCode::BAD_REQUEST, format!("{e}\n")).into_response());
        }
    };
    let metadata = CallMetadata { signed, caller };
    let resuming = matches!(credential, Credential::Resume(_));
    let requester = requester(&state, &extensions, &headers, credential);
    let created = state.control.create(&body, metadata, &requester).await;
    if resuming {
        let outcome = match &created {
            Ok(_) => "resumed",
            Err(e) => e.resume_outcome(),
        };
        state.control.metrics.resume(outcome);
    }
    let created = created.map_err(|e| counted(&state, e))?;
    let location = format!(
        "{}/v1/sessions/{}",
        state.public_url.as_deref().unwrap_or(""),
        created.id
    );
    let mut resp = (
        StatusCode::CREATED,
        [
            (header::LOCATION, location),
            (header::CONTENT_TYPE, "application/sdp".to_string()),
        ],
        created.answer,
    )
        .into_response();
    if let Some(choice) = &created.ingress {
        // Names are checked at start-up (A-Z a-z 0-9 - _), so they are valid header values.
        if let Ok(v) = HeaderValue::from_str(&choice.name) {
            resp.headers_mut().insert(INGRESS_HEADER, v);
        }
        resp.headers_mut().insert(
            INGRESS_REASON_HEADER,
            HeaderValue::from_static(choice.reason.as_str()),
        );
    }
    let claims = resume_claims(&state, created.id, created.call, created.worker);
    insert_resume_headers(&state, resp.headers_mut(), &claims);
    Ok(resp)
}

/// The claims of a credential for session `id` of `call`, valid from now for the TTL.
fn resume_claims(
    state: &AppState,
    id: SessionId,
    call: CallOf,
    worker: Option<String>,
) -> ResumeClaims {
    ResumeClaims {
        call_id: call.call_id.0,
        generation: call.generation,
        session_id: id.0,
        worker: worker.unwrap_or_default(),
        creator: call.creator,
        expires_at: unix_now() + state.resume_ttl.as_secs(),
    }
}

fn insert_resume_headers(state: &AppState, headers: &mut HeaderMap, claims: &ResumeClaims) {
    // Base64url and dots only: always a valid header value.
    if let Ok(v) = HeaderValue::from_str(&state.auth.resume_key.mint(claims)) {
        headers.insert(RESUME_HEADER, v);
    }
    headers.insert(
        RESUME_TTL_HEADER,
        HeaderValue::from(state.resume_ttl.as_secs()),
    );
}

/// `GET /v1/sessions/{id}/resume`: a fresh resume credential for a live session, for whoever
/// controls it (the client refreshes its credential while the call lives).
async fn refresh_resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Extension(credential): Extension<Credential>,
) -> Result<Response, ControlError> {
    let id = parse_id(&id).map_err(|e| counted(&state, e))?;
    let (call, worker) = state
        .control
        .resume_claims_for(id, &credential)
        .await
        .map_err(|e| counted(&state, e))?;
    let claims = resume_claims(&state, id, call, worker);
    let mut resp = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/plain"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        state.auth.resume_key.mint(&claims),
    )
        .into_response();
    insert_resume_headers(&state, resp.headers_mut(), &claims);
    Ok(resp)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Who asks, judged by [`ProxyTrust`]: the client IP for per-IP limits and CIDR rules, and the
/// ingress header's value, both believed only from a trusted proxy. What was not believed is
/// counted.
fn requester(
    state: &AppState,
    extensions: &axum::http::Extensions,
    headers: &HeaderMap,
    credential: Credential,
) -> Requester {
    let Some(peer) = peer_addr(extensions) else {
        return Requester {
            credential,
            ..Requester::default()
        };
    };
    let origin = state.proxy_trust.resolve(peer.ip(), headers);
    let metrics = &state.control.metrics;
    for h in &origin.untrusted_headers {
        metrics.untrusted_header(h.as_str());
    }
    if origin.forwarded_for_malformed {
        metrics.forwarded_for_malformed();
        tracing::debug!(%peer, "malformed X-Forwarded-For from a trusted proxy; using the peer address");
    }
    Requester {
        client: Some(origin.client),
        ingress_value: origin.ingress_value,
        credential,
    }
}

async fn patch_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Extension(credential): Extension<Credential>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ControlError> {
    let id = parse_id(&id).map_err(|e| counted(&state, e))?;
    if is_content_type(&headers, "application/trickle-ice-sdpfrag") {
        // ICE-lite learns the client's addresses from its checks; trickled candidates add
        // nothing. Accept them so standard WHIP clients work; the media loop never hears of
        // them, so they need no rate limit.
        state
            .control
            .loop_for(id, &credential)
            .map_err(|e| counted(&state, e))?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    if !is_content_type(&headers, "application/sdp") {
        return Ok(unsupported_media_type());
    }
    let requester = requester(&state, &extensions, &headers, credential);
    let answer = state
        .control
        .ice_restart(id, &body, &requester)
        .await
        .map_err(|e| counted(&state, e))?;
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/sdp")],
        answer,
    )
        .into_response();
    if let Ok((call, worker)) = state
        .control
        .resume_claims_for(id, &requester.credential)
        .await
    {
        let claims = resume_claims(&state, id, call, worker);
        insert_resume_headers(&state, resp.headers_mut(), &claims);
    }
    Ok(resp)
}

async fn delete_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Extension(credential): Extension<Credential>,
) -> Result<StatusCode, ControlError> {
    let id = parse_id(&id).map_err(|e| counted(&state, e))?;
    state
        .control
        .delete(id, &credential)
        .await
        .map_err(|e| counted(&state, e))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn get_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Extension(credential): Extension<Credential>,
) -> Result<Response, ControlError> {
    let id = parse_id(&id).map_err(|e| counted(&state, e))?;
    let snap = state
        .control
        .snapshot(id, &credential)
        .await
        .map_err(|e| counted(&state, e))?;
    let ingress = state.control.ingress_of(id);
    let call = state.control.call_of(id, &credential);
    Ok(Json(SessionView {
        snapshot: snap,
        call_id: call.map(|c| c.call_id.to_string()),
        generation: call.map(|c| c.generation),
        ingress: ingress.as_ref().map(|c| &*c.name),
        ingress_reason: ingress.as_ref().map(|c| c.reason.as_str()),
    })
    .into_response())
}

/// `GET /v1/sessions/{id}`: the loop's snapshot plus what the control plane decided.
#[derive(serde::Serialize)]
struct SessionView<'a> {
    #[serde(flatten)]
    snapshot: crate::media::session::SessionSnapshot,
    /// The call the session carries (its own id unless it resumed one), and its generation in
    /// it (1 for the call's first session).
    call_id: Option<String>,
    generation: Option<u32>,
    /// The relay ingress the answer advertised (`null` in direct mode), and why.
    ingress: Option<&'a str>,
    ingress_reason: Option<&'static str>,
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.control.is_draining() {
        ControlError::Draining.into_response()
    } else {
        "ready\n".into_response()
    }
}

/// Classic Prometheus text unless the scraper prefers OpenMetrics (Prometheus does), with the
/// standard `process_*` metrics (`voxgate-metrics-exposition`).
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let body = voxgate_metrics_exposition::render(&state.control.metrics.encode(), format);
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_ignores_parameters_and_case() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/SDP; charset=utf-8"),
        );
        assert!(is_content_type(&h, "application/sdp"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_content_type(&h, "application/sdp"));
    }
}
