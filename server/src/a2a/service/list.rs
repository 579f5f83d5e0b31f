//! ListTasks: newest status first, with an opaque cursor.

use base64::Engine as _;
use wire::a2a::{ListTasksRequest, TaskState};

use super::{TaskService, require};
use crate::a2a::A2aError;
use crate::auth::{Principal, Scope};
use crate::store::TaskFilter;
use wire::a2a::ListTasksResponse;

pub(super) fn parse_ms(ts: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

pub(super) fn encode_cursor(at: i64, id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{at}:{id}"))
}

pub(super) fn decode_cursor(token: &str) -> Option<(i64, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (at, id) = text.split_once(':')?;
    Some((at.parse().ok()?, id.to_owned()))
}

impl TaskService {
    /// ListTasks, newest status first, with a cursor.
    pub async fn list(
        &self,
        who: &Principal,
        q: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2aError> {
        require(who, Scope::Observe)?;
        let status_after_ms = match &q.status_timestamp_after {
            Some(t) => Some(parse_ms(t).ok_or_else(|| {
                A2aError::InvalidParams(format!("statusTimestampAfter {t:?} is not RFC 3339"))
            })?),
            None => None,
        };
        let page_size = q.page_size.unwrap_or(50);
        if !(1..=100).contains(&page_size) {
            return Err(A2aError::InvalidParams(
                "pageSize must be between 1 and 100".into(),
            ));
        }
        if let (Some(bound), Some(asked)) = (&who.session_id, &q.context_id)
            && bound != asked
        {
            return Ok(ListTasksResponse {
                tasks: Vec::new(),
                next_page_token: String::new(),
                page_size,
                total_size: 0,
            });
        }
        let cursor =
            match q.page_token.as_deref().filter(|t| !t.is_empty()) {
                Some(t) => Some(decode_cursor(t).ok_or_else(|| {
                    A2aError::InvalidParams("pageToken is not one of ours".into())
                })?),
                None => None,
            };
        let context = q.context_id.as_deref().or(who.session_id.as_deref());
        let (rows, total) = self
            .inner
            .store
            .tasks()
            .list(&TaskFilter {
                context_id: context,
                state: q.status.map(TaskState::name),
                status_after_ms,
                after: cursor.as_ref().map(|(t, id)| (*t, id.as_str())),
                limit: page_size + 1,
            })
            .await?;
        let more = rows.len() > page_size as usize;
        let rows = &rows[..rows.len().min(page_size as usize)];
        let next_page_token = match (more, rows.last()) {
            (true, Some((at, id, _))) => encode_cursor(*at, id),
            _ => String::new(),
        };
        let mut tasks = Vec::with_capacity(rows.len());
        for (_, id, json) in rows {
            // A running task's stored row may lag its live snapshot: show the live one.
            let task = match self.live_snapshot(id) {
                Some(t) => t,
                None => serde_json::from_str(json).map_err(anyhow::Error::from)?,
            };
            tasks.push(task.view(q.history_length, q.include_artifacts));
        }
        Ok(ListTasksResponse {
            tasks,
            next_page_token,
            page_size,
            total_size: total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_cursors_round_trip_and_foreign_tokens_are_refused() {
        let token = encode_cursor(1700000000123, "0190-abc");
        assert_eq!(
            decode_cursor(&token),
            Some((1700000000123, "0190-abc".into()))
        );
        assert_eq!(decode_cursor("!!"), None);
    }
}
