//! The verification keys this party trusts: A202 `key_record` objects the operator supplies
//! (`--a202-keys FILE`, a JSON array), each checked against the kernel schema and its own
//! content hash when loaded. A signature by a key not in the ring is not checkable; one by a
//! key in the ring verifies or is refused.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use ring::signature::{ECDSA_P256_SHA256_FIXED, ED25519, UnparsedPublicKey};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::canonical::{self, Kernel};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Es256,
    EdDsa,
}

impl Algorithm {
    pub fn parse(name: &str) -> Option<Algorithm> {
        match name {
            "ES256" => Some(Algorithm::Es256),
            "EdDSA" => Some(Algorithm::EdDsa),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Key {
    algorithm: Algorithm,
    /// ES256: the uncompressed point (0x04 ‖ x ‖ y); EdDSA: the 32-byte public key.
    public: Vec<u8>,
    status: String,
    valid_from: OffsetDateTime,
    valid_until: Option<OffsetDateTime>,
}

/// Trusted keys by key id.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    keys: HashMap<String, Key>,
}

/// What checking one signature with a known key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCheck {
    /// The key verified the signature; its record's current status.
    Verified { key_status: String },
    /// No key record for this id.
    Unknown,
}

fn b64url(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
}

pub fn timestamp(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

impl Keyring {
    /// Reads a JSON array of `key_record` objects.
    pub fn load(path: &Path, kernel: &Kernel) -> Result<Keyring> {
        let text =
            std::fs::read(path).with_context(|| format!("reading A202 keys {}", path.display()))?;
        let records: Vec<Value> = serde_json::from_slice(&text).with_context(|| {
            format!(
                "{}: expected a JSON array of key_record objects",
                path.display()
            )
        })?;
        Keyring::from_records(&records, kernel).with_context(|| path.display().to_string())
    }

    /// The keys of `key_record` objects, each checked by the kernel schema and its hash.
    pub fn from_records(records: &[Value], kernel: &Kernel) -> Result<Keyring> {
        let mut ring = Keyring::default();
        for record in records {
            let (id, key) =
                key_of(record, kernel).with_context(|| format!("key record {}", record["id"]))?;
            if ring.keys.insert(id.clone(), key).is_some() {
                bail!("key {id} appears twice");
            }
        }
        Ok(ring)
    }

    pub fn count(&self) -> usize {
        self.keys.len()
    }

    /// Checks `signature` (base64url) over `input` with the key `key_id`, as signed at
    /// `signed_at` under `algorithm`. `Err` says why it does not verify.
    pub fn check(
        &self,
        key_id: &str,
        algorithm: Algorithm,
        signed_at: &str,
        signature: &str,
        input: &[u8],
    ) -> Result<KeyCheck, String> {
        let Some(key) = self.keys.get(key_id) else {
            return Ok(KeyCheck::Unknown);
        };
        if key.algorithm != algorithm {
            return Err(format!("{key_id} is not a key for {algorithm:?}"));
        }
        let at = timestamp(signed_at)
            .ok_or_else(|| format!("signed_at {signed_at:?} is not a date-time"))?;
        if at < key.valid_from || key.valid_until.is_some_and(|until| at >= until) {
            return Err(format!("{key_id} was not valid at {signed_at}"));
        }
        let raw = b64url(signature).ok_or("the signature is not base64url")?;
        let verifier = match algorithm {
            Algorithm::Es256 => UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &key.public),
            Algorithm::EdDsa => UnparsedPublicKey::new(&ED25519, &key.public),
        };
        verifier.verify(input, &raw).map_err(|_| {
            format!("the signature by {key_id} does not verify over the canonical bytes")
        })?;
        Ok(KeyCheck::Verified {
            key_status: key.status.clone(),
        })
    }
}

/// A key record's id and key, after the kernel checks it.
fn key_of(record: &Value, kernel: &Kernel) -> Result<(String, Key)> {
    kernel
        .validate(record)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if record["object_type"] != "key_record" {
        bail!("object_type is {}, not key_record", record["object_type"]);
    }
    let declared = record["content_hash"].as_str().unwrap_or("");
    if declared != canonical::content_hash(record) {
        bail!("content_hash does not match the record");
    }
    let id = record["id"].as_str().unwrap_or("").to_owned();
    let p = &record["payload"];
    let jwk = &p["public_key_jwk"];
    let coordinate = |name: &str| {
        jwk[name]
            .as_str()
            .and_then(b64url)
            .filter(|b| b.len() == 32)
            .with_context(|| format!("public_key_jwk.{name} is not 32 bytes of base64url"))
    };
    let algorithm =
        Algorithm::parse(p["algorithm"].as_str().unwrap_or("")).context("unknown algorithm")?;
    let public = match (algorithm, jwk["kty"].as_str()) {
        (Algorithm::Es256, Some("EC")) => {
            let mut point = vec![4u8];
            point.extend(coordinate("x")?);
            point.extend(coordinate("y")?);
            point
        }
        (Algorithm::EdDsa, Some("OKP")) => coordinate("x")?,
        _ => bail!("public_key_jwk does not fit the algorithm"),
    };
    let date = |name: &str| {
        timestamp(p[name].as_str().unwrap_or(""))
            .with_context(|| format!("{name} is not a date-time"))
    };
    let valid_until = match &p["valid_until"] {
        Value::Null => None,
        _ => Some(date("valid_until")?),
    };
    Ok((
        id,
        Key {
            algorithm,
            public,
            status: p["status"].as_str().unwrap_or("").to_owned(),
            valid_from: date("valid_from")?,
            valid_until,
        },
    ))
}
