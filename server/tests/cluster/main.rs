//! Several nodes on one PostgreSQL: every node lists the cluster's nodes and sessions, a
//! session created on one node is attached, driven and read through the others, and a
//! node that dies leaves its sessions closed once (`node_lost`) and readable everywhere.

#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use wire::CloseReason;
use wire::a2a::{ListTasksResponse, StreamResponse};
use wire::control;
use wire::rpc::{JsonRpcResponse, Outcome};

mod lifecycle;
mod membership;
mod tasks_and_failures;

/// A node's heartbeat timeout in these tests: a killed node counts as dead after it.
const NODE_TIMEOUT: &str = "2";

/// `n` nodes (`node-a`, `node-b`, …) on one new database, or none without PostgreSQL.
/// They start together: the first migrates the empty database while the others wait on
/// its lock.
async fn cluster(n: usize) -> Option<(String, Vec<TestServer>)> {
    let db = postgres_database().await?;
    let nodes = futures_util::future::join_all((0..n).map(|i| node(&db, i))).await;
    Some((db, nodes))
}

async fn node(db: &str, i: usize) -> TestServer {
    let id = format!("node-{}", (b'a' + i as u8) as char);
    TestServer::start(&[
        "--database-url",
        db,
        "--node-id",
        &id,
        "--node-timeout",
        NODE_TIMEOUT,
        "--shell-pool",
        "0",
    ])
    .await
}

/// `ids`, sorted.
fn sorted<'a>(ids: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut ids: Vec<String> = ids.cloned().collect();
    ids.sort();
    ids
}

async fn nodes(server: &TestServer, token: &str) -> (u16, Value) {
    let req = server.http.get(format!("http://{}/nodes", server.addr));
    server.call(req, token).await
}

/// The cluster's nodes, as `server` lists them to an admin.
async fn node_list(server: &TestServer) -> Vec<control::Node> {
    let (status, list) = nodes(server, ADMIN).await;
    assert_eq!(status, 200, "{list}");
    serde_json::from_value::<control::Nodes>(list)
        .unwrap()
        .nodes
}

fn binary_output(frames: &[Vec<u8>]) -> Vec<u8> {
    frames
        .iter()
        .flat_map(|b| {
            wire::parse_binary_output(b)
                .map_or(&[][..], |(_, _, d)| d)
                .to_vec()
        })
        .collect()
}

/// An A2A 1.0 JSON-RPC call on `server`.
async fn rpc(server: &TestServer, method: &str, params: Value) -> Outcome<Task> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let req = server
        .http
        .post(format!("http://{}/jsonrpc", server.addr))
        .header("Content-Type", "application/json")
        .body(body.to_string());
    let (_, answer) = server.call(req.header("A2A-Version", "1.0"), ADMIN).await;
    let answer: JsonRpcResponse<Task> = serde_json::from_value(answer).unwrap();
    answer.outcome
}

/// The JSON-RPC results of a streaming call, in order.
async fn rpc_stream(server: &TestServer, method: &str, params: Value) -> Vec<StreamResponse> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let text = server.sse("/jsonrpc", &body, Some("1.0")).await;
    text.split("\n\n")
        .filter_map(|block| block.lines().find_map(|l| l.strip_prefix("data:")))
        .map(|data| {
            let response: JsonRpcResponse<StreamResponse> =
                serde_json::from_str(data.trim()).unwrap();
            match response.outcome {
                Outcome::Result(event) => event,
                Outcome::Error(e) => panic!("{method}: {e:?}"),
            }
        })
        .collect()
}

fn message(id: &str, context: Option<&str>, text: &str) -> Value {
    json!({ "messageId": id, "role": "ROLE_USER", "contextId": context, "parts": [{ "text": text }] })
}

/// `scripts/postgres.sh COMMAND DIR`; its output.
fn postgres_sh(command: &str, dir: &std::path::Path) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/postgres.sh");
    let out = std::process::Command::new(script)
        .args([command, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "postgres.sh {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

async fn readyz(server: &TestServer) -> u16 {
    let url = format!("http://{}/readyz", server.addr);
    match server
        .http
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
    {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

async fn wait_ready(nodes: &[&TestServer], status: u16, within: Duration) {
    tokio::time::timeout(within, async {
        loop {
            let mut all = true;
            for n in nodes {
                all &= readyz(n).await == status;
            }
            if all {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("every node's /readyz answers {status}"));
}

/// A PostgreSQL in a temp dir, removed (stopped first) however the test ends.
struct OwnPostgres(tempfile::TempDir);

impl OwnPostgres {
    fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        postgres_sh("remove", self.path());
    }
}
