//! The loopback HTTP API: `/healthz`, `/readyz`, and the token-protected `/v1`.
//!
//! Every error is JSON `{code, message}` with a message a person can act on; internals go to the
//! log, never to the client, and no response ever holds a token.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State as Extract};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};
use reconcile_api::{
    CreateSession, ErrorBody, ErrorCode, Health, Ready, SessionView, StopDaemon, VERSION,
};
use reconcile_core::{Secret, SessionId};
use reconcile_engine::{Error as EngineError, NewSessionRequest};
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;
use tokio_stream::wrappers::BroadcastStream;

use crate::state::State;
use crate::windows;

/// Request bodies larger than this are refused.
const BODY_LIMIT: usize = 64 * 1024;

pub(crate) type Shared = Arc<State>;

pub fn router(state: Shared) -> Router {
    let v1 = Router::new()
        .route("/sessions", get(list).post(create))
        .route("/sessions/{id}", get(show))
        .route("/sessions/{id}/stop", post(stop))
        .route("/report", get(report))
        .route("/daemon/stop", post(stop_daemon))
        .route("/events", get(events))
        .route("/windows", get(windows::list).post(windows::open))
        .route("/windows/{id}", get(windows::show))
        .route("/windows/{id}/close", post(windows::close))
        .route("/windows/{id}/leases", post(windows::acquire))
        .route("/leases/{id}/renew", post(windows::renew))
        .route("/leases/{id}/release", post(windows::release))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .nest("/v1", v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(require_loopback_host))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

/// An error response.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn internal(context: &str, error: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %error, "{context}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            format!("{context}; the daemon's log (in $RECONCILE_HOME/logs) has the details"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code,
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        use reconcile_git::Error as Git;
        use reconcile_store::Error as Store;
        let bad =
            |code, e: &EngineError| ApiError::new(StatusCode::BAD_REQUEST, code, e.to_string());
        match &e {
            EngineError::EmptyCommand => bad(ErrorCode::InvalidRequest, &e),
            EngineError::CommandNotFound { .. } => bad(ErrorCode::CommandNotFound, &e),
            EngineError::NoSuchRepository { .. } | EngineError::Git(Git::NotARepository { .. }) => {
                bad(ErrorCode::NotARepository, &e)
            }
            EngineError::Git(Git::NoCommits { .. }) => bad(ErrorCode::NoCommits, &e),
            EngineError::NoSuchSession { .. } | EngineError::Store(Store::NotFound { .. }) => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string())
            }
            EngineError::CannotStop { .. } | EngineError::Store(Store::WrongState { .. }) => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, e.to_string())
            }
            EngineError::InvalidSlots { .. }
            | EngineError::InvalidOwner
            | EngineError::InvalidTtl { .. }
            | EngineError::WrongRepository { .. } => bad(ErrorCode::InvalidRequest, &e),
            EngineError::NoSuchWindow { .. } | EngineError::NoSuchLease { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string())
            }
            EngineError::WindowNotOpen { .. } | EngineError::SessionLease { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, e.to_string())
            }
            EngineError::NoFreeSlot { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::NoFreeSlot, e.to_string())
            }
            EngineError::StopFailed { id, .. } => ApiError::internal(
                &format!("session {id} could not be stopped and was kept as it was"),
                &e,
            ),
            _ => ApiError::internal("the operation failed", &e),
        }
    }
}

/// Parse a JSON body; unknown fields, bad JSON and oversized bodies are 4xx with the reason.
pub(crate) fn parse<T: DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
    empty_ok: bool,
) -> Result<T, ApiError> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::BodyTooLarge,
                format!("the request body is larger than {BODY_LIMIT} bytes"),
            )
        } else {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRequest,
                rejection.body_text(),
            )
        }
    })?;
    if bytes.is_empty() && empty_ok {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
            format!("the request body is not valid JSON for this request: {e}"),
        )
    })
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal("the operation stopped unexpectedly", e))?
}

/// Refuse requests whose Host is not a loopback name or address (DNS rebinding).
async fn require_loopback_host(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !is_loopback_host(host) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ForbiddenHost,
            "requests must name a loopback host (127.0.0.1, localhost or [::1])",
        )
        .into_response();
    }
    next.run(request).await
}

fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, port))
                if port.is_empty()
                    || port
                        .strip_prefix(':')
                        .is_some_and(|p| p.parse::<u16>().is_ok()) =>
            {
                name
            }
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.parse::<u16>().is_ok() => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `/v1` needs `Authorization: Bearer <token>`, compared in constant time.
async fn require_token(Extract(state): Extract<Shared>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .unwrap_or("");
    if !bool::from(given.as_bytes().ct_eq(state.token.as_bytes())) {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "a valid bearer token is required: send `Authorization: Bearer <token>` with the token from $RECONCILE_HOME/daemon.json",
        )
        .into_response();
    }
    next.run(request).await
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        "no such endpoint",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::InvalidRequest,
        "this endpoint does not take that method",
    )
}

async fn healthz(Extract(state): Extract<Shared>) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        pid: state.pid,
        instance_id: state.host.instance_id.clone(),
        version: VERSION.into(),
    })
}

async fn readyz(Extract(state): Extract<Shared>) -> (StatusCode, Json<Ready>) {
    if state.is_ready() {
        (
            StatusCode::OK,
            Json(Ready {
                status: "ready".into(),
            }),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Ready {
                status: "reconciling".into(),
            }),
        )
    }
}

fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(raw).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no session {raw:.80}"),
        )
    })
}

async fn list(Extract(state): Extract<Shared>) -> Result<Json<Vec<SessionView>>, ApiError> {
    blocking(move || {
        let sessions = state
            .reader()
            .list()
            .map_err(|e| ApiError::internal("cannot read the sessions", e))?;
        Ok(Json(
            sessions
                .iter()
                .map(|s| SessionView::new(s, &state.tmux_socket))
                .collect(),
        ))
    })
    .await
}

async fn show(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let id = session_id(&id)?;
    blocking(move || {
        let session = state
            .reader()
            .get(&id)
            .map_err(|e| ApiError::internal("cannot read the session", e))?
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::NOT_FOUND,
                    ErrorCode::NotFound,
                    format!("no session {id}"),
                )
            })?;
        Ok(Json(SessionView::new(&session, &state.tmux_socket)))
    })
    .await
}

async fn create(
    Extract(state): Extract<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<SessionView>), ApiError> {
    let request: CreateSession = parse(body, false)?;
    accepting(&state)?;
    let window = match request.window.as_deref() {
        None => None,
        Some(raw) => Some(windows::window_id(raw)?),
    };
    if request.repo.is_empty() && window.is_none() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
            "`repo` is required: the path of a git repository (or give a `window`)",
        ));
    }
    let new = NewSessionRequest {
        repo: request.repo.into(),
        name: request.name,
        command: request.command,
        resume_token: request.resume_token.map(Secret::new),
        window: window.clone(),
    };
    let view = blocking(move || {
        let session = reconcile_engine::create_session(&state.writer(), &state.host, new)?;
        let view = SessionView::new(&session, &state.tmux_socket);
        state.emit(reconcile_api::Event::Session {
            session: view.clone(),
        });
        if let Some(window) = &window {
            // A slot was taken: announce the pool and have the provisioner refill it.
            windows::announce(&state, window);
            state.provision_soon();
        }
        Ok(view)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// New sessions and windows are refused while the boot reconcile runs and once a stop began.
pub(crate) fn accepting(state: &State) -> Result<(), ApiError> {
    if state.is_stopping() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            "the daemon is stopping; start sessions on the next one",
        ));
    }
    if !state.is_ready() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            "the daemon is still reconciling; retry once /readyz answers 200",
        ));
    }
    Ok(())
}

async fn stop(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let id = session_id(&id)?;
    blocking(move || {
        let session = reconcile_engine::stop_session(&state.writer(), &state.host, &id)?;
        let view = SessionView::new(&session, &state.tmux_socket);
        state.emit(reconcile_api::Event::Session {
            session: view.clone(),
        });
        Ok(Json(view))
    })
    .await
}

async fn report(
    Extract(state): Extract<Shared>,
) -> Result<Json<reconcile_api::ReportView>, ApiError> {
    state.report().map(Json).ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            "the boot reconcile has not finished yet",
        )
    })
}

#[derive(Debug, serde::Serialize)]
struct Stopping {
    stopping: bool,
    saved: Vec<String>,
    not_torn_down: Vec<Failure>,
}

#[derive(Debug, serde::Serialize)]
struct Failure {
    id: String,
    message: String,
}

async fn stop_daemon(
    Extract(state): Extract<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Stopping>, ApiError> {
    let request: StopDaemon = parse(body, true)?;
    state.begin_stop();
    state.emit(reconcile_api::Event::Stopping {
        stop_sessions: request.stop_sessions,
    });
    let s = state.clone();
    let result = blocking(move || {
        if !request.stop_sessions {
            return Ok(Stopping {
                stopping: true,
                saved: Vec::new(),
                not_torn_down: Vec::new(),
            });
        }
        let store = s.writer();
        let failed = reconcile_engine::save_all(&store, &s.host)?;
        let saved = store
            .in_states(&[reconcile_core::SessionState::Saved])
            .map_err(|e| ApiError::internal("cannot read the saved sessions", e))?
            .into_iter()
            .map(|s| s.id.to_string())
            .collect();
        let not_torn_down = failed
            .into_iter()
            .map(|(id, message)| Failure {
                id: id.to_string(),
                message,
            })
            .collect();
        Ok(Stopping {
            stopping: true,
            saved,
            not_torn_down,
        })
    })
    .await;
    tracing::info!(
        stop_sessions = request.stop_sessions,
        "stop requested over the API"
    );
    state.stop();
    result.map(Json)
}

async fn events(
    Extract(state): Extract<Shared>,
) -> Sse<impl Stream<Item = Result<sse::Event, Infallible>>> {
    let stopped = {
        let state = state.clone();
        async move { state.stopped().await }
    };
    let stream = BroadcastStream::new(state.events.subscribe())
        .map(|item| {
            let event = match item {
                Ok(event) => sse::Event::default()
                    .event(event.name())
                    .json_data(&event)
                    .unwrap_or_else(|_| sse::Event::default().event("error")),
                Err(_) => sse::Event::default()
                    .event("lagged")
                    .data("some events were dropped; read the session list again"),
            };
            Ok(event)
        })
        .take_until(stopped);
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:47800",
            "localhost",
            "LOCALHOST:1",
            "[::1]",
            "[::1]:47800",
            "127.1.2.3:80",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example",
            "evil.example:47800",
            "10.0.0.1:47800",
            "localhost.evil.example",
            "[::1",
            "[::1]x",
            "127.0.0.1:x",
            "0.0.0.0:47800",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }
}
