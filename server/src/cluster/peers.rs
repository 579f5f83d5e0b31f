//! The other nodes as the task service calls them: A2A 1.0 JSON-RPC on the node that runs
//! a session, carrying the principal this node authenticated.

use crate::sessions::SessionId;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::Value;
use wire::a2a::StreamResponse;

use super::{Node, Owner};
use crate::a2a::service::Cluster;
use crate::a2a::{A2aError, Version};
use crate::auth::Principal;
use crate::client::{Binding, ClientError, Interface, Link};
use crate::sessions::Sessions;

/// This node's view of where sessions run, and its way of calling the others.
pub struct Peers {
    pub node: Node,
    pub sessions: Sessions,
    pub instance_id: String,
}

impl Peers {
    fn connection(&self, url: &str, who: &Principal, extensions: &[&str]) -> Link {
        let mut headers: reqwest::header::HeaderMap = super::forward::headers(&self.node, who)
            .into_iter()
            .map(|(name, value)| (reqwest::header::HeaderName::from_static(name), value))
            .collect();
        if !extensions.is_empty()
            && let Ok(listed) = extensions.join(", ").parse()
        {
            headers.insert(crate::extensions::HEADER, listed);
        }
        Link {
            http: self.node.http().clone(),
            token: None,
            iface: Interface {
                version: Version::V1,
                binding: Binding::JsonRpc,
                url: format!("{url}/agents/{}/jsonrpc", self.instance_id),
            },
            headers,
        }
    }
}

#[async_trait::async_trait]
impl Cluster for Peers {
    async fn node_of(&self, context_id: &str) -> anyhow::Result<Option<String>> {
        if self.sessions.live(&SessionId::from(context_id)).is_some() {
            return Ok(None);
        }
        let Some(row) = self.sessions.store().sessions().get(context_id).await? else {
            return Ok(None);
        };
        Ok(match self.node.owner(&row).await? {
            Owner::There { url, .. } => Some(url),
            Owner::Here => None,
        })
    }

    async fn call(
        &self,
        node: &str,
        who: &Principal,
        method: &str,
        params: Value,
        extensions: &[&str],
        subject: &str,
    ) -> Result<Value, A2aError> {
        let unused = (reqwest::Method::POST, String::new());
        (self.connection(node, who, extensions))
            .exchange((method, ""), unused, params)
            .await
            .map(|(result, _)| result)
            .map_err(|e| a2a_error(e, subject))
    }

    async fn stream(
        &self,
        node: &str,
        who: &Principal,
        method: &str,
        params: Value,
        extensions: &[&str],
        subject: &str,
    ) -> Result<BoxStream<'static, Result<StreamResponse, A2aError>>, A2aError> {
        let events = (self.connection(node, who, extensions))
            .stream((method, ""), String::new(), params)
            .await
            .map_err(|e| a2a_error(e, subject))?;
        let subject = subject.to_owned();
        Ok(events
            .map(move |event| event.map_err(|e| a2a_error(e, &subject)))
            .boxed())
    }
}

/// The error the other node answered, as this node reports it; anything that is not an
/// A2A error (the node went away) is internal.
fn a2a_error(e: ClientError, subject: &str) -> A2aError {
    let ClientError::A2a {
        reason, message, ..
    } = e
    else {
        tracing::warn!(error = %e, "a request forwarded to another node failed");
        return A2aError::Internal;
    };
    match reason.as_str() {
        "TASK_NOT_FOUND" => A2aError::TaskNotFound(subject.to_owned()),
        "TASK_NOT_CANCELABLE" => A2aError::TaskNotCancelable(subject.to_owned()),
        "UNSUPPORTED_OPERATION" => A2aError::UnsupportedOperation(message),
        "CONTENT_TYPE_NOT_SUPPORTED" => A2aError::ContentTypeNotSupported(message),
        "EXTENSION_SUPPORT_REQUIRED" => A2aError::ExtensionSupportRequired(message),
        "INVALID_REQUEST" => A2aError::InvalidRequest(message),
        "INVALID_PARAMS" => A2aError::InvalidParams(message),
        "UNAUTHENTICATED" => A2aError::Unauthenticated(message),
        "PERMISSION_DENIED" => A2aError::PermissionDenied(message),
        _ => A2aError::Internal,
    }
}
