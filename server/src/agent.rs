//! The agent without its transports, which `serve`, `stdio` and `mcp` run.

use anyhow::{Context, Result};

use crate::a2a::{self, push};
use crate::config::{self, StoreArgs};
use crate::sessions::{self, Sessions};
use crate::store::Store;
use crate::{a202, agentic, audit, cluster, executor};

/// The agent without its transports: the store, the audit trail, the sessions and the
/// task service, recovered from what a previous process left.
pub struct Agent {
    pub store: Store,
    pub node: cluster::Node,
    pub audit: audit::Audit,
    pub sessions: Sessions,
    pub tasks: a2a::service::TaskService,
}

impl Agent {
    pub async fn start(
        store_args: &StoreArgs,
        mut settings: sessions::SessionSettings,
        session: &config::SessionArgs,
        instance_id: &str,
        node: cluster::NodeSettings,
        push_allow_loopback: bool,
        base_url: Option<String>,
    ) -> Result<Agent> {
        let store = Store::open(store_args.database_url.as_deref(), &store_args.data_dir).await?;
        let node = cluster::Node::join(&store, &store_args.data_dir, node).await?;
        settings.shell_rc = sessions::install_shell_rc(&store_args.data_dir)
            .context("writing the shell-integration rc file")?;
        settings.sandbox = session.sandbox.settings(&store_args.data_dir)?;
        settings.tmux_socket =
            sessions::host::tmux_socket(&std::fs::canonicalize(&store_args.data_dir)?);
        let agentic = agentic::Agentic::start(
            &store,
            (instance_id, node.id()),
            agentic::ExtensionSettings {
                profile: session.agentic.profile,
                idempotency_ttl: session.agentic.idempotency_ttl,
                sandboxed: settings.sandbox.enabled,
                loadout: session.executor.name(),
            },
        )
        .await?;
        let audit = audit::Audit::start(store.clone());
        let sessions = Sessions::new(
            store.clone(),
            audit.clone(),
            settings,
            instance_id.to_owned(),
            node.id().to_owned(),
        );
        sessions.recover().await?;
        sessions.fill_pool();
        sessions::retention::start(&sessions);
        let guard = push::Guard {
            allow_loopback: push_allow_loopback,
        };
        let push = push::Push::new(store.clone(), guard)?;
        let a202 = a202::A202::new(&session.a202.settings()?, store.clone())?;
        let tasks = a2a::service::TaskService::new(
            store.clone(),
            session.executor.build(
                sessions.clone(),
                executor::shell::FileAccess {
                    settings: session.files.settings(),
                    base_url,
                },
            ),
            push,
            a202,
            agentic,
            std::sync::Arc::new(cluster::Peers {
                node: node.clone(),
                sessions: sessions.clone(),
                instance_id: instance_id.to_owned(),
            }),
        );
        tasks.recover(node.id()).await?;
        node.start(sessions.clone(), tasks.clone());
        Ok(Agent {
            store,
            node,
            audit,
            sessions,
            tasks,
        })
    }
}
