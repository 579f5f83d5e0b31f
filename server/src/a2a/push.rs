//! Push notifications: each task's webhook configs, kept in the store, and the delivery of
//! the task's updates to them — in order per config, retried with backoff, and signed over
//! the raw body so a receiver can verify a delivery before it parses it.
//!
//! A delivery is `POST {url}` with the body of one event and these headers:
//! `Content-Type: application/a2a+json` (a 1.0 StreamResponse) or `application/json` (a 0.3
//! config gets the 0.3 Task, on status changes only); `Authorization: {scheme} {credentials}`
//! when the config has `authentication`; `X-A2A-Notification-Token: {token}`; and, after the
//! Standard Webhooks scheme, `webhook-id` (the event id: stable across retries, new per
//! event), `webhook-timestamp` (unix seconds of the attempt) and `webhook-signature:
//! v1,{base64 HMAC-SHA256(token, "{webhook-id}.{webhook-timestamp}.{body}")}`. Every config
//! has a token: the server makes one (returned with the config) when the client gives none.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use hmac::{Hmac, Mac};
use reqwest::{StatusCode, Url};
use sha2::Sha256;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use wire::a2a::{StreamResponse, Task, TaskPushNotificationConfig};

use super::{A2aError, Version, v03};
use crate::clock;
use crate::store::{PushConfigRow, Store};

/// Attempts per delivery; the first retry waits this long, each later one twice as long.
const ATTEMPTS: u32 = 6;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
/// Configs one task may have.
const MAX_CONFIGS: usize = 16;
const MAX_URL: usize = 2048;
const MAX_SECRET: usize = 4096;

/// Which webhook targets deliveries may reach. Link-local (cloud metadata), unspecified,
/// multicast and broadcast addresses never; loopback and private ones only when allowed.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    pub allow_loopback: bool,
}

impl Guard {
    pub fn allows(self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (never, local) = match ip {
            IpAddr::V4(a) => (
                a.is_unspecified() || a.is_link_local() || a.is_multicast() || a.is_broadcast(),
                a.is_loopback()
                    || a.is_private()
                    || (a.octets()[0] == 100 && a.octets()[1] & 0xc0 == 64),
            ),
            IpAddr::V6(a) => (
                a.is_unspecified() || a.is_multicast() || a.segments()[0] & 0xffc0 == 0xfe80,
                a.is_loopback() || a.segments()[0] & 0xfe00 == 0xfc00,
            ),
        };
        !never && (!local || self.allow_loopback)
    }

    /// The addresses of `host` deliveries may use (an error when there are none).
    async fn resolve(self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("{host} does not resolve: {e}"))?
            .collect();
        let allowed: Vec<SocketAddr> = found
            .iter()
            .copied()
            .filter(|a| self.allows(a.ip()))
            .collect();
        if allowed.is_empty() {
            return Err(format!(
                "{host} resolves only to loopback, private or link-local addresses, which push \
                 deliveries may not reach (start ptyhost with --push-allow-loopback to allow \
                 loopback and private targets)"
            ));
        }
        Ok(allowed)
    }
}

/// Resolves delivery hosts at connect time through the guard, so a name that is rebound to
/// an internal address after the config was checked still cannot be reached.
struct GuardedResolver(Guard);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0;
        Box::pin(async move {
            let addrs = guard.resolve(name.as_str(), 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A config and the protocol version its deliveries speak.
#[derive(Debug, Clone)]
pub struct Target {
    pub config: TaskPushNotificationConfig,
    pub version: Version,
}

#[derive(Clone)]
pub struct Push {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    client: reqwest::Client,
    guard: Guard,
    /// The delivery queues of tasks that still run, by task id.
    queues: Mutex<HashMap<String, Vec<Queue>>>,
}

struct Queue {
    config_id: String,
    version: Version,
    tx: mpsc::UnboundedSender<Delivery>,
    /// Cancelled when the config is deleted or replaced: no further attempt is made.
    stop: CancellationToken,
}

struct Delivery {
    event_id: String,
    body: Bytes,
}

impl Push {
    pub fn new(store: Store, guard: Guard) -> anyhow::Result<Push> {
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver(guard)))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(ATTEMPT_TIMEOUT)
            .user_agent(concat!("ptyhost/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Push {
            inner: Arc::new(Inner {
                store,
                client,
                guard,
                queues: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Checks a config and completes it for `task_id`: its id (given, or new), its token
    /// (given, or new: every config signs). Nothing is stored yet.
    pub async fn prepare(
        &self,
        task_id: &str,
        mut config: TaskPushNotificationConfig,
        version: Version,
    ) -> Result<Target, A2aError> {
        let invalid = A2aError::InvalidParams;
        if !config.task_id.is_empty() && config.task_id != task_id {
            return Err(invalid(format!(
                "taskId {:?} does not match the task {task_id}",
                config.task_id
            )));
        }
        config.task_id = task_id.to_owned();
        self.check_url(&config.url).await.map_err(invalid)?;
        if config.id.is_empty() {
            config.id = match version {
                // 0.3 servers named a task's one config after the task.
                Version::V03 => task_id.to_owned(),
                Version::V1 => uuid::Uuid::now_v7().to_string(),
            };
        }
        if config.id.len() > 256 || config.id.chars().any(|c| c.is_control() || c == '/') {
            return Err(invalid(
                "id must be at most 256 characters, without '/' or controls".into(),
            ));
        }
        match &config.token {
            Some(t) if !is_header_token(t) => {
                return Err(invalid(
                    "token must be 1–4096 visible ASCII characters".into(),
                ));
            }
            Some(_) => {}
            None => {
                config.token = Some(URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()));
            }
        }
        if let Some(auth) = &config.authentication {
            let scheme_ok = !auth.scheme.is_empty()
                && auth.scheme.len() <= 64
                && auth
                    .scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c));
            if !scheme_ok {
                return Err(invalid(
                    "authentication.scheme must be an HTTP auth scheme name".into(),
                ));
            }
            if auth.credentials.as_deref().is_some_and(|c| {
                c.len() > MAX_SECRET || c.chars().any(|c| !(' '..='~').contains(&c))
            }) {
                return Err(invalid(
                    "authentication.credentials must be printable ASCII".into(),
                ));
            }
        }
        Ok(Target { config, version })
    }

    async fn check_url(&self, raw: &str) -> Result<(), String> {
        if raw.len() > MAX_URL {
            return Err(format!("url is longer than {MAX_URL} bytes"));
        }
        let url =
            Url::parse(raw).map_err(|e| format!("url {raw:?} is not an absolute URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("url must be http or https".into());
        }
        let port = url.port_or_known_default().unwrap_or(443);
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip)),
            Some(url::Host::Domain(name)) => self.inner.guard.resolve(name, port).await.map(drop),
            None => Err("url has no host".into()),
        }
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        if self.inner.guard.allows(ip) {
            Ok(())
        } else {
            Err(format!(
                "{ip} is a loopback, private or link-local address, which push deliveries may \
                 not reach (start ptyhost with --push-allow-loopback to allow loopback and \
                 private targets)"
            ))
        }
    }

    /// Stores a prepared config (replacing one with its id) and, when `live` says the task
    /// still runs, starts delivering the task's next events to it. Call it under the task's
    /// feed gate so no event falls between the check and the queue.
    pub async fn store(&self, target: &Target) -> Result<(), A2aError> {
        let config = &target.config;
        let existing = self
            .inner
            .store
            .tasks()
            .push(&config.task_id, &config.id)
            .await?;
        if existing.is_none() {
            let count = self
                .inner
                .store
                .tasks()
                .pushes(&config.task_id, None, MAX_CONFIGS as u32)
                .await?
                .len();
            if count >= MAX_CONFIGS {
                return Err(A2aError::InvalidParams(format!(
                    "a task takes at most {MAX_CONFIGS} push notification configs"
                )));
            }
        }
        self.inner
            .store
            .tasks()
            .put_push(&PushConfigRow {
                task_id: config.task_id.clone(),
                id: config.id.clone(),
                version: target.version.label().to_owned(),
                config: serde_json::to_string(config).map_err(anyhow::Error::from)?,
                created_at: existing.map_or_else(clock::now_ms, |e| e.created_at),
            })
            .await?;
        Ok(())
    }

    /// Starts delivering a running task's next events to a stored config.
    pub fn open(&self, target: Target) {
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let queue = Queue {
            config_id: target.config.id.clone(),
            version: target.version,
            tx,
            stop: stop.clone(),
        };
        let mut queues = self.inner.queues.lock().unwrap();
        let list = queues.entry(target.config.task_id.clone()).or_default();
        list.retain(|q| {
            let same = q.config_id == queue.config_id;
            if same {
                q.stop.cancel();
            }
            !same
        });
        list.push(queue);
        drop(queues);
        tokio::spawn(deliver(self.inner.clone(), target, rx, stop));
    }

    /// Hands one event of `task` (already applied to it) to the task's queues. Called in
    /// event order; a terminal status is the last event a queue takes.
    pub fn notify(&self, task: &Task, event: &StreamResponse) {
        let mut queues = self.inner.queues.lock().unwrap();
        let Some(list) = queues.get(&task.id) else {
            return;
        };
        let status_change = matches!(
            event,
            StreamResponse::StatusUpdate(_) | StreamResponse::Task(_)
        );
        let event_id = uuid::Uuid::now_v7().to_string();
        let (mut v1, mut legacy) = (None, None);
        for q in list {
            let body = match q.version {
                Version::V1 => v1
                    .get_or_insert_with(|| {
                        Bytes::from(serde_json::to_vec(event).unwrap_or_default())
                    })
                    .clone(),
                Version::V03 if status_change => legacy
                    .get_or_insert_with(|| Bytes::from(v03::task(task).to_string()))
                    .clone(),
                Version::V03 => continue,
            };
            let _ = q.tx.send(Delivery {
                event_id: event_id.clone(),
                body,
            });
        }
        if task.status.state.is_terminal() && status_change {
            queues.remove(&task.id);
        }
    }

    /// After a restart: delivers a recovered task's final event to its stored configs.
    pub async fn resume(&self, task: &Task, event: &StreamResponse) -> anyhow::Result<()> {
        for row in self
            .inner
            .store
            .tasks()
            .pushes(&task.id, None, MAX_CONFIGS as u32)
            .await?
        {
            self.open(target_of(&row)?);
        }
        self.notify(task, event);
        Ok(())
    }

    pub async fn get(&self, task_id: &str, id: &str) -> Result<Target, A2aError> {
        match self.inner.store.tasks().push(task_id, id).await? {
            Some(row) => Ok(target_of(&row)?),
            None => Err(A2aError::PushConfigNotFound {
                task: task_id.to_owned(),
                config: id.to_owned(),
            }),
        }
    }

    /// A page of a task's configs in creation order, and the next page's token ("" at the end).
    pub async fn list(
        &self,
        task_id: &str,
        page_size: Option<u32>,
        page_token: Option<&str>,
    ) -> Result<(Vec<Target>, String), A2aError> {
        let size = page_size
            .filter(|n| *n > 0)
            .unwrap_or(MAX_CONFIGS as u32)
            .min(100);
        let after = page_token.filter(|t| !t.is_empty());
        if let Some(t) = after
            && self.inner.store.tasks().push(task_id, t).await?.is_none()
        {
            return Err(A2aError::InvalidParams(
                "pageToken is not one of ours".into(),
            ));
        }
        let mut rows = self
            .inner
            .store
            .tasks()
            .pushes(task_id, after, size + 1)
            .await?;
        let next = if rows.len() > size as usize {
            rows.truncate(size as usize);
            rows.last().map(|r| r.id.clone()).unwrap_or_default()
        } else {
            String::new()
        };
        let targets = rows.iter().map(target_of).collect::<anyhow::Result<_>>()?;
        Ok((targets, next))
    }

    /// Deletes a config and stops its deliveries; deleting what is not there is no error.
    pub async fn delete(&self, task_id: &str, id: &str) -> Result<(), A2aError> {
        self.inner.store.tasks().delete_push(task_id, id).await?;
        let mut queues = self.inner.queues.lock().unwrap();
        if let Some(list) = queues.get_mut(task_id) {
            list.retain(|q| {
                let gone = q.config_id == id;
                if gone {
                    q.stop.cancel();
                }
                !gone
            });
        }
        Ok(())
    }
}

fn target_of(row: &PushConfigRow) -> anyhow::Result<Target> {
    Ok(Target {
        config: serde_json::from_str(&row.config)?,
        version: Version::from_label(&row.version).ok_or_else(|| {
            anyhow::anyhow!("push config {} has version {:?}", row.id, row.version)
        })?,
    })
}

fn is_header_token(t: &str) -> bool {
    !t.is_empty() && t.len() <= MAX_SECRET && t.chars().all(|c| ('!'..='~').contains(&c))
}

/// Delivers a config's events one after another until the task ends or the config goes.
async fn deliver(
    inner: Arc<Inner>,
    target: Target,
    mut rx: mpsc::UnboundedReceiver<Delivery>,
    stop: CancellationToken,
) {
    loop {
        let delivery = tokio::select! {
            _ = stop.cancelled() => return,
            d = rx.recv() => match d {
                Some(d) => d,
                None => return,
            },
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = post(&inner.client, &target, &delivery) => {}
        }
    }
}

/// One delivery: retried with backoff on transport errors, timeouts, 408, 429 and 5xx.
async fn post(client: &reqwest::Client, target: &Target, d: &Delivery) {
    let config = &target.config;
    let mut wait = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let outcome = attempt_once(client, target, d).await;
        let retry = match &outcome {
            Ok(s) if s.is_success() => return,
            Ok(s) => {
                *s == StatusCode::REQUEST_TIMEOUT
                    || *s == StatusCode::TOO_MANY_REQUESTS
                    || s.is_server_error()
            }
            Err(_) => true,
        };
        let what = match &outcome {
            Ok(s) => s.to_string(),
            Err(e) => format!("{e:#}"),
        };
        if !retry || attempt == ATTEMPTS {
            tracing::warn!(
                task_id = %config.task_id, config_id = %config.id, event_id = %d.event_id,
                attempts = attempt, outcome = %what, "push delivery abandoned"
            );
            return;
        }
        tracing::debug!(
            task_id = %config.task_id, config_id = %config.id, event_id = %d.event_id,
            attempt, outcome = %what, "push delivery failed; retrying"
        );
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}

async fn attempt_once(
    client: &reqwest::Client,
    target: &Target,
    d: &Delivery,
) -> Result<StatusCode, reqwest::Error> {
    let config = &target.config;
    let timestamp = clock::now_ms() / 1000;
    let mut req = client
        .post(&config.url)
        .header(
            reqwest::header::CONTENT_TYPE,
            match target.version {
                Version::V1 => "application/a2a+json",
                Version::V03 => "application/json",
            },
        )
        .header("webhook-id", &d.event_id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(token) = &config.token {
        req = req.header("X-A2A-Notification-Token", token).header(
            "webhook-signature",
            signature(token, &d.event_id, timestamp, &d.body),
        );
    }
    if let Some(auth) = &config.authentication {
        let value = match &auth.credentials {
            Some(c) => format!("{} {c}", auth.scheme),
            None => auth.scheme.clone(),
        };
        req = req.header(reqwest::header::AUTHORIZATION, value);
    }
    Ok(req.body(d.body.clone()).send().await?.status())
}

/// `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed by the token.
pub fn signature(token: &str, event_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(format!("{event_id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_refuses_internal_targets_unless_loopback_is_allowed() {
        let strict = Guard {
            allow_loopback: false,
        };
        let lax = Guard {
            allow_loopback: true,
        };
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!strict.allows(ip), "{ip}");
            assert!(lax.allows(ip), "{ip}");
        }
        for ip in ["169.254.169.254", "0.0.0.0", "fe80::1", "224.0.0.1", "::"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!strict.allows(ip) && !lax.allows(ip), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::1"] {
            assert!(strict.allows(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn signatures_are_hmac_sha256_over_id_timestamp_and_body() {
        // Computed independently with Python's hmac module.
        let body = br#"{"statusUpdate":{}}"#;
        assert_eq!(
            signature("tok-3f9a", "evt-1", 1614265330, body),
            "v1,fvRid8W2Cd5vXe/aPaIK5L6bc5ZBOjXMph1N9pmEmQ0="
        );
        assert_ne!(
            signature("tok-3f9a", "evt-2", 1614265330, body),
            signature("tok-3f9a", "evt-1", 1614265330, body)
        );
    }
}
