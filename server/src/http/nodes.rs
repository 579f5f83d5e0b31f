//! `GET /nodes` (pty:admin): the nodes of the cluster, as the store knows them.

use axum::Json;
use axum::extract::State;
use wire::control;

use crate::auth::{Principal, Scope};
use crate::clock;
use crate::state::{ApiError, AppState, require};

pub async fn list(
    State(state): State<AppState>,
    who: Principal,
) -> Result<Json<control::Nodes>, ApiError> {
    require(&who, Scope::Admin)?;
    let nodes = state.node.list().await?;
    Ok(Json(control::Nodes {
        nodes: nodes
            .into_iter()
            .map(|(n, alive)| control::Node {
                node_id: n.id,
                advertise_url: n.advertise_url,
                started_at: clock::rfc3339(n.started_at),
                last_seen: clock::rfc3339(n.last_seen),
                alive,
                sessions: n.sessions.max(0) as u64,
            })
            .collect(),
    }))
}
