//! `hitl-prompt/v1`: the prompt envelope an INPUT_REQUIRED task carries when the extension
//! was activated, and the check of a message that answers it (`metadata.hitl_response_for`).
//! The envelope travels in the task's status message, so a GetTask or a resubscribe after a
//! reconnect hands out the same `prompt_id`; it is open while the task waits on it.

use serde::Serialize;
use serde_json::{Value, json};
use wire::a2a::{Message, Task, TaskState};

use super::{ExtensionRefusal, HITL_URI};

/// Where an answer names the prompt it answers.
pub const RESPONSE_KEY: &str = "hitl_response_for";

/// Prompts are held to this many characters.
const MAX_PROMPT_CHARS: usize = 4096;

/// What an answer to a shell's prompt is: the text typed at it.
fn response_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": false,
        "required": ["text"],
        "properties": {
            "text": {
                "type": "string",
                "description": "Typed at the prompt, followed by Enter.",
            },
        },
    })
}

/// The shape of `hitl_response_for` itself.
fn envelope_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["prompt_id", "payload"],
        "properties": {
            "prompt_id": {
                "type": "string",
                "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-5][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$",
            },
            "payload": { "type": "object" },
        },
    })
}

/// A fresh envelope for a prompt: a new `prompt_id` (a UUIDv4, as the response schema's
/// pattern wants), the line the command waits on, and the schema of its answer.
pub fn envelope(prompt: &str) -> Value {
    let prompt: String = match prompt.trim() {
        "" => "the command is waiting for input".into(),
        p => p.chars().take(MAX_PROMPT_CHARS).collect(),
    };
    let envelope = Envelope {
        prompt_id: uuid::Uuid::new_v4().to_string(),
        prompt,
        response_schema: response_schema(),
        allowed_responders: ["any"],
    };
    wire::to_json(envelope)
}

/// The prompt envelope a waiting task's status message carries.
#[derive(Serialize)]
struct Envelope {
    prompt_id: String,
    prompt: String,
    response_schema: Value,
    allowed_responders: [&'static str; 1],
}

/// The `data` of a HITL refusal.
#[derive(Serialize)]
struct RefusalData<'a> {
    extension: &'static str,
    prompt_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    validation_errors: Option<Vec<Violation>>,
}

/// One way an answer breaks its schema.
#[derive(Serialize)]
struct Violation {
    path: String,
    keyword: String,
    message: String,
}

/// The text a message answers a task's open prompt with, when it carries
/// `hitl_response_for`: refused 409 when that prompt is not open (unknown, or answered),
/// 422 with `validation_errors` when the answer does not match its schema.
pub fn answer(task: &Task, message: &Message) -> Result<Option<String>, ExtensionRefusal> {
    let Some(response) = message.metadata.as_ref().and_then(|m| m.get(RESPONSE_KEY)) else {
        return Ok(None);
    };
    let prompt_id = response.get("prompt_id").and_then(Value::as_str);
    let errors = violations(&envelope_schema(), response);
    if !errors.is_empty() {
        return Err(invalid(prompt_id, errors));
    }
    let prompt_id = prompt_id.unwrap_or_default();
    let open = (task.status.state == TaskState::InputRequired)
        .then_some(task.status.message.as_ref())
        .flatten()
        .and_then(|m| m.metadata.as_ref())
        .and_then(|m| m.get(HITL_URI))
        .filter(|e| e["prompt_id"] == prompt_id);
    let Some(open) = open else {
        return Err(ExtensionRefusal {
            http: 409,
            jsonrpc: -32010,
            jsonrpc_message: "hitl_already_answered_or_unknown",
            reason: "HITL_ALREADY_ANSWERED_OR_UNKNOWN",
            detail: format!("prompt {prompt_id} is not open on task {}", task.id),
            data: wire::to_json(RefusalData {
                extension: HITL_URI,
                prompt_id: Some(prompt_id),
                validation_errors: None,
            }),
        });
    };
    let payload = &response["payload"];
    let errors = violations(&open["response_schema"], payload);
    if !errors.is_empty() {
        return Err(invalid(Some(prompt_id), errors));
    }
    Ok(Some(
        payload["text"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// What `value` breaks of `schema`: `{path, keyword, message}` each.
fn violations(schema: &Value, value: &Value) -> Vec<Violation> {
    let Ok(validator) = jsonschema::draft202012::options().build(schema) else {
        return vec![Violation {
            path: String::new(),
            keyword: "$schema".into(),
            message: "the prompt's response_schema does not compile".into(),
        }];
    };
    validator
        .iter_errors(value)
        .map(|e| Violation {
            path: e.instance_path().to_string(),
            keyword: e.kind().keyword().to_owned(),
            message: e.to_string(),
        })
        .collect()
}

fn invalid(prompt_id: Option<&str>, errors: Vec<Violation>) -> ExtensionRefusal {
    ExtensionRefusal {
        http: 422,
        jsonrpc: -32011,
        jsonrpc_message: "hitl_response_invalid",
        reason: "HITL_RESPONSE_INVALID",
        detail: format!(
            "the answer does not match the prompt's response_schema: {}",
            errors.len()
        ),
        data: wire::to_json(RefusalData {
            extension: HITL_URI,
            prompt_id,
            validation_errors: Some(errors),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::a2a::TaskStatus;

    fn waiting(envelope: &Value) -> Task {
        serde_json::from_value(json!({
            "id": "t", "contextId": "c",
            "status": { "state": "TASK_STATE_INPUT_REQUIRED", "message": {
                "messageId": "s", "role": "ROLE_AGENT", "parts": [{ "text": "Password:" }],
                "metadata": { HITL_URI: envelope },
            }},
        }))
        .unwrap()
    }

    fn answering(response: Value) -> Message {
        serde_json::from_value(json!({
            "messageId": "m", "role": "ROLE_USER", "taskId": "t", "parts": [{ "text": "here" }],
            "metadata": { RESPONSE_KEY: response },
        }))
        .unwrap()
    }

    #[test]
    fn an_envelope_carries_a_uuid4_prompt_id_the_prompt_and_a_text_schema() {
        let e = envelope("Continue? [y/N] ");
        let id = uuid::Uuid::parse_str(e["prompt_id"].as_str().unwrap()).unwrap();
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(e["prompt"], "Continue? [y/N]");
        assert_eq!(e["response_schema"]["required"], json!(["text"]));
        assert_ne!(envelope("x")["prompt_id"], e["prompt_id"]);
        assert_eq!(
            envelope("   ")["prompt"],
            "the command is waiting for input"
        );
    }

    #[test]
    fn a_valid_answer_gives_its_text_and_a_second_one_finds_no_open_prompt() {
        let e = envelope("Password:");
        let task = waiting(&e);
        let ok = answering(json!({ "prompt_id": e["prompt_id"], "payload": { "text": "s3cret" } }));
        assert_eq!(answer(&task, &ok).unwrap().as_deref(), Some("s3cret"));
        let mut answered = task.clone();
        answered.status = TaskStatus {
            state: TaskState::Working,
            message: None,
            timestamp: None,
        };
        let again = answer(&answered, &ok).unwrap_err();
        assert_eq!((again.http, again.jsonrpc), (409, -32010));
        assert_eq!(again.jsonrpc_message, "hitl_already_answered_or_unknown");
    }

    #[test]
    fn an_answer_off_the_schema_is_422_with_validation_errors() {
        let e = envelope("Password:");
        let task = waiting(&e);
        let bad = answering(json!({
            "prompt_id": e["prompt_id"],
            "payload": { "text": false, "extra_unknown_field": 42 },
        }));
        let refused = answer(&task, &bad).unwrap_err();
        assert_eq!((refused.http, refused.jsonrpc), (422, -32011));
        let errors = refused.data["validation_errors"].as_array().unwrap();
        let keywords: Vec<&str> = errors
            .iter()
            .map(|e| e["keyword"].as_str().unwrap())
            .collect();
        assert!(
            keywords.contains(&"type") && keywords.contains(&"additionalProperties"),
            "{errors:?}"
        );
        assert!(errors.iter().any(|e| e["path"] == "/text"));
        // The spec's invalid-response example payload, against this prompt's schema.
        let example = answering(json!({
            "prompt_id": e["prompt_id"],
            "payload": { "approved": "yes please", "extra_unknown_field": 42 },
        }));
        let refused = answer(&task, &example).unwrap_err();
        let keywords: Vec<String> = (refused.data["validation_errors"].as_array().unwrap().iter())
            .map(|e| e["keyword"].as_str().unwrap().to_owned())
            .collect();
        assert!(keywords.contains(&"required".into()), "{keywords:?}");
        let shapeless = answering(json!({ "prompt_id": "not-a-uuid" }));
        assert_eq!(answer(&task, &shapeless).unwrap_err().http, 422);
        let plain = serde_json::from_value::<Message>(json!({
            "messageId": "m", "role": "ROLE_USER", "parts": [{ "text": "y" }],
        }))
        .unwrap();
        assert_eq!(answer(&task, &plain).unwrap(), None);
    }
}
