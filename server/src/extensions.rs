//! Extension activation: a request names the extensions it activates in `A2A-Extensions`
//! (0.3 clients: `X-A2A-Extensions`); the answer echoes the ones this agent declares in the
//! same header. Unknown URIs are ignored; a declared `required` extension the request does
//! not activate is ExtensionSupportRequired.

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use serde_json::{Map, Value};

/// A declared `required` extension the request did not activate (A2A's
/// ExtensionSupportRequired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Required(pub String);

/// An extension the AgentCard declares.
#[derive(Debug, Clone, Copy)]
pub struct Declared {
    pub uri: &'static str,
    pub required: bool,
}

pub const HEADER: &str = "a2a-extensions";
pub const LEGACY_HEADER: &str = "x-a2a-extensions";

/// The activated URIs in declaration order, and the header names the request used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activation {
    pub uris: Vec<&'static str>,
    headers: Vec<&'static str>,
}

impl Activation {
    /// Echoes the activated extensions in the header(s) the request named them in.
    pub fn echo(&self, response: &mut HeaderMap) {
        if self.uris.is_empty() {
            return;
        }
        if let Ok(value) = HeaderValue::from_str(&self.uris.join(", ")) {
            for name in &self.headers {
                response.insert(HeaderName::from_static(name), value.clone());
            }
        }
    }
}

/// The URIs a header names: every instance of it, split at commas, trimmed. Requests
/// name extensions this way and responses echo them this way (`A2A-Extensions`,
/// `X-A2A-Extensions`, A202's `A202-Extensions`).
pub fn listed(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect()
}

/// What a request activates of `declared`.
pub fn activate(request: &HeaderMap, declared: &[Declared]) -> Result<Activation, Required> {
    let mut named = Vec::new();
    let mut headers = Vec::new();
    for header in [HEADER, LEGACY_HEADER] {
        if request.contains_key(header) {
            named.extend(listed(request, header));
            headers.push(header);
        }
    }
    let uris = pick(named.iter().map(String::as_str), declared);
    required(&uris, declared)?;
    Ok(Activation { uris, headers })
}

/// ExtensionSupportRequired for the first declared `required` extension not in `uris`.
fn required(uris: &[&'static str], declared: &[Declared]) -> Result<(), Required> {
    match declared
        .iter()
        .find(|d| d.required && !uris.contains(&d.uri))
    {
        Some(missing) => Err(Required(missing.uri.to_owned())),
        None => Ok(()),
    }
}

/// The declared URIs among `named`, in declaration order.
fn pick<'a>(
    named: impl Iterator<Item = &'a str> + Clone,
    declared: &[Declared],
) -> Vec<&'static str> {
    declared
        .iter()
        .filter(|d| named.clone().any(|n| n == d.uri))
        .map(|d| d.uri)
        .collect()
}

/// What a binding without headers activates through its service parameters (pty-ws,
/// STDIO): `a2a-extensions` in any case, as a list or a comma-separated string. As with
/// the header, a declared `required` extension left out is ExtensionSupportRequired.
pub fn from_parameters(
    params: &Map<String, Value>,
    declared: &[Declared],
) -> Result<Vec<&'static str>, Required> {
    let named: Vec<&str> = params
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(HEADER))
        .flat_map(|(_, v)| match v {
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>(),
            Value::String(s) => s.split(',').collect(),
            _ => Vec::new(),
        })
        .map(str::trim)
        .collect();
    let uris = pick(named.iter().copied(), declared);
    required(&uris, declared)?;
    Ok(uris)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTIONAL: Declared = Declared {
        uri: "https://x.example/ext/a/v1",
        required: false,
    };
    const REQUIRED: Declared = Declared {
        uri: "https://x.example/ext/b/v1",
        required: true,
    };

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn declared_extensions_are_activated_and_echoed_unknown_ones_ignored() {
        let a = activate(
            &headers(&[(
                HEADER,
                "https://unknown.example/e, https://x.example/ext/a/v1",
            )]),
            &[OPTIONAL],
        )
        .unwrap();
        assert_eq!(a.uris, [OPTIONAL.uri]);
        let mut out = HeaderMap::new();
        a.echo(&mut out);
        assert_eq!(out.get(HEADER).unwrap(), OPTIONAL.uri);
        assert!(out.get(LEGACY_HEADER).is_none());

        let legacy = activate(&headers(&[(LEGACY_HEADER, OPTIONAL.uri)]), &[OPTIONAL]).unwrap();
        let mut out = HeaderMap::new();
        legacy.echo(&mut out);
        assert_eq!(out.get(LEGACY_HEADER).unwrap(), OPTIONAL.uri);

        let none = activate(&HeaderMap::new(), &[OPTIONAL]).unwrap();
        let mut out = HeaderMap::new();
        none.echo(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn service_parameters_activate_declared_extensions() {
        let params: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "A2A-Extensions": "https://unknown.example/e, https://x.example/ext/a/v1",
        }))
        .unwrap();
        assert_eq!(
            from_parameters(&params, &[OPTIONAL]).unwrap(),
            [OPTIONAL.uri]
        );
        let err = from_parameters(&params, &[OPTIONAL, REQUIRED]).unwrap_err();
        assert_eq!(err, Required(REQUIRED.uri.to_owned()));
        let listed: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "a2a-extensions": [REQUIRED.uri],
        }))
        .unwrap();
        assert_eq!(
            from_parameters(&listed, &[OPTIONAL, REQUIRED]).unwrap(),
            [REQUIRED.uri]
        );
        assert!(
            from_parameters(&Map::new(), &[OPTIONAL])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_required_extension_not_activated_is_extension_support_required() {
        let err = activate(&headers(&[(HEADER, OPTIONAL.uri)]), &[OPTIONAL, REQUIRED]).unwrap_err();
        assert_eq!(err, Required(REQUIRED.uri.to_owned()));
        let ok = activate(
            &headers(&[(HEADER, REQUIRED.uri), (HEADER, OPTIONAL.uri)]),
            &[OPTIONAL, REQUIRED],
        )
        .unwrap();
        assert_eq!(ok.uris, [OPTIONAL.uri, REQUIRED.uri]);
    }
}
