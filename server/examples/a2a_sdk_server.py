"""a2a-sdk's own server with a trivial agent whose every task completes at once: the
baseline of `a2a_bench`, and the foreign server of the client's policy tests.

    python a2a_sdk_server.py PORT [MODE]

MODE (what the card offers): 1.0 (default; the 0.3 compat layer is off), 0.3, both,
mislabelled (a "1.0" HTTP+JSON interface that is really the 0.3 REST surface, so a 1.0
request there gets VersionNotSupported, then a true 0.3 JSON-RPC interface), or a202 (1.0,
and a card that declares the A202 commercial extension, which this server never echoes as
activated).
"""

import sys

import uvicorn
from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


A202_URI = "https://schemas.a202.org/a2a-ext/commercial/0.1"


class Trivial(AgentExecutor):
    async def execute(self, context, event_queue):
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            )
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()

    async def cancel(self, context, event_queue):
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def interfaces(base, mode):
    one = [
        AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=base),
        AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{base}/jsonrpc"),
    ]
    legacy = [
        AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=f"{base}/jsonrpc"),
        AgentInterface(protocol_binding="HTTP+JSON", protocol_version="0.3", url=base),
    ]
    return {
        "1.0": one,
        "a202": one,
        "0.3": legacy,
        "both": one + legacy,
        "mislabelled": [
            AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=f"{base}/v1"),
            legacy[0],
        ],
    }[mode]


def main():
    port = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "1.0"
    base = f"http://127.0.0.1:{port}"
    capabilities = AgentCapabilities(streaming=True)
    if mode == "a202":
        a202 = AgentExtension(uri=A202_URI, description="Exchanges A202 commercial objects.", required=False)
        a202.params.update({"read_versions": ["0.1"], "write_version": "0.1"})
        capabilities.extensions.append(a202)
    card = AgentCard(
        name="trivial", description="completes every task at once", version="1",
        capabilities=capabilities,
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="complete", name="complete", description="completes the task", tags=["test"])],
        supported_interfaces=interfaces(base, mode),
    )
    handler = DefaultRequestHandler(agent_executor=Trivial(), task_store=InMemoryTaskStore(), agent_card=card)
    compat = mode not in ("1.0", "a202")
    routes = (
        create_agent_card_routes(card)
        + create_jsonrpc_routes(handler, rpc_url="/jsonrpc", enable_v0_3_compat=compat)
        + create_rest_routes(handler, enable_v0_3_compat=compat)
    )
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
