//! Several nodes on one store. Each node heartbeats its row; a session runs on the node
//! that created it, and any other node forwards to that owner what needs the running
//! session (`forward`). A node whose heartbeat is older than the timeout is dead: a
//! surviving node closes each of its sessions once (`node_lost`) and fails their
//! unfinished tasks, and their history stays readable everywhere.

pub mod forward;
mod peers;

pub use peers::Peers;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::a2a::service::TaskService;
use crate::clock;
use crate::sessions::Sessions;
use crate::store::{NodeRow, SessionRow, Store, TasksOf};

/// The header that carries the cluster's secret on a request one node forwards to another
/// (with the principal the first node authenticated).
pub const FORWARD_HEADER: &str = "x-ptyhost-forward";

#[derive(Debug, Clone)]
pub struct NodeSettings {
    /// None: the id kept in the data dir (made on first start).
    pub id: Option<String>,
    pub advertise_url: String,
    pub timeout: Duration,
}

/// This node: its id, where the others reach it, and the secret they forward with.
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    advertise_url: String,
    timeout: Duration,
    secret: String,
    /// Its hash, which forwarded secrets are compared with.
    secret_hash: String,
    store: Store,
    /// For requests forwarded to other nodes.
    http: reqwest::Client,
}

/// Where a session runs, as this node sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Owner {
    /// Here, or nowhere any more (a closed session's history is read from the store).
    Here,
    /// On a live node, reached at this URL.
    There { node_id: String, url: String },
}

impl Node {
    /// Registers this node (started now) in the store.
    pub async fn join(store: &Store, data_dir: &Path, settings: NodeSettings) -> Result<Node> {
        let id = match settings.id {
            Some(id) => id,
            None => kept_id(data_dir)?,
        };
        store
            .nodes()
            .started(&id, &settings.advertise_url, clock::now_ms())
            .await?;
        let secret = store
            .nodes()
            .cluster_value("forward_secret", &crate::auth::random_token())
            .await?;
        Ok(Node {
            inner: Arc::new(Inner {
                id,
                advertise_url: settings.advertise_url,
                timeout: settings.timeout,
                secret_hash: crate::auth::hash(&secret),
                secret,
                store: store.clone(),
                http: reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .build()?,
            }),
        })
    }

    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// How long a node may miss heartbeats before it counts as dead.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    pub fn advertise_url(&self) -> &str {
        &self.inner.advertise_url
    }

    /// Whether `value` is the cluster's forwarding secret (compared as hashes, so the time
    /// taken says nothing about the secret).
    pub fn is_secret(&self, value: &str) -> bool {
        crate::auth::hash(value) == self.inner.secret_hash
    }

    pub fn secret(&self) -> &str {
        &self.inner.secret
    }

    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    fn alive(&self, last_seen: i64, now: i64) -> bool {
        now - last_seen <= self.inner.timeout.as_millis() as i64
    }

    /// Where session `row` runs: another node only while it is running there and that
    /// node is alive.
    pub async fn owner(&self, row: &SessionRow) -> Result<Owner> {
        if row.node_id == self.inner.id || row.node_id.is_empty() || row.state != "running" {
            return Ok(Owner::Here);
        }
        Ok(match self.inner.store.nodes().get(&row.node_id).await? {
            Some(n) if self.alive(n.last_seen, clock::now_ms()) => Owner::There {
                node_id: n.id,
                url: n.advertise_url,
            },
            _ => Owner::Here,
        })
    }

    /// Every node in the store, with whether it is alive now.
    pub async fn list(&self) -> Result<Vec<(NodeRow, bool)>> {
        let now = clock::now_ms();
        Ok(self
            .inner
            .store
            .nodes()
            .all()
            .await?
            .into_iter()
            .map(|n| {
                let alive = self.alive(n.last_seen, now);
                (n, alive)
            })
            .collect())
    }

    /// Heartbeats for as long as the process runs, and closes what dead nodes left running.
    /// A node reaps only after its own heartbeats have landed on time (each within a beat
    /// period) for a whole timeout: after the store was unreachable or slow, a heartbeat
    /// that waited for it wrote a stale time, so every live node gets that long to beat
    /// again before any is taken for dead.
    pub fn start(&self, sessions: Sessions, tasks: TaskService) {
        let node = self.clone();
        let every = (self.inner.timeout / 5).max(Duration::from_millis(100));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut on_time_since = None;
            loop {
                tick.tick().await;
                let began = Instant::now();
                let beat = node
                    .inner
                    .store
                    .nodes()
                    .seen(&node.inner.id, clock::now_ms())
                    .await;
                if let Err(e) = &beat {
                    tracing::warn!(error = %format!("{e:#}"), "node heartbeat failed");
                }
                if beat.is_err() || began.elapsed() > every {
                    on_time_since = None;
                    continue;
                }
                if on_time_since.get_or_insert(began).elapsed() < node.inner.timeout {
                    continue;
                }
                if let Err(e) = node.reap(&sessions, &tasks, clock::now_ms()).await {
                    tracing::warn!(error = %format!("{e:#}"), "closing a dead node's sessions failed");
                }
            }
        });
    }

    /// Closes the running sessions of nodes dead at `now`, each exactly once across the
    /// cluster, and fails their unfinished tasks.
    async fn reap(&self, sessions: &Sessions, tasks: &TaskService, now: i64) -> Result<()> {
        let cutoff = now - self.inner.timeout.as_millis() as i64;
        for row in (self.inner.store)
            .nodes()
            .sessions_of_dead_nodes(&self.inner.id, cutoff)
            .await?
        {
            if sessions.close_lost(&row).await? {
                tracing::warn!(session_id = %row.id, node_id = %row.node_id, "closed a session its node lost");
                let why = "the node running the task was lost";
                tasks
                    .fail_unfinished(TasksOf::Context(&row.id), why)
                    .await?;
            }
        }
        Ok(())
    }
}

/// The id kept in `DIR/node-id`, made (a UUIDv7) on first start.
fn kept_id(data_dir: &Path) -> Result<String> {
    let path = data_dir.join("node-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        _ => {
            std::fs::create_dir_all(data_dir)?;
            let id = uuid::Uuid::now_v7().to_string();
            std::fs::write(&path, format!("{id}\n"))
                .with_context(|| format!("writing {}", path.display()))?;
            Ok(id)
        }
    }
}
