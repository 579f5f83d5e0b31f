//! The version policy at work: the first candidate, and under `auto` with fallback a 0.3
//! one when (and only when) the server answers VersionNotSupported; interfaces that did are
//! remembered for an hour.

use super::connection::Link;
use super::{CACHE_TTL_MS, ClientError, Interface, Policy};
use crate::a2a::Version;

/// Runs `op` on the first candidate; under `auto` with fallback, a VersionNotSupported
/// answer (and nothing else) moves on to the first 0.3 candidate.
pub async fn with_policy<T, F, Fut>(
    http: &reqwest::Client,
    token: Option<&str>,
    candidates: &[Interface],
    policy: Policy,
    fallback: bool,
    op: F,
) -> Result<(Interface, T), ClientError>
where
    F: Fn(Link) -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let connect = |iface: &Interface| Link {
        http: http.clone(),
        token: token.map(str::to_owned),
        iface: iface.clone(),
        headers: Default::default(),
    };
    let first = candidates
        .first()
        .ok_or_else(|| ClientError::NoInterface(format!("no interface for policy {policy:?}")))?;
    let legacy = candidates.iter().find(|i| i.version == Version::V03);
    let may_fall_back = policy == Policy::Auto && fallback;
    let mut cache = InterfaceCache::load();
    if let (true, Some(legacy)) = (may_fall_back && cache.refused(first), legacy) {
        tracing::info!(skipped = %first.url, to = %legacy.url, "cached: that interface refused A2A 1.0 lately; using 0.3");
        return op(connect(legacy)).await.map(|t| (legacy.clone(), t));
    }
    match op(connect(first)).await {
        Err(e) if e.version_not_supported() && may_fall_back => {
            let Some(legacy) = legacy else {
                return Err(e);
            };
            cache.mark(first, true);
            tracing::info!(from = %first.url, to = %legacy.url, "VersionNotSupported: falling back to A2A 0.3");
            op(connect(legacy)).await.map(|t| (legacy.clone(), t))
        }
        other => {
            if other.is_ok() {
                cache.mark(first, false);
            }
            other.map(|t| (first.clone(), t))
        }
    }
}

/// Interfaces that answered VersionNotSupported, keyed by (version, binding, url) and kept
/// for an hour in `PTYHOST_A2A_CACHE` (default `~/.cache/ptyhost/a2a-interfaces.json`), so
/// `auto` with fallback goes straight to 0.3 instead of being refused again. An interface
/// that answers clears its mark; a card that changes its URLs has new keys.
pub(super) struct InterfaceCache {
    path: Option<std::path::PathBuf>,
    refused: std::collections::HashMap<String, i64>,
}

impl InterfaceCache {
    pub(super) fn load() -> InterfaceCache {
        let path = std::env::var_os("PTYHOST_A2A_CACHE")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .map(std::path::PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache"))
                    })?;
                Some(base.join("ptyhost").join("a2a-interfaces.json"))
            });
        let refused = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        InterfaceCache { path, refused }
    }

    pub(super) fn key(iface: &Interface) -> String {
        format!(
            "{}|{}|{}",
            iface.version.label(),
            iface.binding.name(),
            iface.url
        )
    }

    pub(super) fn refused(&self, iface: &Interface) -> bool {
        let now = crate::clock::now_ms();
        self.refused
            .get(&Self::key(iface))
            .is_some_and(|at| now - at < CACHE_TTL_MS)
    }

    pub(super) fn mark(&mut self, iface: &Interface, refused: bool) {
        let key = Self::key(iface);
        let changed = if refused {
            self.refused.insert(key, crate::clock::now_ms());
            true
        } else {
            self.refused.remove(&key).is_some()
        };
        if let (true, Some(path)) = (changed, &self.path) {
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    std::fs::write(
                        path,
                        serde_json::to_string(&self.refused).unwrap_or_default(),
                    )
                });
            if let Err(e) = written {
                tracing::debug!(error = %e, "the interface cache was not written");
            }
        }
    }
}
