//! The push-notification config operations of a task.

use wire::a2a::TaskPushNotificationConfig;

use super::{TaskService, require};
use crate::a2a::push::Target;
use crate::a2a::{A2aError, Version};
use crate::auth::{Principal, Scope};

impl TaskService {
    /// Stores a push config and, while its task runs here, delivers the task's next events
    /// to it (decided under the feed's gate, so no event falls in between).
    pub(super) async fn attach(&self, target: Target) -> Result<(), A2aError> {
        self.inner.push.store(&target).await?;
        if let Some(feed) = self.feed(&target.config.task_id) {
            let _gate = feed.gate.lock().unwrap();
            if !feed.snapshot.borrow().status.state.is_terminal() {
                self.inner.push.open(target);
            }
        }
        Ok(())
    }

    /// CreateTaskPushNotificationConfig: the config as stored (with its id and token).
    pub async fn create_push(
        &self,
        who: &Principal,
        version: Version,
        task_id: &str,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        let target = self.inner.push.prepare(task_id, config, version).await?;
        let config = target.config.clone();
        self.attach(target).await?;
        Ok(config)
    }

    /// GetTaskPushNotificationConfig. Configs hold credentials: reading them needs control.
    pub async fn get_push(
        &self,
        who: &Principal,
        task_id: &str,
        id: &str,
    ) -> Result<TaskPushNotificationConfig, A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        Ok(self.inner.push.get(task_id, id).await?.config)
    }

    /// ListTaskPushNotificationConfigs: a page of configs and the next page's token.
    pub async fn list_push(
        &self,
        who: &Principal,
        task_id: &str,
        page_size: Option<u32>,
        page_token: Option<&str>,
    ) -> Result<(Vec<TaskPushNotificationConfig>, String), A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        let (targets, next) = self.inner.push.list(task_id, page_size, page_token).await?;
        Ok((targets.into_iter().map(|t| t.config).collect(), next))
    }

    /// DeleteTaskPushNotificationConfig (idempotent).
    pub async fn delete_push(
        &self,
        who: &Principal,
        task_id: &str,
        id: &str,
    ) -> Result<(), A2aError> {
        require(who, Scope::Control)?;
        self.get(who, task_id, Some(0)).await?;
        self.inner.push.delete(task_id, id).await
    }
}
