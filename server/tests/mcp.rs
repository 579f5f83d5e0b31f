//! MCP's Streamable HTTP transport at `B/mcp`, spoken plainly (JSON-RPC over POST, answers
//! as JSON or server-sent events): where the cards say it is, who it lets in, and that what
//! an agent does there is an ordinary session and task that the UI lists and the recording
//! marks. (The tools themselves are tested with the official SDKs in `end2end/mcp/`.)
//!
//! Raw JSON on purpose: these tests pin MCP's member names as the specs write them, apart
//! from the `wire` types the server encodes with.

mod common;

use common::*;
use serde_json::{Value, json};

/// One MCP session at `B/mcp` (protocol 2025-11-25), as `token`.
struct Mcp<'a> {
    server: &'a TestServer,
    token: String,
    session: Option<String>,
    next_id: u64,
}

impl<'a> Mcp<'a> {
    async fn open(server: &'a TestServer, token: &str) -> Mcp<'a> {
        let mut mcp = Mcp {
            server,
            token: token.to_owned(),
            session: None,
            next_id: 0,
        };
        let init = mcp
            .request(
                "initialize",
                json!({ "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": { "name": "ptyhost-tests", "version": "1" } }),
            )
            .await;
        assert_eq!(init["result"]["serverInfo"]["name"], "ptyhost", "{init}");
        mcp.post(
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            &[],
        )
        .await;
        mcp
    }

    /// POSTs `message` with `headers`; returns the status and the JSON-RPC answer, if any.
    async fn post(&mut self, message: Value, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut req = (self.server.http.post(self.server.url("/mcp")))
            .bearer_auth(&self.token)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .body(message.to_string());
        if let Some(s) = &self.session {
            req = req.header("Mcp-Session-Id", s);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        if let Some(s) = resp.headers().get("mcp-session-id") {
            self.session = Some(s.to_str().unwrap().to_owned());
        }
        let body = resp.text().await.unwrap();
        // An event stream's answer is its last data line; a JSON body is the answer itself.
        let answer = (body.lines().filter_map(|l| l.strip_prefix("data:")))
            .rfind(|d| !d.trim().is_empty())
            .unwrap_or(&body)
            .trim();
        (status, serde_json::from_str(answer).unwrap_or(Value::Null))
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let message =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params });
        let (status, answer) = self.post(message, &[]).await;
        assert_eq!(status, 200, "{method}: {answer}");
        answer
    }

    /// A tool's structured result; panics on an error.
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = (self.request(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
        ))
        .await;
        let result = &answer["result"];
        assert_ne!(result["isError"], true, "{tool}: {answer}");
        result["structuredContent"].clone()
    }
}

#[tokio::test]
async fn mcp_is_served_where_both_cards_say() {
    let s = TestServer::start(&[]).await;
    let endpoint = s.url("/mcp");
    let pure = s
        .public(format!("http://{}/.well-known/agent-card.json", s.addr))
        .await;
    let card = s
        .public(format!(
            "http://{}/agents/local/.well-known/agent-card.json",
            s.addr
        ))
        .await;
    for card in [&card, &pure] {
        let skill = (card["skills"].as_array().unwrap().iter())
            .find(|k| k["id"] == "mcp")
            .expect("an mcp skill");
        assert!(
            skill["description"].as_str().unwrap().contains(&endpoint),
            "{skill}"
        );
    }
    let binding = (card["bindings"].as_array().unwrap().iter())
        .find(|b| b["uri"].as_str().unwrap().contains("modelcontextprotocol"))
        .expect("an MCP entry in bindings");
    assert_eq!(binding["endpoint"], endpoint);
    let mut mcp = Mcp::open(&s, ADMIN).await;
    let tools = mcp.request("tools/list", json!({})).await;
    assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 13);
}

#[tokio::test]
async fn a_page_from_another_origin_and_a_request_without_a_token_are_refused_and_start_nothing() {
    let s = TestServer::start(&[]).await;
    let mut mcp = Mcp::open(&s, ADMIN).await;
    let create = json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": { "name": "session_create", "arguments": { "label": "refused" } } });
    let (status, body) = mcp
        .post(create.clone(), &[("Origin", "http://evil.example")])
        .await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["code"], "origin_not_allowed", "{body}");
    let own_origin = format!("http://{}", s.addr);
    mcp.token = "not-a-token".into();
    let (status, _) = mcp.post(create.clone(), &[("Origin", &own_origin)]).await;
    assert_eq!(status, 401);
    let (_, sessions) = s.get("/sessions", ADMIN).await;
    assert_eq!(sessions["sessions"], json!([]), "nothing started");
    // The same call from the server's own origin, with the token, goes through.
    mcp.token = ADMIN.into();
    let (status, body) = mcp.post(create, &[("Origin", &own_origin)]).await;
    assert_eq!(
        (status, &body["result"]["isError"]),
        (200, &json!(false)),
        "{body}"
    );
}

#[tokio::test]
async fn a_session_an_agent_runs_over_mcp_is_listed_recorded_with_its_task_and_an_a2a_task() {
    let s = TestServer::start(&[]).await;
    let mut mcp = Mcp::open(&s, ADMIN).await;
    let created = mcp
        .call("session_create", json!({ "label": "agent" }))
        .await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        created["ui_url"],
        format!("http://{}/sessions/{sid}", s.addr),
        "a link a person can open"
    );
    let run = mcp
        .call(
            "run",
            json!({ "session_id": sid, "command": "echo from-mcp" }),
        )
        .await;
    assert_eq!(
        (&run["status"], &run["output"]),
        (&json!("completed"), &json!("from-mcp\n"))
    );

    let (_, listed) = s.get("/sessions", ADMIN).await;
    let session = (listed["sessions"].as_array().unwrap().iter())
        .find(|v| v["session_id"] == sid)
        .expect("listed like any session");
    assert_eq!(session["label"], "agent");
    assert_eq!(session["sandbox"]["enabled"], true);

    let task_id = run["task_id"].as_str().unwrap();
    let (status, task) = s
        .a2a("GET", &format!("/tasks/{task_id}"), ADMIN, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(task["contextId"], sid.as_str());
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");

    let cast = s
        .http
        .get(s.url(&format!("/sessions/{sid}/recording.cast")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events: Vec<Value> = (cast.lines().skip(1))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e[1] == "m" && e[2].as_str().unwrap().ends_with("echo from-mcp")),
        "the recording marks the task: {cast}"
    );
}
