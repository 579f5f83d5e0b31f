//! `ptyhost a202 check|send`: the A202 capability check against a counterparty's AgentCard
//! or preflight document, and the submission of one object over A2A or plain HTTPS — only
//! after the check passed, only to an HTTPS endpoint (plain HTTP only on loopback), and
//! with an absent activation echo counted as a refusal.

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use wire::a2a::{Content, Message, Part, Role, StreamResponse, TaskState};

use super::{ClientError, Policy, candidates, fetch_card, interfaces, with_policy};
use crate::a202::capability::{self, Supported, Unsupported, Versions};
use crate::a202::{self, A202Refusal, canonical};
use crate::extensions;

/// What the command reports: passed, or refused with an A202 code.
#[derive(Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
enum Outcome {
    /// The counterparty declares the extension in versions we can speak.
    Supported {
        uri: &'static str,
        required: bool,
        read_versions: Vec<String>,
        write_version: String,
    },
    /// It took the object: over A2A, the task that carried it; over HTTPS, the status.
    Accepted {
        #[serde(skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        state: Option<TaskState>,
        #[serde(skip_serializing_if = "Option::is_none")]
        receipts: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
    },
    Refused {
        code: &'static str,
        message: String,
    },
}

impl From<A202Refusal> for Outcome {
    fn from(r: A202Refusal) -> Outcome {
        Outcome::Refused {
            code: r.code().unwrap_or("kernel_validation"),
            message: r.to_string(),
        }
    }
}

/// Which carrier a check or submission uses: the A2A one (the AgentCard, a message) or
/// plain HTTPS (the preflight document, `POST /a202/objects`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Carrier {
    A2a,
    Https,
}

/// What `check` and `send` are given.
pub struct Exchange<'a> {
    pub url: &'a str,
    /// The object to send after the check passed (`send`), or none (`check`).
    pub file: Option<&'a str>,
    pub token: Option<&'a str>,
    pub carrier: Carrier,
    pub local: &'a Versions,
    pub json: bool,
}

/// The capability check, then the submission when there is an object; the exit code is 0
/// when it passed and 1 when it was refused.
pub async fn exchange(args: Exchange<'_>) -> Result<u8> {
    let Exchange {
        url,
        file,
        token,
        carrier,
        local,
        json,
    } = args;
    let outcome = if insecure(url)? {
        Outcome::from(A202Refusal::EndpointInsecure)
    } else {
        // Every request activates the extension (a card or preflight GET ignores it).
        let mut activation = reqwest::header::HeaderMap::new();
        for name in [
            extensions::HEADER,
            extensions::LEGACY_HEADER,
            a202::HTTP_HEADER,
        ] {
            activation.insert(name, reqwest::header::HeaderValue::from_static(a202::URI));
        }
        let http = reqwest::Client::builder()
            .default_headers(activation)
            .build()?;
        let object = file.map(read_object).transpose()?;
        let to = Counterparty {
            http: &http,
            token,
            carrier,
            url,
        };
        to.exchange(local, object).await
    };
    Ok(report(outcome, json))
}

/// Reads a JSON object from a file.
pub fn read_object(path: &str) -> Result<Value> {
    let text = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    serde_json::from_slice(&text).with_context(|| format!("{path} is not JSON"))
}

/// Plain HTTP anywhere but loopback (a card file is no endpoint).
fn insecure(url: &str) -> Result<bool> {
    if std::path::Path::new(url).is_file() {
        return Ok(false);
    }
    let parsed = url::Url::parse(url).with_context(|| format!("{url} is not a URL"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    Ok(parsed.scheme() != "https" && !loopback)
}

/// Where a check or submission goes.
struct Counterparty<'a> {
    http: &'a reqwest::Client,
    token: Option<&'a str>,
    carrier: Carrier,
    url: &'a str,
}

impl Counterparty<'_> {
    /// The capability check, then (for `send`) the submission.
    async fn exchange(&self, local: &Versions, object: Option<Value>) -> Outcome {
        let surface = match self.carrier {
            Carrier::A2a => fetch_card(self.http, self.url)
                .await
                .map_err(|e| e.to_string()),
            Carrier::Https => self.fetch_json(&preflight_url(self.url)).await,
        };
        let supported = match capability::check(local, surface.as_ref().map_err(Clone::clone)) {
            Ok(s) => s,
            Err(_) => return Outcome::from(A202Refusal::ExtensionUnsupported),
        };
        let (Some(object), Ok(surface)) = (object, surface) else {
            return checked(&supported);
        };
        let bytes = canonical::canonical(&object);
        match self.carrier {
            Carrier::A2a => self.over_a2a(&surface, &object, bytes).await,
            Carrier::Https => self.over_https(bytes).await,
        }
    }

    async fn fetch_json(&self, url: &str) -> Result<Value, String> {
        let resp = self.http.get(url).send().await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("{url} answered {}", resp.status()));
        }
        resp.json().await.map_err(|e| e.to_string())
    }

    /// One raw part with the object's canonical bytes and its transaction in the message's
    /// extension payload; the agent must echo the activation.
    async fn over_a2a(&self, card: &Value, object: &Value, bytes: Vec<u8>) -> Outcome {
        let part = Part {
            content: Content::Raw(bytes),
            media_type: Some(a202::MEDIA_TYPE.into()),
            filename: None,
            metadata: None,
        };
        let mut metadata = serde_json::Map::new();
        metadata.insert(
            a202::URI.into(),
            Value::Object(
                object
                    .get("transaction_id")
                    .map(|id| ("transaction_id".to_owned(), id.clone()))
                    .into_iter()
                    .collect(),
            ),
        );
        let message = Message {
            message_id: uuid::Uuid::now_v7().to_string(),
            context_id: None,
            task_id: None,
            role: Role::User,
            parts: vec![part],
            metadata: Some(metadata),
            extensions: vec![a202::URI.into()],
            reference_task_ids: Vec::new(),
        };
        let all = match interfaces(card) {
            Ok(all) => all,
            Err(e) => return failed(e),
        };
        let sent = with_policy(
            self.http,
            self.token,
            &candidates(&all, Policy::Auto, None),
            Policy::Auto,
            true,
            |c| {
                let m = message.clone();
                async move { c.send_echoed(&m, false).await }
            },
        )
        .await;
        match sent {
            Ok((_, (answer, echo))) if echo.iter().any(|u| u == a202::URI) => {
                let task = match answer {
                    StreamResponse::Task(task) => Some(task),
                    _ => None,
                };
                Outcome::Accepted {
                    task_id: task.as_ref().map(|t| t.id.clone()),
                    state: task.as_ref().map(|t| t.status.state),
                    receipts: task
                        .as_ref()
                        .and_then(|t| t.metadata.as_ref()?.get(a202::URI)?.get("receipts"))
                        .cloned(),
                    status: None,
                }
            }
            Ok(_) => Outcome::from(A202Refusal::ExtensionUnsupported),
            Err(e) => failed(e),
        }
    }

    /// `POST {origin}/a202/objects`: 202 is the only acceptance.
    async fn over_https(&self, bytes: Vec<u8>) -> Outcome {
        let mut req = self
            .http
            .post(format!("{}/a202/objects", origin(self.url)))
            .header(reqwest::header::CONTENT_TYPE, a202::MEDIA_TYPE)
            .body(bytes);
        if let Some(token) = self.token {
            req = req.bearer_auth(token);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return failed(ClientError::Transport(e.to_string())),
        };
        let status = resp.status();
        let echoed = extensions::listed(resp.headers(), a202::HTTP_HEADER)
            .iter()
            .any(|u| u == a202::URI);
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        match (status.as_u16(), echoed) {
            (202, true) => Outcome::Accepted {
                task_id: None,
                state: None,
                receipts: None,
                status: Some(202),
            },
            (202, false) => Outcome::from(A202Refusal::ExtensionUnsupported),
            (code, _) => Outcome::Refused {
                code: match body["code"].as_str() {
                    Some(c) => registered(c),
                    None if code == 412 => Unsupported::CODE,
                    None => "refused",
                },
                message: format!("{status}: {}", body["message"].as_str().unwrap_or_default()),
            },
        }
    }
}

fn checked(s: &Supported) -> Outcome {
    Outcome::Supported {
        uri: a202::URI,
        required: s.required,
        read_versions: s.theirs.read_versions.clone(),
        write_version: s.theirs.write_version.clone(),
    }
}

/// The preflight document's URL: the URL itself when it names a `.json`, else the
/// well-known path at its origin.
fn preflight_url(url: &str) -> String {
    if url.ends_with(".json") {
        url.to_owned()
    } else {
        format!("{}/.well-known/a202-capability.json", origin(url))
    }
}

fn origin(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_else(|_| url.trim_end_matches('/').to_owned())
}

/// A code the counterparty sent, as one of ours (anything else is reported as refused).
fn registered(code: &str) -> &'static str {
    a202::CODES
        .into_iter()
        .find(|c| *c == code)
        .unwrap_or("refused")
}

/// A carrier failure after the check: the A202 code the A2A error's ErrorInfo names, or
/// the error.
fn failed(e: ClientError) -> Outcome {
    let code = match &e {
        ClientError::A2a { metadata, .. } => metadata
            .get("a202_code")
            .and_then(Value::as_str)
            .map_or("refused", registered),
        _ => "refused",
    };
    Outcome::Refused {
        code,
        message: e.to_string(),
    }
}

fn report(outcome: Outcome, json_out: bool) -> u8 {
    let json = || serde_json::to_string(&outcome).unwrap_or_default();
    match &outcome {
        Outcome::Refused { code, message } if !json_out => {
            println!("{code}");
            eprintln!("{message}");
        }
        _ if json_out => println!("{}", json()),
        _ => println!(
            "{}",
            serde_json::to_string_pretty(&outcome).unwrap_or_default()
        ),
    }
    u8::from(matches!(outcome, Outcome::Refused { .. }))
}
