"""The official Python a2a-sdk client against the real ptyhost, over each of HTTP+JSON 1.0,
JSON-RPC 1.0, gRPC 1.0 (its GrpcTransport), HTTP+JSON 0.3 and JSON-RPC 0.3: it sends commands, streams them, reads, lists,
cancels and subscribes to tasks, and manages push notification configs."""

import asyncio
import os
import subprocess
import tempfile
import uuid

import grpc
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

TOKEN = "sdk-test-admin-token"
# (binding, protocol version): 1.0 clients resolve ptyhost's own card; 0.3 clients get a
# card with only the 0.3 interface, which makes the SDK use its 0.3 compat transports.
INTERFACES = [("HTTP+JSON", "1.0"), ("JSONRPC", "1.0"), ("GRPC", "1.0"), ("HTTP+JSON", "0.3"), ("JSONRPC", "0.3")]
IDS = [f"{b} {v}" for b, v in INTERFACES]


@pytest.fixture(scope="module")
def server():
    yield from serving("--push-allow-loopback")


def serving(*flags):
    """A ptyhost serving with `flags` while the fixture lasts; its base URL."""
    binary = os.environ.get("PTYHOST_BIN", "../../target/debug/ptyhost")
    data = tempfile.mkdtemp(prefix="ptyhost-sdk-")
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--bootstrap-token", TOKEN, *flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "HOME": data},  # the shells read none of this machine's dotfiles
    )
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split("listening on ", 1)[1].strip()
    proc.terminate()
    proc.wait(timeout=10)


def run(server, interface, body, streaming=False):
    binding, version = interface

    async def go():
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        # The bearer token as gRPC call credentials, over plaintext to the loopback address.
        credentials = grpc.composite_channel_credentials(
            grpc.local_channel_credentials(), grpc.access_token_call_credentials(TOKEN))
        config = ClientConfig(
            supported_protocol_bindings=[binding], httpx_client=http, streaming=streaming,
            grpc_channel_factory=lambda url: grpc.aio.secure_channel(url, credentials))
        if version == "1.0":
            card = server
        else:
            url = f"{server}/jsonrpc" if binding == "JSONRPC" else server
            card = AgentCard(
                name="ptyhost", description="the 0.3 view", version="1",
                capabilities=AgentCapabilities(streaming=True, push_notifications=True),
                supported_interfaces=[AgentInterface(protocol_binding=binding, protocol_version="0.3", url=url)],
            )
        client = await create_client(card, client_config=config)
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


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_send_runs_the_command_and_get_and_list_read_it_back(server, interface):
    async def body(client):
        task = await send(client, f"echo hello-{interface[1]}")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == f"hello-{interface[1]}\r\n"
        again = await client.get_task(GetTaskRequest(id=task.id))
        assert again.id == task.id and again.status.state == TaskState.TASK_STATE_COMPLETED
        if interface[1] == "1.0":  # 0.3 has no ListTasks
            page = await client.list_tasks(ListTasksRequest(context_id=task.context_id, page_size=10))
            assert [t.id for t in page.tasks] == [task.id]
            assert page.next_page_token == ""
    run(server, interface, body)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_a_failing_command_fails_the_task_with_its_exit_code(server, interface):
    async def body(client):
        task = await send(client, "sh -c 'exit 3'")
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert task.metadata["exit_code"] == 3
    run(server, interface, body)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_cancel_stops_a_running_command_and_the_shell_goes_on(server, interface):
    async def body(client):
        task = await send(client, "sleep 100", return_immediately=True)
        await asyncio.sleep(0.3)
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        after = await send(client, "echo still-here", context_id=task.context_id)
        assert after.artifacts[0].parts[0].text == "still-here\r\n"
    run(server, interface, body)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_streaming_delivers_the_task_then_updates_until_it_completes(server, interface):
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
    run(server, interface, body, streaming=True)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_subscribe_follows_a_running_task_to_its_end(server, interface):
    async def start(client):
        return await send(client, "sleep 1; echo late", return_immediately=True)
    task = run(server, interface, start)

    async def body(client):
        events = [ev async for ev in client.subscribe(SubscribeToTaskRequest(id=task.id))]
        assert events[0].HasField("task") and events[0].task.id == task.id
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        final = await client.get_task(GetTaskRequest(id=task.id))
        assert final.artifacts[0].parts[0].text == "late\r\n"
    run(server, interface, body, streaming=True)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_push_notification_configs_are_created_read_listed_and_deleted(server, interface):
    async def body(client):
        task = await send(client, "sleep 30", return_immediately=True)
        made = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="hook-1", url="http://127.0.0.1:9/hook", token="tok-1")
        )
        assert (made.id, made.url, made.token) == ("hook-1", "http://127.0.0.1:9/hook", "tok-1")
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        assert got.url == made.url
        if interface != ("HTTP+JSON", "0.3"):  # the SDK's 0.3 REST transport lacks list and delete
            page = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in page.configs] == ["hook-1"]
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
            )
            page = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert list(page.configs) == []
        await client.cancel_task(CancelTaskRequest(id=task.id))
    run(server, interface, body)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_a_file_part_runs_as_a_script_and_an_output_comes_back_as_a_file_artifact(server, interface):
    from google.protobuf import struct_pb2

    script = b"echo from-script; echo result-$((6*7)) > report.txt\n"
    outputs = struct_pb2.Value()
    outputs.struct_value.update({"outputs": ["report.txt"]})

    async def body(client):
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[
            Part(raw=script, filename="script.sh", media_type="text/x-shellscript"),
            Part(text="sh script.sh"),
            Part(data=outputs),
        ])
        events = [ev async for ev in client.send_message(SendMessageRequest(message=message))]
        task = events[0].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        by_id = {a.artifact_id: a for a in task.artifacts}
        assert "from-script" in by_id["output"].parts[0].text
        report = by_id["file:report.txt"].parts[0]
        assert (report.filename, report.raw) == ("report.txt", b"result-42\n")
        stored = await client.get_task(GetTaskRequest(id=task.id, history_length=10))
        sent = stored.history[0].parts[0]
        assert sent.WhichOneof("content") == "url", "the history keeps a reference, not the bytes"
        assert sent.url.endswith(f"/sessions/{task.context_id}/files/script.sh")
    run(server, interface, body)


@pytest.mark.parametrize("interface", INTERFACES, ids=IDS)
def test_an_unknown_task_and_a_finished_one_raise_the_sdks_typed_errors(server, interface):
    from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

    async def body(client):
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))
        done = await send(client, "true")
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=done.id))
    run(server, interface, body)
