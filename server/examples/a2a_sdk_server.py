"""The baseline for `a2a_bench`: a2a-sdk's own server (HTTP+JSON 1.0 at the root, uvicorn
with uvloop and httptools) with a trivial agent whose every task completes at once.

    python a2a_sdk_server.py PORT
"""

import sys

import uvicorn
from a2a.helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


class Trivial(AgentExecutor):
    async def execute(self, context, event_queue):
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            )
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()

    async def cancel(self, context, event_queue):
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def main():
    port = int(sys.argv[1])
    card = AgentCard(
        name="trivial", description="completes every task at once", version="1",
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="complete", name="complete", description="completes the task", tags=["test"])],
        supported_interfaces=[AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=f"http://127.0.0.1:{port}")],
    )
    handler = DefaultRequestHandler(agent_executor=Trivial(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_rest_routes(handler))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
