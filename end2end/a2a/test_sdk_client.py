"""The official Python a2a-sdk client against the real ptyhost, over HTTP+JSON 1.0 and
JSON-RPC 1.0: it resolves the card, sends commands, reads, lists and cancels tasks."""

import asyncio
import os
import subprocess
import tempfile
import uuid

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)

TOKEN = "sdk-test-admin-token"
BINDINGS = ["HTTP+JSON", "JSONRPC"]


@pytest.fixture(scope="module")
def server():
    binary = os.environ.get("PTYHOST_BIN", "../../target/debug/ptyhost")
    data = tempfile.mkdtemp(prefix="ptyhost-sdk-")
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--bootstrap-token", TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split("listening on ", 1)[1].strip()
    proc.terminate()
    proc.wait(timeout=10)


def run(server, binding, body, streaming=False):
    async def go():
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        config = ClientConfig(supported_protocol_bindings=[binding], httpx_client=http, streaming=streaming)
        client = await create_client(server, client_config=config)
        try:
            return await body(client)
        finally:
            await client.close()
            await http.aclose()
    return asyncio.run(go())


async def send(client, text, context_id=None, return_immediately=False):
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    request = SendMessageRequest(message=message)
    if return_immediately:
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    events = [ev async for ev in client.send_message(request)]
    assert len(events) == 1 and events[0].HasField("task")
    return events[0].task


@pytest.mark.parametrize("binding", BINDINGS)
def test_send_runs_the_command_and_get_and_list_read_it_back(server, binding):
    async def body(client):
        task = await send(client, f"echo hello-{binding}")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == f"hello-{binding}\r\n"
        again = await client.get_task(GetTaskRequest(id=task.id))
        assert again.id == task.id and again.status.state == TaskState.TASK_STATE_COMPLETED
        page = await client.list_tasks(ListTasksRequest(context_id=task.context_id, page_size=10))
        assert [t.id for t in page.tasks] == [task.id]
        assert page.next_page_token == ""
    run(server, binding, body)


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_failing_command_fails_the_task_with_its_exit_code(server, binding):
    async def body(client):
        task = await send(client, "false")
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert task.metadata["exit_code"] == 1
    run(server, binding, body)


@pytest.mark.parametrize("binding", BINDINGS)
def test_cancel_stops_a_running_command_and_the_shell_goes_on(server, binding):
    async def body(client):
        task = await send(client, "sleep 100", return_immediately=True)
        await asyncio.sleep(0.3)
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        after = await send(client, "echo still-here", context_id=task.context_id)
        assert after.artifacts[0].parts[0].text == "still-here\r\n"
    run(server, binding, body)


@pytest.mark.parametrize("binding", BINDINGS)
def test_streaming_delivers_the_task_then_updates_until_it_completes(server, binding):
    async def body(client):
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="echo one; echo two")])
        events = [ev async for ev in client.send_message(SendMessageRequest(message=message))]
        assert events[0].HasField("task")
        assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
        streamed = "".join(
            ev.artifact_update.artifact.parts[0].text for ev in events if ev.HasField("artifact_update")
        )
        assert streamed == "one\r\ntwo\r\n"
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    run(server, binding, body, streaming=True)


def test_the_sdk_0_3_compat_transport_drives_the_0_3_surface(server):
    """A card listing only the 0.3 JSON-RPC interface makes the SDK speak 0.3 shapes."""
    async def go():
        card = AgentCard(
            name="ptyhost", description="0.3 view", version="1",
            capabilities=AgentCapabilities(streaming=False),
            supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=f"{server}/jsonrpc")],
        )
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        client = await create_client(card, client_config=ClientConfig(supported_protocol_bindings=["JSONRPC"], httpx_client=http, streaming=False))
        try:
            task = await send(client, "echo via-0.3")
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.artifacts[0].parts[0].text == "via-0.3\r\n"
            again = await client.get_task(GetTaskRequest(id=task.id))
            assert again.id == task.id
        finally:
            await client.close()
            await http.aclose()
    asyncio.run(go())
