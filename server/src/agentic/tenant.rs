//! `multi-tenant/v1`, declared: `Message.metadata.tenant_id` is checked on every send and
//! echoed on what the task emits; no resource is scoped by it.

use wire::a2a::Message;

pub const KEY: &str = "tenant_id";

/// The tenant of a message that names none.
pub const DEFAULT: &str = "default";

/// The message's `tenant_id`, if it names one: 1 to 128 of `A-Za-z0-9._-`, starting with a
/// letter or digit. Anything else is refused (InvalidParams), naming the field.
pub fn of(message: &Message) -> Result<Option<&str>, String> {
    let Some(value) = message.metadata.as_ref().and_then(|m| m.get(KEY)) else {
        return Ok(None);
    };
    let invalid = || {
        "metadata.tenant_id must be 1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit (multi-tenant/v1)".to_owned()
    };
    let id = value.as_str().ok_or_else(invalid)?;
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !(first_ok && rest_ok && id.len() <= 128) {
        return Err(invalid());
    }
    Ok(Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(tenant: serde_json::Value) -> Message {
        serde_json::from_value(json!({
            "messageId": "m", "role": "ROLE_USER", "parts": [{ "text": "x" }],
            "metadata": { "tenant_id": tenant },
        }))
        .unwrap()
    }

    #[test]
    fn tenant_ids_of_the_schema_are_taken_and_others_refused() {
        for good in [
            "default",
            "aiwg-prod",
            "team-7.staging",
            "smolagents",
            &"a".repeat(128),
        ] {
            assert_eq!(of(&with(json!(good))).unwrap(), Some(good));
        }
        for bad in [
            json!(""),
            json!("-lead"),
            json!("has space"),
            json!(7),
            json!("a".repeat(129)),
        ] {
            assert!(of(&with(bad)).unwrap_err().contains("metadata.tenant_id"));
        }
    }
}
