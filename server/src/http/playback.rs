//! A session's stored history, for playing it back: pages of its frames by sequence or by
//! time, each starting at a keyframe when asked (`GET B/sessions/{sid}/frames`), and the
//! whole of it as an asciicast v2 recording (`GET B/sessions/{sid}/recording.cast`). Any
//! token that may see the session may play it back. Every read is index-backed and bounded.

use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::sessions::{SessionPath, visible};
use crate::auth::Principal;
use crate::sessions::envelope;
use crate::state::{ApiError, AppState};

/// Frames in one page at most.
const MAX_PAGE: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// Frames after this sequence.
    after: Option<u64>,
    /// Frames from the last one stored at or before this time (unix ms).
    at: Option<i64>,
    /// Start the page at the keyframe at or before that point, so it paints a screen.
    #[serde(default)]
    keyframe: bool,
    /// Only frames of these kinds, comma-separated (`Resize,MembershipChanged`: what a
    /// timeline marks). `Output` is not one of them: its pages are the unfiltered ones.
    kind: Option<String>,
    limit: Option<u32>,
}

/// The kinds a page may be filtered to.
const MARKED_KINDS: [&str; 8] = [
    "Resize",
    "MembershipChanged",
    "Keyframe",
    "Closed",
    "Warning",
    "Paused",
    "Resumed",
    "Snapshotted",
];

/// A `wire::control::FramePage`, spliced around the stored envelopes so no frame is decoded
/// and encoded again: the frames as pty-ws sent them; `next_after` is where the next page
/// starts (`null` at the end). Frames at or below `replay_floor` are gone (retention).
pub async fn frames(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if q.after.is_some() && q.at.is_some() {
        return Err(ApiError::bad_request("give after or at, not both"));
    }
    let kinds = match &q.kind {
        None => None,
        Some(list) => Some(
            list.split(',')
                .map(|k| {
                    MARKED_KINDS.into_iter().find(|m| *m == k).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "kind {k:?} is none of {}",
                            MARKED_KINDS.join(", ")
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    if kinds.is_some() && q.keyframe {
        return Err(ApiError::bad_request("give kind or keyframe, not both"));
    }
    let view = visible(&state, &who, &sid).await?;
    let store = &state.store;
    let floor = view.replay_floor;
    let mut start = match q.at {
        Some(at) => store
            .frames()
            .sequence_at(&sid, at)
            .await?
            .unwrap_or(floor + 1),
        None => q.after.unwrap_or(floor) + 1,
    };
    if q.keyframe {
        // Without a keyframe before the point, only the whole retained history paints it.
        start = store
            .frames()
            .keyframe_before(&sid, start)
            .await?
            .unwrap_or(floor + 1);
    }
    let limit = q.limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
    let start = start.max(floor + 1);
    let page = match &kinds {
        Some(kinds) => store.frames().of_kinds(&sid, kinds, start, limit).await?,
        None => store.frames().from(&sid, start, limit).await?,
    };
    let next_after = (page.len() == limit as usize)
        .then(|| page.last().map(|f| f.sequence))
        .flatten();
    let mut body = format!(
        "{{\"session_id\":{},\"replay_floor\":{floor},\"last_sequence\":{},\"frames\":[",
        serde_json::Value::String(sid.to_string()),
        view.row.last_sequence
    )
    .into_bytes();
    for (i, f) in page.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&envelope(f));
    }
    body.extend_from_slice(
        format!(
            "],\"next_after\":{}}}",
            next_after.map_or("null".to_owned(), |n| n.to_string())
        )
        .as_bytes(),
    );
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The session as an asciicast v2 recording, streamed from its stored frames.
pub async fn recording(
    State(state): State<AppState>,
    who: Principal,
    Path(SessionPath { sid }): Path<SessionPath>,
) -> Result<Response, ApiError> {
    let v = visible(&state, &who, &sid).await?;
    let body = axum::body::Body::from_stream(crate::recording::cast(state.store.clone(), v.row));
    let disposition = format!("attachment; filename=\"{sid}.cast\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-asciicast".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        body,
    )
        .into_response())
}
