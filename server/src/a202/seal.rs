//! The sending side of an object: signing keys (ES256 and EdDSA, PKCS#8 as ring writes
//! it), the `key_record` object a counterparty trusts a key through, and sealing — setting
//! `content_hash` and appending signatures over the canonical content, exactly what
//! `object::verify` checks.

use anyhow::{Result, anyhow, bail};
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _,
};
use serde::Serialize;
use serde_json::Value;

use super::canonical::{self, Protected};
use super::keys::Algorithm;

/// A public key in the kernel's closed JWK shapes (EC P-256 or OKP Ed25519).
#[derive(Serialize)]
pub struct Jwk {
    kty: &'static str,
    crv: &'static str,
    x: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    y: Option<String>,
}

/// One entry of an object's `signatures`.
#[derive(Serialize)]
struct SignatureEntry<'a> {
    #[serde(flatten)]
    protected: Protected<&'a str>,
    signature: String,
}

/// The `key_record` object, before its `content_hash`.
#[derive(Serialize)]
struct KeyRecord<'a> {
    spec_version: &'static str,
    id: &'a str,
    object_type: &'static str,
    version: u32,
    created_at: &'a str,
    created_by: &'a Value,
    transaction_id: Option<String>,
    previous_version_id: Option<String>,
    signatures: [Value; 0],
    payload: KeyPayload<'a>,
}

#[derive(Serialize)]
struct KeyPayload<'a> {
    controller_organization_id: &'a Value,
    algorithm: &'static str,
    public_key_jwk: Jwk,
    status: &'static str,
    valid_from: &'a str,
    valid_until: Option<String>,
}

enum Pair {
    Es256(EcdsaKeyPair),
    EdDsa(Ed25519KeyPair),
}

/// A private key under its A202 key id.
pub struct Signer {
    key_id: String,
    pair: Pair,
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Signer {
    /// A new key; its PKCS#8 document is what `from_pkcs8` reads back.
    pub fn generate(key_id: &str, algorithm: Algorithm) -> Result<(Signer, Vec<u8>)> {
        let rng = SystemRandom::new();
        let pkcs8 = match algorithm {
            Algorithm::Es256 => {
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            }
            Algorithm::EdDsa => Ed25519KeyPair::generate_pkcs8(&rng),
        }
        .map_err(|_| anyhow!("generating a key failed"))?;
        let signer = Signer::from_pkcs8(key_id, algorithm, pkcs8.as_ref())?;
        Ok((signer, pkcs8.as_ref().to_vec()))
    }

    pub fn from_pkcs8(key_id: &str, algorithm: Algorithm, pkcs8: &[u8]) -> Result<Signer> {
        let pair = match algorithm {
            Algorithm::Es256 => Pair::Es256(
                EcdsaKeyPair::from_pkcs8(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    pkcs8,
                    &SystemRandom::new(),
                )
                .map_err(|e| anyhow!("not a P-256 PKCS#8 key: {e}"))?,
            ),
            Algorithm::EdDsa => Pair::EdDsa(
                Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8)
                    .map_err(|e| anyhow!("not an Ed25519 PKCS#8 key: {e}"))?,
            ),
        };
        if !key_id.starts_with("key_") {
            bail!("an A202 key id starts with key_");
        }
        Ok(Signer {
            key_id: key_id.to_owned(),
            pair,
        })
    }

    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    fn algorithm(&self) -> &'static str {
        match self.pair {
            Pair::Es256(_) => "ES256",
            Pair::EdDsa(_) => "EdDSA",
        }
    }

    /// The public key as the kernel's closed JWK shapes have it.
    pub fn public_jwk(&self) -> Jwk {
        match &self.pair {
            Pair::Es256(p) => {
                let point = p.public_key().as_ref();
                Jwk {
                    kty: "EC",
                    crv: "P-256",
                    x: b64url(&point[1..33]),
                    y: Some(b64url(&point[33..65])),
                }
            }
            Pair::EdDsa(p) => Jwk {
                kty: "OKP",
                crv: "Ed25519",
                x: b64url(p.public_key().as_ref()),
                y: None,
            },
        }
    }

    /// A signature entry over `content` (an object's canonical content) for `purpose`.
    pub fn sign(&self, content: &[u8], purpose: &str, signed_at: &str) -> Result<Value> {
        let protected = Protected {
            algorithm: self.algorithm(),
            key_id: self.key_id.as_str(),
            purpose,
            signed_at,
        };
        let input = canonical::signing_input(content, &protected);
        let signature = match &self.pair {
            Pair::Es256(p) => p
                .sign(&SystemRandom::new(), &input)
                .map_err(|_| anyhow!("signing failed"))?
                .as_ref()
                .to_vec(),
            Pair::EdDsa(p) => p.sign(&input).as_ref().to_vec(),
        };
        let entry = SignatureEntry {
            protected,
            signature: b64url(&signature),
        };
        Ok(serde_json::to_value(entry)?)
    }

    /// The `key_record` that lets a counterparty verify this key, valid from `valid_from`
    /// with no declared end, created by `created_by` (`{organization_id, agent_id,
    /// mandate_id}`).
    pub fn key_record(&self, created_by: &Value, valid_from: &str) -> Value {
        let record = KeyRecord {
            spec_version: "a202-commercial/0.1",
            id: &self.key_id,
            object_type: "key_record",
            version: 1,
            created_at: valid_from,
            created_by,
            transaction_id: None,
            previous_version_id: None,
            signatures: [],
            payload: KeyPayload {
                controller_organization_id: &created_by["organization_id"],
                algorithm: self.algorithm(),
                public_key_jwk: self.public_jwk(),
                status: "active",
                valid_from,
                valid_until: None,
            },
        };
        let mut record = wire::to_json(record);
        record["content_hash"] = Value::from(canonical::content_hash(&record));
        record
    }
}

/// Sets `object`'s `content_hash` and appends one signature per (signer, purpose); the
/// object's canonical bytes are what travels.
pub fn seal(object: &mut Value, signers: &[(&Signer, &str)], signed_at: &str) -> Result<Vec<u8>> {
    if !object.is_object() {
        bail!("an A202 object is a JSON object");
    }
    object["content_hash"] = Value::from(canonical::content_hash(object));
    let content = canonical::content(object);
    let entries = signers
        .iter()
        .map(|(signer, purpose)| signer.sign(&content, purpose, signed_at))
        .collect::<Result<Vec<_>>>()?;
    match object.get_mut("signatures").and_then(Value::as_array_mut) {
        Some(existing) => existing.extend(entries),
        None => object["signatures"] = Value::Array(entries),
    }
    Ok(canonical::canonical(object))
}
