//! The window, slot and lease endpoints of `/v1`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State as Extract};
use axum::http::StatusCode;
use reconcile_api::{AcquireLease, ErrorCode, Event, LeaseView, OpenWindow, Released, WindowView};
use reconcile_core::{LeaseId, WindowId};
use reconcile_store::Store;

use crate::api::{ApiError, Shared, accepting, blocking, parse};
use crate::serve::now_ms;
use crate::state::State;

pub(crate) fn window_id(raw: &str) -> Result<WindowId, ApiError> {
    WindowId::parse(raw).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no window {raw:.80}"),
        )
    })
}

fn lease_id(raw: &str) -> Result<LeaseId, ApiError> {
    LeaseId::parse(raw).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no lease {raw:.80}"),
        )
    })
}

/// Every window's view, or only `only`'s.
fn views(store: &Store, only: Option<&WindowId>) -> Result<Vec<WindowView>, ApiError> {
    let read = || -> Result<_, reconcile_store::Error> {
        Ok((store.windows()?, store.slots()?, store.leases()?))
    };
    let (windows, slots, leases) =
        read().map_err(|e| ApiError::internal("cannot read the windows", e))?;
    Ok(windows
        .iter()
        .filter(|w| only.is_none_or(|id| *id == w.id))
        .map(|w| WindowView::new(w, &slots, &leases))
        .collect())
}

fn view(store: &Store, id: &WindowId) -> Result<WindowView, ApiError> {
    views(store, Some(id))?.pop().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no window {id}"),
        )
    })
}

/// Send the window's pool as it is now to event subscribers.
pub(crate) fn announce(state: &State, id: &WindowId) {
    match view(&state.reader(), id) {
        Ok(window) => state.emit(Event::Window { window }),
        Err(e) => tracing::debug!(window = %id, error = ?e, "cannot announce a window"),
    }
}

pub(crate) async fn list(
    Extract(state): Extract<Shared>,
) -> Result<Json<Vec<WindowView>>, ApiError> {
    blocking(move || views(&state.reader(), None).map(Json)).await
}

pub(crate) async fn show(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
) -> Result<Json<WindowView>, ApiError> {
    let id = window_id(&id)?;
    blocking(move || view(&state.reader(), &id).map(Json)).await
}

pub(crate) async fn open(
    Extract(state): Extract<Shared>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<WindowView>), ApiError> {
    let request: OpenWindow = parse(body, false)?;
    accepting(&state)?;
    if request.repo.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
            "`repo` is required: the path of a git repository",
        ));
    }
    blocking(move || {
        let window = reconcile_engine::open_window(
            &state.writer(),
            &state.host,
            std::path::Path::new(&request.repo),
            request.name,
            request.slots,
            now_ms(),
        )?;
        announce(&state, &window.id);
        state.provision_soon();
        Ok((
            StatusCode::CREATED,
            Json(view(&state.reader(), &window.id)?),
        ))
    })
    .await
}

pub(crate) async fn close(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
) -> Result<Json<WindowView>, ApiError> {
    let id = window_id(&id)?;
    blocking(move || {
        let (_, warnings) =
            reconcile_engine::close_window(&state.writer(), &state.host, &id, now_ms())?;
        for w in warnings {
            tracing::warn!(window = %id, message = %w.message, "closing a window left something");
        }
        announce(&state, &id);
        Ok(Json(view(&state.reader(), &id)?))
    })
    .await
}

pub(crate) async fn acquire(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<LeaseView>), ApiError> {
    let id = window_id(&id)?;
    let request: AcquireLease = parse(body, false)?;
    accepting(&state)?;
    blocking(move || {
        let (lease, slot) = reconcile_engine::acquire_lease(
            &state.writer(),
            &id,
            &request.owner,
            request.ttl_ms,
            now_ms(),
        )?;
        announce(&state, &id);
        state.provision_soon();
        Ok((
            StatusCode::CREATED,
            Json(LeaseView::new(&lease, Some(&slot))),
        ))
    })
    .await
}

pub(crate) async fn renew(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
) -> Result<Json<LeaseView>, ApiError> {
    let id = lease_id(&id)?;
    blocking(move || {
        let store = state.writer();
        let lease = reconcile_engine::renew_lease(&store, &id, now_ms())?;
        let slot = store
            .slot(&lease.slot)
            .map_err(|e| ApiError::internal("cannot read the lease's slot", e))?;
        Ok(Json(LeaseView::new(&lease, slot.as_ref())))
    })
    .await
}

pub(crate) async fn release(
    Extract(state): Extract<Shared>,
    Path(id): Path<String>,
) -> Result<Json<Released>, ApiError> {
    let id = lease_id(&id)?;
    blocking(move || {
        let (slot, decision) =
            reconcile_engine::release_lease(&state.writer(), &state.host, &id, now_ms())?;
        if let Some(window) = &slot.window {
            announce(&state, window);
        }
        state.provision_soon();
        Ok(Json(Released {
            lease: id.to_string(),
            slot: slot.id.to_string(),
            decision,
        }))
    })
    .await
}
