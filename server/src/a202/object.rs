//! One received A202 object, verified against the bytes as received (binding §5, canonical
//! model §4): the bytes must be the RFC 8785 form of the object they hold; the envelope must
//! pass the closed kernel schema (so carrier framing inside it is a kernel validation
//! refusal); `content_hash` must be the SHA-256 of the canonical content (the object without
//! `content_hash`, `signatures` and `kernel_annotations`); every signature by a known key
//! must verify over that content, a `.`, and the canonical form of its own protected
//! members. A placeholder or a signature by an unknown key is reported as not checkable,
//! never as passed.

use serde::Serialize;
use serde_json::Value;

use super::A202Refusal;
use super::canonical::{Kernel, Protected, canonical, content, sha256_hex, signing_input};
use super::keys::{Algorithm, KeyCheck, Keyring};

/// The literal the published fixtures carry instead of a signature.
const PLACEHOLDER: &str = "synthetic-placeholder-signature-value";

/// The purposes a signature may carry for each object type (canonical model §4); a type
/// not listed takes any registered purpose.
fn purposes(object_type: &str) -> Option<&'static [&'static str]> {
    Some(match object_type {
        "offer" => &["offer_submission", "object_issuance"],
        "acceptance" => &["offer_acceptance", "object_issuance"],
        "agreement" => &["agreement_commitment", "object_issuance"],
        "transaction_event" => &["event_append"],
        "policy_decision" => &["policy_decision"],
        "action_envelope" => &["action_submission"],
        "counterparty_invitation" => &["invitation_issuance", "object_issuance"],
        "invitation_acceptance" => &["invitation_claim", "object_issuance"],
        "adapter_receipt" => &["adapter_receipt", "object_issuance"],
        "obligation"
        | "performance_event"
        | "obligation_response"
        | "dispute"
        | "determination"
        | "settlement_instruction"
        | "approval"
        | "commitment"
        | "evidence"
        | "revocation_record"
        | "key_record" => &["object_issuance"],
        _ => return None,
    })
}

/// Objects that exist only with two parties' signatures.
fn minimum_signatures(object_type: &str) -> usize {
    match object_type {
        "agreement" | "invitation_acceptance" => 2,
        _ => 0,
    }
}

/// One signature's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SignatureCheck {
    pub key_id: String,
    pub algorithm: String,
    pub purpose: String,
    /// `verified` or `not_checkable`; a signature that fails is a refusal, not an outcome.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The key record's current status, for a verified signature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_status: Option<String>,
}

/// An object that passed verification, with the bytes it arrived as.
#[derive(Debug, Clone)]
pub struct Verified {
    pub id: String,
    pub object_type: String,
    pub version: i64,
    pub transaction_id: Option<String>,
    pub content_hash: String,
    /// An action envelope's `expected_sequence` for the stream it targets.
    pub expected_sequence: Option<i64>,
    pub signatures: Vec<SignatureCheck>,
    pub canonical: Vec<u8>,
}

/// Verifies `bytes` as received.
pub fn verify(kernel: &Kernel, keys: &Keyring, bytes: &[u8]) -> Result<Verified, A202Refusal> {
    let object: Value = serde_json::from_slice(bytes)
        .map_err(|e| A202Refusal::Kernel(format!("the bytes are not JSON: {e}")))?;
    if let Some(path) = non_integer(&object, String::new()) {
        return Err(A202Refusal::Kernel(format!(
            "{path} is a non-integer number; decimal values travel as strings"
        )));
    }
    if canonical(&object) != bytes {
        return Err(A202Refusal::Kernel(
            "the bytes are not the RFC 8785 canonical form of the object they hold".into(),
        ));
    }
    if object.get("kernel_annotations").is_some() {
        return Err(A202Refusal::AnnotationForged);
    }
    if let Some(Value::String(h)) = object.get("content_hash")
        && !(h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return Err(A202Refusal::HashFormat);
    }
    kernel.validate(&object).map_err(A202Refusal::Kernel)?;
    let declared = object["content_hash"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let content = content(&object);
    let computed = sha256_hex(&content);
    if declared != computed {
        return Err(A202Refusal::HashMismatch { declared, computed });
    }
    let object_type = object["object_type"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let entries = object["signatures"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let needed = minimum_signatures(&object_type);
    if entries.len() < needed {
        return Err(A202Refusal::SignatureInvalid(format!(
            "{object_type} needs {needed} signatures and carries {}",
            entries.len()
        )));
    }
    let signatures = entries
        .iter()
        .map(|entry| check_signature(keys, &object_type, &content, entry))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Verified {
        id: object["id"].as_str().unwrap_or_default().to_owned(),
        version: object["version"].as_i64().unwrap_or_default(),
        transaction_id: object["transaction_id"].as_str().map(str::to_owned),
        content_hash: declared,
        expected_sequence: (object_type == "action_envelope")
            .then(|| object["payload"]["expected_sequence"].as_i64())
            .flatten(),
        object_type,
        signatures,
        canonical: bytes.to_vec(),
    })
}

/// The path of the first number that is not an integer.
fn non_integer(v: &Value, path: String) -> Option<String> {
    match v {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            Some(if path.is_empty() { "/".into() } else { path })
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| non_integer(item, format!("{path}/{i}"))),
        Value::Object(members) => members
            .iter()
            .find_map(|(k, item)| non_integer(item, format!("{path}/{k}"))),
        _ => None,
    }
}

fn check_signature(
    keys: &Keyring,
    object_type: &str,
    content: &[u8],
    entry: &Value,
) -> Result<SignatureCheck, A202Refusal> {
    let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
    let (key_id, purpose, value) = (field("key_id"), field("purpose"), field("signature"));
    let mut check = SignatureCheck {
        key_id: key_id.clone(),
        algorithm: field("algorithm"),
        purpose: purpose.clone(),
        outcome: "not_checkable",
        detail: None,
        key_status: None,
    };
    if value == PLACEHOLDER {
        check.detail = Some("a placeholder, not a signature".into());
        return Ok(check);
    }
    if let Some(allowed) = purposes(object_type)
        && !allowed.contains(&purpose.as_str())
    {
        return Err(A202Refusal::SignatureInvalid(format!(
            "a signature for {purpose} does not sign a {object_type}"
        )));
    }
    let algorithm = Algorithm::parse(&check.algorithm).ok_or_else(|| {
        A202Refusal::SignatureInvalid(format!("unknown algorithm {}", check.algorithm))
    })?;
    let input = signing_input(content, &Protected::of(entry));
    match keys.check(&key_id, algorithm, &field("signed_at"), &value, &input) {
        Ok(KeyCheck::Verified { key_status }) => {
            check.outcome = "verified";
            check.key_status = Some(key_status);
        }
        Ok(KeyCheck::Unknown) => check.detail = Some(format!("no key record for {key_id}")),
        Err(why) => return Err(A202Refusal::SignatureInvalid(why)),
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a202::seal::{Signer, seal};
    use serde_json::json;

    const OFFER: &str = include_str!("../../tests/fixtures/a202/offer.json");
    const SIGNED_AT: &str = "2026-11-02T09:31:00Z";

    fn actor() -> Value {
        json!({ "organization_id": "org_harbour_lab", "agent_id": "agt_harbour_sales_01", "mandate_id": "mnd_harbour_sales_01" })
    }

    struct Fixture {
        kernel: Kernel,
        keys: Keyring,
        es: Signer,
        ed: Signer,
    }

    fn fixture() -> Fixture {
        let kernel = Kernel::default();
        let (es, _) = Signer::generate("key_harbour_es_01", Algorithm::Es256).unwrap();
        let (ed, _) = Signer::generate("key_harbour_ed_01", Algorithm::EdDsa).unwrap();
        let records = [
            es.key_record(&actor(), "2026-01-01T00:00:00Z"),
            ed.key_record(&actor(), "2026-01-01T00:00:00Z"),
        ];
        let keys = Keyring::from_records(&records, &kernel).unwrap();
        Fixture {
            kernel,
            keys,
            es,
            ed,
        }
    }

    fn offer() -> Value {
        serde_json::from_str(OFFER).unwrap()
    }

    fn sealed(signers: &[(&Signer, &str)]) -> Vec<u8> {
        seal(&mut offer(), signers, SIGNED_AT).unwrap()
    }

    impl Fixture {
        fn verify(&self, bytes: &[u8]) -> Result<Verified, A202Refusal> {
            verify(&self.kernel, &self.keys, bytes)
        }
    }

    #[test]
    fn good_es256_and_eddsa_signatures_verify_over_the_bytes_as_received() {
        let f = fixture();
        let bytes = sealed(&[(&f.es, "offer_submission"), (&f.ed, "object_issuance")]);
        let v = f.verify(&bytes).unwrap();
        assert_eq!(
            (
                v.id.as_str(),
                v.object_type.as_str(),
                v.transaction_id.as_deref()
            ),
            ("off_ptyhost_rack_01", "offer", Some("txn_ptyhost_rack_01"))
        );
        assert_eq!(v.canonical, bytes);
        let outcomes: Vec<_> = v
            .signatures
            .iter()
            .map(|s| (s.algorithm.as_str(), s.outcome))
            .collect();
        assert_eq!(outcomes, [("ES256", "verified"), ("EdDSA", "verified")]);
        assert_eq!(v.signatures[0].key_status.as_deref(), Some("active"));
    }

    #[test]
    fn bad_es256_and_eddsa_signatures_are_refused() {
        let f = fixture();
        for (real, algorithm) in [(&f.es, Algorithm::Es256), (&f.ed, Algorithm::EdDsa)] {
            // Another key under the trusted key's id.
            let (impostor, _) = Signer::generate(real.key_id(), algorithm).unwrap();
            let bytes = sealed(&[(&impostor, "offer_submission")]);
            assert!(
                matches!(f.verify(&bytes), Err(A202Refusal::SignatureInvalid(_))),
                "{algorithm:?}"
            );
            // A signature whose purpose was relabelled after signing.
            let mut o = offer();
            seal(&mut o, &[(real, "offer_submission")], SIGNED_AT).unwrap();
            o["signatures"][0]["purpose"] = json!("object_issuance");
            assert!(matches!(
                f.verify(&canonical(&o)),
                Err(A202Refusal::SignatureInvalid(_))
            ));
        }
        // A purpose that does not sign an offer, although the cryptography holds.
        let bytes = sealed(&[(&f.es, "event_append")]);
        assert!(
            matches!(f.verify(&bytes), Err(A202Refusal::SignatureInvalid(m)) if m.contains("event_append"))
        );
        // Signed before the key's validity began.
        let early = seal(
            &mut offer(),
            &[(&f.es, "offer_submission")],
            "2025-06-01T00:00:00Z",
        )
        .unwrap();
        assert!(
            matches!(f.verify(&early), Err(A202Refusal::SignatureInvalid(m)) if m.contains("not valid"))
        );
    }

    #[test]
    fn placeholders_and_unknown_keys_are_not_checkable_never_passed() {
        let f = fixture();
        let mut o = offer();
        o["signatures"] = json!([{
            "key_id": "key_harbour_es_01", "algorithm": "ES256",
            "signature": "synthetic-placeholder-signature-value",
            "signed_at": SIGNED_AT, "purpose": "offer_submission",
        }]);
        let (stranger, _) = Signer::generate("key_someone_else_01", Algorithm::Es256).unwrap();
        let bytes = seal(&mut o, &[(&stranger, "offer_submission")], SIGNED_AT).unwrap();
        let v = f.verify(&bytes).unwrap();
        assert_eq!(
            v.signatures.iter().map(|s| s.outcome).collect::<Vec<_>>(),
            ["not_checkable", "not_checkable"]
        );
        assert!(v.signatures.iter().all(|s| s.key_status.is_none()));
    }

    #[test]
    fn tampered_bytes_and_a_wrong_content_hash_are_refused() {
        let f = fixture();
        let bytes = sealed(&[(&f.es, "offer_submission")]);
        let text = String::from_utf8(bytes).unwrap();
        let tampered = text.replace("\"880.00\"", "\"88.00\"");
        assert_ne!(tampered, text);
        assert!(matches!(
            f.verify(tampered.as_bytes()),
            Err(A202Refusal::HashMismatch { .. })
        ));
        let mut o: Value = serde_json::from_str(&text).unwrap();
        o["content_hash"] = json!("0".repeat(64));
        assert!(matches!(
            f.verify(&canonical(&o)),
            Err(A202Refusal::HashMismatch { .. })
        ));
        o["content_hash"] = json!("A".repeat(64));
        assert_eq!(
            f.verify(&canonical(&o)).unwrap_err(),
            A202Refusal::HashFormat
        );
    }

    #[test]
    fn a_reserialized_object_with_the_same_json_is_refused() {
        let f = fixture();
        let bytes = sealed(&[(&f.es, "offer_submission")]);
        let same: Value = serde_json::from_slice(&bytes).unwrap();
        let pretty = serde_json::to_vec_pretty(&same).unwrap();
        assert!(
            matches!(f.verify(&pretty), Err(A202Refusal::Kernel(m)) if m.contains("canonical"))
        );
        let with_float = String::from_utf8(bytes)
            .unwrap()
            .replace("\"version\":1", "\"version\":1.5");
        assert!(
            matches!(f.verify(with_float.as_bytes()), Err(A202Refusal::Kernel(m)) if m.contains("non-integer"))
        );
    }

    #[test]
    fn envelope_carries_carrier_metadata_is_a_kernel_validation_refusal() {
        let f = fixture();
        let mut o = offer();
        o["carrier_task_id"] = json!("0195a7c2-task");
        let bytes = seal(&mut o, &[(&f.es, "offer_submission")], SIGNED_AT).unwrap();
        let refusal = f.verify(&bytes).unwrap_err();
        assert!(
            matches!(&refusal, A202Refusal::Kernel(m) if m.contains("carrier_task_id")),
            "{refusal}"
        );
        assert_eq!(refusal.code(), None);
    }

    #[test]
    fn kernel_annotations_from_a_sender_are_forged() {
        let f = fixture();
        let mut o = offer();
        seal(&mut o, &[(&f.es, "offer_submission")], SIGNED_AT).unwrap();
        o["kernel_annotations"] = json!({
            "policy_decision_id": "pol_anything_01", "session_id": null,
            "session_sequence": 1, "received_at": SIGNED_AT,
        });
        assert_eq!(
            f.verify(&canonical(&o)).unwrap_err(),
            A202Refusal::AnnotationForged
        );
    }
}
