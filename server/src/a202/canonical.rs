//! The A202 canonical model (§4) that both keys and objects stand on: the kernel schema,
//! RFC 8785 bytes, the hashed content and what a signature covers.

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The kernel schema (A202 v0.1, Apache-2.0; see LICENSE-a202-apache-2.0.txt beside it).
const KERNEL_SCHEMA: &str = include_str!("commercial-kernel.schema.json");

/// Top-level members outside the hashed and signed bytes.
const EXCLUDED: [&str; 3] = ["content_hash", "signatures", "kernel_annotations"];

/// The compiled kernel schema.
pub struct Kernel {
    validator: jsonschema::Validator,
}

impl Default for Kernel {
    fn default() -> Kernel {
        let schema: Value =
            serde_json::from_str(KERNEL_SCHEMA).expect("the bundled kernel schema is JSON");
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the bundled kernel schema compiles");
        Kernel { validator }
    }
}

impl Kernel {
    /// The schema's verdict: the first few violations, each with where it is.
    pub fn validate(&self, object: &Value) -> Result<(), String> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(object)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                format!("{}: {e}", if at.is_empty() { "/" } else { &at })
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// RFC 8785 bytes of a JSON value.
pub fn canonical(value: &Value) -> Vec<u8> {
    serde_jcs::to_vec(value).expect("a JSON value always serializes")
}

/// The canonical content: the object without the members outside the hash.
pub fn content(object: &Value) -> Vec<u8> {
    let mut stripped: Map<String, Value> = object.as_object().cloned().unwrap_or_default();
    for name in EXCLUDED {
        stripped.remove(name);
    }
    canonical(&Value::Object(stripped))
}

/// Lowercase hex SHA-256 of the canonical content.
pub fn content_hash(object: &Value) -> String {
    sha256_hex(&content(object))
}

/// Lowercase hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a signature covers: the canonical content, `.`, and the canonical form of the
/// signature entry's own `algorithm`, `key_id`, `purpose` and `signed_at`.
pub fn signing_input<T: Serialize>(content: &[u8], protected: &Protected<T>) -> Vec<u8> {
    let mut input = content.to_vec();
    input.push(b'.');
    input.extend(serde_jcs::to_vec(protected).unwrap_or_default());
    input
}

/// The members of a signature entry that its signature covers.
#[derive(Debug, Clone, Serialize)]
pub struct Protected<T> {
    pub algorithm: T,
    pub key_id: T,
    pub purpose: T,
    pub signed_at: T,
}

impl<'a> Protected<&'a Value> {
    /// What a received entry's signature covers (a missing member is `null`).
    pub fn of(entry: &'a Value) -> Protected<&'a Value> {
        Protected {
            algorithm: &entry["algorithm"],
            key_id: &entry["key_id"],
            purpose: &entry["purpose"],
            signed_at: &entry["signed_at"],
        }
    }
}
