"""The official Python MCP SDK (`mcp`) against the real ptyhost, over each of its three ways
in: `ptyhost mcp` on stdio hosting its own sessions, Streamable HTTP at `/mcp` with a bearer
token, and `ptyhost mcp --url --token` on stdio driving that server. Each test names the
behaviour it proves; the tool results are read from `structuredContent`."""

import asyncio
import json
import os
import re
import subprocess
import tempfile
import time

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

TOKEN = "mcp-sdk-test-admin-token"
BIN = os.environ.get("PTYHOST_BIN", "../../target/debug/ptyhost")
WAYS = ["stdio", "http", "stdio-url"]


@pytest.fixture(scope="module")
def server():
    data = tempfile.mkdtemp(prefix="ptyhost-mcp-")
    proc = subprocess.Popen(
        [BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--bootstrap-token", TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "HOME": data},
    )
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield {"url": line.split("listening on ", 1)[1].strip(), "data": data}
    proc.terminate()
    proc.wait(timeout=10)


def token(server, scope):
    out = subprocess.run([BIN, "token", "create", "--scope", scope, "--data-dir", server["data"]],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def client(server, way, bearer=TOKEN, **kw):
    """An MCP client of ptyhost, the way named."""
    if way == "http":
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
        return Client(streamable_http_client(f"{server['url']}/mcp", http_client=http), **kw)
    if way == "stdio-url":
        args = ["mcp", "--url", server["url"], "--token", bearer]
    else:
        data = tempfile.mkdtemp(prefix="ptyhost-mcp-stdio-")
        args = ["mcp", "--data-dir", data]
    return Client(StdioServerParameters(command=BIN, args=args, env={"HOME": tempfile.gettempdir()}), **kw)


async def call(c, tool, **args):
    """A tool's structured result; fails on an `isError` result."""
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content
    assert json.loads(r.content[0].text) == r.structured_content
    return r.structured_content


async def refused(c, tool, **args):
    """The text of a tool's `isError` result."""
    r = await c.call_tool(tool, args)
    assert r.is_error, r.structured_content
    return r.content[0].text


def go(body):
    return asyncio.run(body())


@pytest.mark.parametrize("way", WAYS)
def test_run_of_echo_returns_its_output_and_exit_code_in_one_call(server, way):
    async def body():
        async with client(server, way) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert {"session_create", "session_list", "session_close", "run", "task_status", "send_keys",
                    "read_screen", "read_output", "wait_for", "file_read", "file_write", "file_list"} <= set(tools)
            assert tools["read_screen"].annotations.read_only_hint is True
            assert tools["run"].annotations.read_only_hint is False
            assert tools["run"].output_schema["properties"]["status"]
            r = await call(c, "run", command="printf '\\033[1;32mgreen\\033[0m\\n'; echo hello-mcp")
            assert r["status"] == "completed" and r["exit_code"] == 0
            assert r["output"] == "green\nhello-mcp\n"
            again = await call(c, "run", command="echo again")
            assert again["session_id"] == r["session_id"], "the pooled shell is kept for the next run"
            failed = await call(c, "run", command="sh -c 'exit 3'")
            assert failed["status"] == "failed" and failed["exit_code"] == 3
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_a_long_run_answers_running_and_task_status_later_has_its_output(server, way):
    async def body():
        async with client(server, way) as c:
            t0 = time.monotonic()
            r = await call(c, "run", command="sleep 3; echo late", yield_ms=500)
            assert r["status"] == "running" and time.monotonic() - t0 < 2.5
            assert (await call(c, "task_status", task_id=r["task_id"]))["status"] == "running"
            done = await call(c, "task_status", task_id=r["task_id"], wait_ms=15000)
            assert done["status"] == "completed" and done["output"] == "late\n" and done["exit_code"] == 0
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_cancel_interrupts_the_command_and_the_task_is_canceled(server, way):
    async def body():
        async with client(server, way) as c:
            sid = (await call(c, "session_create", label="cancel"))["session_id"]
            r = await call(c, "run", session_id=sid, command="sleep 30; echo never", yield_ms=300)
            assert r["status"] == "running"
            canceled = await call(c, "task_cancel", task_id=r["task_id"])
            assert canceled["status"] == "canceled" and "never" not in canceled["output"]
            # The client gives up on a call: the command it started is interrupted too.
            with anyio.move_on_after(1):
                await c.call_tool("run", {"session_id": sid, "command": "sleep 30; echo never", "yield_ms": 60000})
            t0 = time.monotonic()
            after = await call(c, "run", session_id=sid, command="echo after", yield_ms=10000)
            assert after["status"] == "completed" and after["output"] == "after\n"
            assert time.monotonic() - t0 < 8, "the shell was free again: the sleep was interrupted"
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_send_keys_answers_read_p_and_read_screen_shows_its_prompt(server, way):
    async def body():
        async with client(server, way) as c:
            sid = (await call(c, "session_create", label="keys"))["session_id"]
            r = await call(c, "run", session_id=sid, command="read -p 'your name? ' n; echo \"hi $n\"", yield_ms=500)
            assert r["status"] in ("running", "input_required")
            screen = await call(c, "read_screen", session_id=sid)
            row = next((l for l in screen["lines"] if l.startswith("your name?")), None)
            assert row == "your name?", screen
            assert screen["cursor"] == {"row": screen["lines"].index(row), "col": len("your name? ")}
            assert screen["cols"] > 0 and screen["rows"] > 0 and "read -p" in screen["running"]
            typed = await call(c, "send_keys", session_id=sid, keys=["world", "Enter"])
            assert typed["bytes"] == 6
            done = await call(c, "task_status", task_id=r["task_id"], wait_ms=10000)
            assert done["status"] == "completed" and done["output"].endswith("hi world\n")
            # A REPL driven by keys alone: Ctrl-C interrupts, Ctrl-D ends it.
            await call(c, "send_keys", session_id=sid, keys=["cat", "Enter"])
            await call(c, "wait_for", session_id=sid, idle_ms=300, timeout_ms=5000)
            assert (await call(c, "read_screen", session_id=sid))["running"] == "cat"
            await call(c, "send_keys", session_id=sid, keys="C-c")
            await call(c, "wait_for", session_id=sid, idle_ms=300, timeout_ms=5000)
            assert "running" not in await call(c, "read_screen", session_id=sid)
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_wait_for_answers_within_100_ms_of_the_matching_output(server, way):
    async def body():
        async with client(server, way) as c:
            sid = (await call(c, "session_create", label="wait"))["session_id"]
            await call(c, "run", session_id=sid, command="echo ready-marker")
            # Already on the screen: a wait matches only what arrives after the call.
            r = await call(c, "run", session_id=sid, yield_ms=0,
                           command="sleep 1.5; echo \"ready-marker $(date +%s.%N)\"")
            waited = await call(c, "wait_for", session_id=sid, pattern=r"ready-marker \d+\.\d+", timeout_ms=10000)
            answered = time.time()
            assert waited["matched"] and not waited["timed_out"]
            printed = float(re.search(r"ready-marker (\d+\.\d+)", waited["output"]).group(1))
            assert 0 <= answered - printed < 0.1, f"answered {answered - printed:.3f} s after the output"
            # A quiet period: answered once the output has been still that long.
            await call(c, "task_status", task_id=r["task_id"], wait_ms=5000)
            quiet = await call(c, "wait_for", session_id=sid, idle_ms=200, timeout_ms=5000)
            assert quiet["reason"] == "idle" and not quiet["timed_out"]
            late = await call(c, "wait_for", session_id=sid, pattern="never-printed", timeout_ms=300)
            assert late["timed_out"] and not late["matched"]
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_read_output_after_a_cursor_returns_only_the_new_lines(server, way):
    async def body():
        async with client(server, way) as c:
            sid = (await call(c, "session_create", label="cursor"))["session_id"]
            first = await call(c, "run", session_id=sid, command="echo line-one")
            await call(c, "run", session_id=sid, command="echo line-two")
            new = await call(c, "read_output", session_id=sid, after=first["cursor"])
            assert "line-two" in new["output"] and "line-one" not in new["output"]
            assert "\x1b" not in new["output"] and new["cursor"] > first["cursor"]
            assert (await call(c, "read_output", session_id=sid, after=new["cursor"]))["output"] == ""
            everything = await call(c, "read_output", session_id=sid)
            assert "line-one" in everything["output"] and "line-two" in everything["output"]
    go(body)


@pytest.mark.parametrize("way", ["http", "stdio-url"])
def test_an_observer_token_is_refused_every_write_and_nothing_changes(server, way):
    async def body():
        async with client(server, "http") as admin:
            sid = (await call(admin, "session_create", label="watched"))["session_id"]
            done = await call(admin, "run", session_id=sid, command="echo before")
            await call(admin, "file_write", session_id=sid, path="kept.txt", content="kept")
            listed = await call(admin, "session_list")
        async with client(server, way, bearer=token(server, "pty:observe")) as c:
            writes = [
                ("session_create", {"label": "no"}),
                ("session_close", {"session_id": sid}),
                ("run", {"session_id": sid, "command": "touch made-by-observer"}),
                ("run", {"command": "touch made-by-observer"}),
                ("task_cancel", {"task_id": done["task_id"]}),
                ("send_keys", {"session_id": sid, "keys": ["touch made-by-observer", "Enter"]}),
                ("file_write", {"session_id": sid, "path": "kept.txt", "content": "changed"}),
                ("file_write", {"session_id": sid, "path": "new.txt", "content": "new"}),
            ]
            for tool, args in writes:
                assert (await refused(c, tool, **args)).startswith("PERMISSION_DENIED"), tool
            # What it may do: read.
            assert (await call(c, "read_screen", session_id=sid))["lines"]
            assert "before" in (await call(c, "read_output", session_id=sid))["output"]
            assert (await call(c, "task_status", task_id=done["task_id"]))["status"] == "completed"
        async with client(server, "http") as admin:
            after = await call(admin, "session_list")
            assert [s["session_id"] for s in after["sessions"]] == [s["session_id"] for s in listed["sessions"]]
            assert next(s for s in after["sessions"] if s["session_id"] == sid)["state"] == "running"
            names = [e["name"] for e in (await call(admin, "file_list", session_id=sid))["entries"]]
            assert names == ["kept.txt"]
            assert (await call(admin, "file_read", session_id=sid, path="kept.txt"))["content"] == "kept"
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_files_written_are_read_and_listed_by_the_files_rules(server, way):
    async def body():
        async with client(server, way) as c:
            sid = (await call(c, "session_create", label="files"))["session_id"]
            w = await call(c, "file_write", session_id=sid, path="src/hello.txt", content="hello\n")
            assert w == {"path": "src/hello.txt", "bytes": 6, "replaced": False}
            blob = await call(c, "file_write", session_id=sid, path="blob.bin", content="AP8=", encoding="base64")
            assert blob["bytes"] == 2
            r = await call(c, "run", session_id=sid, command="cat src/hello.txt; od -An -tx1 blob.bin")
            assert r["output"] == "hello\n 00 ff\n"
            read = await call(c, "file_read", session_id=sid, path="blob.bin")
            assert (read["encoding"], read["content"], read["size"]) == ("base64", "AP8=", 2)
            listed = await call(c, "file_list", session_id=sid)
            assert {(e["name"], e["kind"]) for e in listed["entries"]} >= {("src", "dir"), ("blob.bin", "file")}
            assert (await refused(c, "file_read", session_id=sid, path="../../etc/passwd")).startswith("INVALID_ARGUMENT")
            assert (await refused(c, "file_read", session_id=sid, path="missing.txt")).startswith("NOT_FOUND")
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_a_long_run_reports_progress_with_its_latest_line(server, way):
    async def body():
        seen = []

        async def progress(value, total, message):
            seen.append((value, message))

        async with client(server, way) as c:
            r = await c.call_tool("run", {"command": "for i in 1 2 3 4; do echo step-$i; sleep 0.4; done"},
                                  progress_callback=progress)
            assert r.structured_content["status"] == "completed"
        assert len(seen) >= 2, seen
        assert all(b[0] > a[0] for a, b in zip(seen, seen[1:])), "progress only grows"
        assert all(re.fullmatch(r"step-\d", m) for _, m in seen), seen
    go(body)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_a_sessions_screen_is_a_resource_whose_changes_a_subscriber_hears(server, way, mode):
    """`subscriptions/listen` where the client speaks 2026-07-28 (`auto`), and
    `resources/subscribe` with its notifications where it speaks the handshake era."""
    async def body():
        updates = []

        async def on_message(message):
            if getattr(message, "method", None) == "notifications/resources/updated":
                updates.append(str(message.params.uri))

        async with client(server, way, mode=mode, message_handler=on_message) as c:
            sid = (await call(c, "session_create", label="screen"))["session_id"]
            uri = f"ptyhost://sessions/{sid}/screen"
            assert uri in [str(r.uri) for r in (await c.list_resources()).resources]
            if mode == "auto":
                assert c.session.protocol_version == "2026-07-28"
                async with c.listen(resource_subscriptions=[uri]) as sub:
                    assert sub.honored.resource_subscriptions == [uri]
                    await call(c, "run", session_id=sid, command="echo screen-changed")
                    with anyio.fail_after(5):
                        async for event in sub:
                            if str(getattr(event, "uri", "")) == uri:
                                break
            else:
                await c.subscribe_resource(uri)
                await call(c, "run", session_id=sid, command="echo screen-changed")
                with anyio.fail_after(5):
                    while uri not in updates:
                        await anyio.sleep(0.05)
            text = (await c.read_resource(uri, cache_mode="refresh")).contents[0].text
            assert "screen-changed" in text.splitlines()
    go(body)


@pytest.mark.parametrize("way", WAYS)
def test_bad_input_is_refused_in_mcps_terms_and_changes_nothing(server, way):
    async def body():
        async with client(server, way) as c:
            before = len((await call(c, "session_list"))["sessions"])
            assert (await refused(c, "run", session_id="no-such-session", command="echo x")).startswith("NOT_FOUND")
            assert (await refused(c, "wait_for", session_id="x", pattern="(", timeout_ms=10)).startswith("INVALID_ARGUMENT")
            assert (await refused(c, "session_create", sandbox={"memory": "lots"})).startswith("INVALID_ARGUMENT")
            assert (await refused(c, "run", command="   ")).startswith("INVALID_ARGUMENT")
            assert (await refused(c, "task_status", task_id="no-such-task")).startswith("NOT_FOUND")
            missing = await c.call_tool("run", {"yield_ms": 5})
            assert missing.is_error and "command" in missing.content[0].text
            assert len((await call(c, "session_list"))["sessions"]) == before
            # Waits past any clock's range are held to the longest a call waits.
            huge = await call(c, "run", command="echo far", yield_ms=2**64 - 1, timeout_ms=2**64 - 1)
            assert huge["status"] == "completed" and huge["output"] == "far\n"
            assert (await call(c, "task_status", task_id=huge["task_id"], wait_ms=2**64 - 1))["status"] == "completed"
    go(body)
