"""The a2a-tck scenarios that span more than one call, played by `--executor conformance`
and driven by the official Python a2a-sdk client over HTTP+JSON, JSON-RPC and gRPC."""

import asyncio
import uuid

import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest, TaskState

from test_sdk_client import run, serving

BINDINGS = [("HTTP+JSON", "1.0"), ("JSONRPC", "1.0"), ("GRPC", "1.0")]


@pytest.fixture(scope="module")
def conformance():
    yield from serving("--executor", "conformance")


def state(event):
    return event.task.status.state if event.HasField("task") else event.status_update.status.state


def message(message_id, task_id=None):
    m = Message(role=Role.ROLE_USER, message_id=f"{message_id}-{uuid.uuid4().hex[:8]}", parts=[Part(text="go")])
    if task_id:
        m.task_id = task_id
    return SendMessageRequest(message=m)


@pytest.mark.parametrize("interface", BINDINGS, ids=[b for b, _ in BINDINGS])
def test_stream_sub_002_a_subscription_ends_at_the_terminal_state_a_follow_up_reaches(conformance, interface):
    async def ask(client):
        events = [ev async for ev in client.send_message(message("tck-input-required"))]
        assert state(events[-1]) == TaskState.TASK_STATE_INPUT_REQUIRED
        return events[-1].task
    task = run(conformance, interface, ask)

    async def follow(client):
        async def subscribed():
            return [ev async for ev in client.subscribe(SubscribeToTaskRequest(id=task.id))]
        events = asyncio.create_task(subscribed())
        await asyncio.sleep(0.3)
        assert not events.done(), "the subscription stays open at INPUT_REQUIRED"
        answered = [ev async for ev in client.send_message(message("tck-complete-task", task.id))]
        assert state(answered[-1]) == TaskState.TASK_STATE_COMPLETED
        return await asyncio.wait_for(events, 10)
    events = run(conformance, interface, follow, streaming=True)
    assert state(events[0]) == TaskState.TASK_STATE_INPUT_REQUIRED
    assert state(events[-1]) == TaskState.TASK_STATE_COMPLETED
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert events[-1].status_update.status.message.parts[0].text == "Hello from TCK"
