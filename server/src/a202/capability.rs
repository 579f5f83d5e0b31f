//! The capability check (binding §3–§4), run before anything A202 leaves this party: the
//! counterparty's declaration must exist exactly once under the extension URI, its version
//! declaration must parse, and each side must read what the other writes. All four ways to
//! fail are one refusal on the wire, `A202-EXTENSION-UNSUPPORTED`; which one it was is only
//! logged. No nearest version, no older URI, no bare-carrier downgrade.

use serde::Serialize;
use serde_json::{Map, Value};

use super::URI;

/// A party's version declaration (binding §4.1): the versions it reads and the one it writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Versions {
    pub read_versions: Vec<String>,
    pub write_version: String,
}

impl Versions {
    /// Parses an extension entry's `params`: exactly `read_versions` (a non-empty array) and
    /// `write_version`, every value `MAJOR.MINOR`.
    pub fn parse(params: &Value) -> Result<Versions, String> {
        let Some(fields) = params.as_object() else {
            return Err("params is not an object".into());
        };
        if let Some(extra) = fields
            .keys()
            .find(|k| *k != "read_versions" && *k != "write_version")
        {
            return Err(format!(
                "params carries {extra:?} beside the two version fields"
            ));
        }
        let read = match fields.get("read_versions") {
            Some(Value::Array(values)) if !values.is_empty() => values
                .iter()
                .map(|v| v.as_str().and_then(version).map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("read_versions holds a value that is not MAJOR.MINOR")?,
            Some(Value::Array(_)) => return Err("read_versions is empty".into()),
            Some(_) => return Err("read_versions is not an array".into()),
            None => return Err("read_versions is missing".into()),
        };
        let write = match fields.get("write_version") {
            Some(v) => v
                .as_str()
                .and_then(version)
                .ok_or("write_version is not MAJOR.MINOR")?,
            None => return Err("write_version is missing".into()),
        };
        Ok(Versions {
            read_versions: read,
            write_version: write.to_owned(),
        })
    }

    /// Our own declaration, from configuration: it must parse, and a party never writes a
    /// version it cannot read (RELEASES §4).
    pub fn local(read: &[String], write: &str) -> Result<Versions, String> {
        let declared = Versions {
            read_versions: read.to_vec(),
            write_version: write.to_owned(),
        };
        let versions = Versions::parse(&wire::to_json(declared))?;
        if !versions.read_versions.contains(&versions.write_version) {
            return Err(format!(
                "write version {write} is not among the read versions {read:?}"
            ));
        }
        Ok(versions)
    }

    /// Both directions of §4.2: they write what we read, and we write what they read.
    fn compatible(&self, theirs: &Versions) -> Result<(), String> {
        if !self.read_versions.contains(&theirs.write_version) {
            return Err(format!(
                "they write {} and we read {:?}",
                theirs.write_version, self.read_versions
            ));
        }
        if !theirs.read_versions.contains(&self.write_version) {
            return Err(format!(
                "we write {} and they read {:?}",
                self.write_version, theirs.read_versions
            ));
        }
        Ok(())
    }
}

fn version(s: &str) -> Option<&str> {
    let (major, minor) = s.split_once('.')?;
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    (digits(major) && digits(minor)).then_some(s)
}

/// Why a counterparty failed the check. Only the local log sees this (§4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsupported {
    Unretrievable(String),
    NoEntry,
    SeveralEntries(usize),
    Unparseable(String),
    Incompatible(String),
}

impl Unsupported {
    /// The one code every condition is refused with.
    pub const CODE: &'static str = "A202-EXTENSION-UNSUPPORTED";
}

/// What passing the check established about the counterparty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supported {
    pub theirs: Versions,
    pub required: bool,
}

/// The extension entries of a capability surface: an AgentCard's `capabilities.extensions`,
/// or the `extensions` of a preflight document.
fn entries(surface: &Value) -> &[Value] {
    surface["capabilities"]["extensions"]
        .as_array()
        .or_else(|| surface["extensions"].as_array())
        .map_or(&[], Vec::as_slice)
}

/// Checks a counterparty's capability surface (`Err` when it could not be retrieved)
/// against our declaration. A failure is logged with its reason and returned.
pub fn check(local: &Versions, surface: Result<&Value, String>) -> Result<Supported, Unsupported> {
    let outcome = evaluate(local, surface);
    if let Err(why) = &outcome {
        tracing::warn!(code = Unsupported::CODE, reason = ?why, "A202 capability check failed");
    }
    outcome
}

fn evaluate(local: &Versions, surface: Result<&Value, String>) -> Result<Supported, Unsupported> {
    let surface = surface.map_err(Unsupported::Unretrievable)?;
    if !surface.is_object() {
        return Err(Unsupported::Unretrievable(
            "the capability surface is not a JSON object".into(),
        ));
    }
    let ours: Vec<&Map<String, Value>> = entries(surface)
        .iter()
        .filter_map(Value::as_object)
        .filter(|e| e.get("uri").and_then(Value::as_str) == Some(URI))
        .collect();
    let entry = match ours.as_slice() {
        [] => return Err(Unsupported::NoEntry),
        [one] => *one,
        several => return Err(Unsupported::SeveralEntries(several.len())),
    };
    let required = match entry.get("required") {
        Some(Value::Bool(b)) => *b,
        None => false,
        Some(_) => return Err(Unsupported::Unparseable("required is not a boolean".into())),
    };
    let theirs = Versions::parse(entry.get("params").unwrap_or(&Value::Null))
        .map_err(Unsupported::Unparseable)?;
    local
        .compatible(&theirs)
        .map_err(Unsupported::Incompatible)?;
    Ok(Supported { theirs, required })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn local() -> Versions {
        Versions::local(&["0.1".into()], "0.1").unwrap()
    }

    fn declaring(params: Value) -> Value {
        json!({ "extensions": [{
            "uri": URI,
            "description": "Exchanges A202 commercial objects.",
            "required": true,
            "params": params,
        }]})
    }

    #[test]
    fn valid_extension_declaration_is_accepted() {
        let doc = declaring(json!({ "read_versions": ["0.1"], "write_version": "0.1" }));
        let ok = check(&local(), Ok(&doc)).unwrap();
        assert!(ok.required);
        assert_eq!(ok.theirs.write_version, "0.1");
        // The same entry inside an AgentCard's capabilities.
        let card = json!({ "name": "x", "capabilities": { "extensions": doc["extensions"] } });
        assert!(check(&local(), Ok(&card)).is_ok());
    }

    #[test]
    fn declaration_missing_is_refused() {
        let doc = json!({ "extensions": [{
            "uri": "https://schemas.example.invalid/unrelated-ext/1.0",
            "description": "An unrelated extension.",
            "required": false,
            "params": {},
        }]});
        assert_eq!(check(&local(), Ok(&doc)), Err(Unsupported::NoEntry));
        assert_eq!(
            check(&local(), Ok(&json!({ "name": "no extensions at all" }))),
            Err(Unsupported::NoEntry)
        );
        // An older or placeholder URI is not ours: no fallback to it.
        let older = json!({ "extensions": [{ "uri": "https://schemas.a202.invalid/a2a-ext/commercial/0.1",
            "required": true, "params": { "read_versions": ["0.1"], "write_version": "0.1" } }]});
        assert_eq!(check(&local(), Ok(&older)), Err(Unsupported::NoEntry));
    }

    #[test]
    fn declaration_version_mismatch_is_refused_in_both_directions() {
        let newer = declaring(json!({ "read_versions": ["0.2"], "write_version": "0.2" }));
        assert!(matches!(
            check(&local(), Ok(&newer)),
            Err(Unsupported::Incompatible(_))
        ));
        // They read what we write but write what we cannot read: refused, no nearest version.
        let they_write_newer =
            declaring(json!({ "read_versions": ["0.1", "0.2"], "write_version": "0.2" }));
        assert!(matches!(
            check(&local(), Ok(&they_write_newer)),
            Err(Unsupported::Incompatible(m)) if m.starts_with("they write 0.2")
        ));
        // They write what we read but do not read what we write.
        let wide = Versions::local(&["0.1".into(), "0.2".into()], "0.2").unwrap();
        let old = declaring(json!({ "read_versions": ["0.1"], "write_version": "0.1" }));
        assert!(matches!(
            check(&wide, Ok(&old)),
            Err(Unsupported::Incompatible(m)) if m.starts_with("we write 0.2")
        ));
        // Reading more than one writes is fine when both directions hold.
        let both = Versions::local(&["0.1".into(), "0.2".into()], "0.1").unwrap();
        assert!(check(&both, Ok(&they_write_newer)).is_ok());
        assert!(check(&both, Ok(&old)).is_ok());
    }

    #[test]
    fn every_params_parse_failure_is_refused() {
        for params in [
            json!(null),
            json!([]),
            json!({}),
            json!({ "write_version": "0.1" }),
            json!({ "read_versions": ["0.1"] }),
            json!({ "read_versions": [], "write_version": "0.1" }),
            json!({ "read_versions": "0.1", "write_version": "0.1" }),
            json!({ "read_versions": ["0.1"], "write_version": 0.1 }),
            json!({ "read_versions": [0.1], "write_version": "0.1" }),
            json!({ "read_versions": ["0.1"], "write_version": "v0.1" }),
            json!({ "read_versions": ["0.1.0"], "write_version": "0.1" }),
            json!({ "read_versions": ["0.1"], "write_version": "1" }),
            json!({ "read_versions": ["0.1"], "write_version": ".1" }),
            json!({ "read_versions": ["0.1"], "write_version": "0.1", "extra": true }),
        ] {
            let doc = declaring(params.clone());
            assert!(
                matches!(check(&local(), Ok(&doc)), Err(Unsupported::Unparseable(_))),
                "{params}"
            );
        }
        let mut no_params = declaring(json!(null));
        no_params["extensions"][0]
            .as_object_mut()
            .unwrap()
            .remove("params");
        assert!(matches!(
            check(&local(), Ok(&no_params)),
            Err(Unsupported::Unparseable(_))
        ));
        let mut bad_required =
            declaring(json!({ "read_versions": ["0.1"], "write_version": "0.1" }));
        bad_required["extensions"][0]["required"] = json!("yes");
        assert!(matches!(
            check(&local(), Ok(&bad_required)),
            Err(Unsupported::Unparseable(_))
        ));
    }

    #[test]
    fn an_unretrievable_card_or_a_doubled_entry_is_refused() {
        assert!(matches!(
            check(&local(), Err("connection refused".into())),
            Err(Unsupported::Unretrievable(_))
        ));
        assert!(matches!(
            check(&local(), Ok(&json!("not a card"))),
            Err(Unsupported::Unretrievable(_))
        ));
        let entry =
            declaring(json!({ "read_versions": ["0.1"], "write_version": "0.1" }))["extensions"][0]
                .clone();
        let doubled = json!({ "extensions": [entry.clone(), entry] });
        assert_eq!(
            check(&local(), Ok(&doubled)),
            Err(Unsupported::SeveralEntries(2))
        );
    }

    #[test]
    fn our_own_declaration_never_writes_what_it_cannot_read() {
        assert!(Versions::local(&["0.1".into()], "0.2").is_err());
        assert!(Versions::local(&[], "0.1").is_err());
        assert!(Versions::local(&["0.1".into()], "zero").is_err());
    }
}
