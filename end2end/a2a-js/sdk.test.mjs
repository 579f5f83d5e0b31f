// The official @a2a-js/sdk clients against the real ptyhost: its 1.0 transports (JSON-RPC,
// HTTP+JSON, gRPC) picked from ptyhost's own card, and its 0.3 compat transports (JSON-RPC,
// HTTP+JSON) from a card with only the 0.3 interfaces. Each sends, streams, gets, lists,
// cancels, subscribes, runs two commands in one context, and gets the typed errors for an
// unknown task and a task that cannot be canceled.
//   PTYHOST_BIN=target/debug/ptyhost node --test a2a-js/

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { serve } from '../ptyhost.mjs';

import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { TaskNotCancelableError, TaskNotFoundError } from '@a2a-js/sdk/errors';

const TOKEN = 'js-sdk-test-admin-token';
const auth = { serviceParameters: { authorization: `Bearer ${TOKEN}` } };
const [ROLE_USER, COMPLETED, FAILED, CANCELED] = [1, 3, 4, 5];

let server;
let base;

before(async () => { ({ base, process: server } = await serve(TOKEN)); });

after(() => server.kill('SIGTERM'));

/** A complete 1.0 message (the gRPC transport serializes every field). */
function message(text, contextId = '', taskId = '') {
  return {
    messageId: randomUUID(), contextId, taskId, role: ROLE_USER, metadata: undefined,
    extensions: [], referenceTaskIds: [],
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' }],
  };
}

const send = (client, text, contextId = '', configuration = undefined) =>
  client.sendMessage({ tenant: '', message: message(text, contextId), configuration, metadata: undefined }, auth);

const output = (task) => task.artifacts[0]?.parts[0]?.content?.value ?? '';

/** The task state an event of a stream carries, if any. */
const stateOf = (event) => event.payload?.value?.status?.state;

const factories = (legacy) => [
  new JsonRpcTransportFactory({ legacyCompat: { enabled: legacy } }),
  new RestTransportFactory({ legacyCompat: { enabled: legacy } }),
  new GrpcTransportFactory(),
];

/** A client of ptyhost's own card that prefers `transport`. */
async function client10(transport) {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: factories(false),
    preferredTransports: [transport],
  }));
  return factory.createFromUrl(base);
}

/** A 0.3 compat client: a card that lists only ptyhost's 0.3 `transport` interface. */
async function client03(transport) {
  const card = await (await fetch(`${base}/.well-known/agent-card.json`)).json();
  card.supportedInterfaces = card.supportedInterfaces.filter(
    (i) => i.protocolBinding === transport && i.protocolVersion === '0.3');
  assert.equal(card.supportedInterfaces.length, 1);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: factories(true),
    preferredTransports: [transport],
  }));
  return factory.createFromAgentCard(card);
}

const CLIENTS = [
  ['JSONRPC 1.0', () => client10('JSONRPC')],
  ['HTTP+JSON 1.0', () => client10('HTTP+JSON')],
  ['GRPC 1.0', () => client10('GRPC')],
  ['JSONRPC 0.3', () => client03('JSONRPC')],
  ['HTTP+JSON 0.3', () => client03('HTTP+JSON')],
];

for (const [name, make] of CLIENTS) {
  describe(name, () => {
    const ten = name.endsWith('1.0');

    test('send runs the command, get reads it back, and a second command shares its context', async () => {
      const client = await make();
      const task = await send(client, 'echo hello-js');
      assert.equal(task.status.state, COMPLETED);
      assert.equal(output(task), 'hello-js\r\n');
      const again = await client.getTask({ tenant: '', id: task.id, historyLength: undefined }, auth);
      assert.equal(again.id, task.id);
      const second = await send(client, 'echo second-js', task.contextId);
      assert.equal(second.contextId, task.contextId);
      assert.equal(output(second), 'second-js\r\n');
      if (ten) {
        const page = await client.listTasks({
          tenant: '', contextId: task.contextId, status: 0, pageSize: 10, pageToken: '',
          historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined,
        }, auth);
        assert.deepEqual(page.tasks.map((t) => t.id).sort(), [task.id, second.id].sort());
      }
    });

    test('a non-zero exit fails the task', async () => {
      const task = await send(await make(), "sh -c 'exit 3'");
      assert.equal(task.status.state, FAILED);
    });

    test('streaming delivers the task then its updates to the end', async () => {
      const client = await make();
      const states = [];
      for await (const event of client.sendMessageStream({ tenant: '', message: message('echo streamed-js'), configuration: undefined, metadata: undefined }, auth)) {
        const state = stateOf(event);
        if (state !== undefined) states.push(state);
      }
      assert.equal(states.at(-1), COMPLETED, JSON.stringify(states));
    });

    test('cancel stops a running command, subscribe follows one to its end', async () => {
      const client = await make();
      const running = await send(client, 'sleep 100', '', { returnImmediately: true, acceptedOutputModes: [], historyLength: undefined, taskPushNotificationConfig: undefined });
      await new Promise((r) => setTimeout(r, 300));
      const canceled = await client.cancelTask({ tenant: '', id: running.id, metadata: undefined }, auth);
      assert.equal(canceled.status.state, CANCELED);

      const slow = await send(client, 'sleep 0.5; echo subscribed-js', running.contextId, { returnImmediately: true, acceptedOutputModes: [], historyLength: undefined, taskPushNotificationConfig: undefined });
      const seen = [];
      for await (const event of client.resubscribeTask({ tenant: '', id: slow.id }, auth)) {
        const state = stateOf(event);
        if (state !== undefined) seen.push(state);
      }
      assert.equal(seen.at(-1), COMPLETED, JSON.stringify(seen));
    });

    test('an unknown task and a finished one raise the typed errors', async () => {
      const client = await make();
      await assert.rejects(client.getTask({ tenant: '', id: 'no-such-task', historyLength: undefined }, auth), TaskNotFoundError);
      const done = await send(client, 'true');
      await assert.rejects(client.cancelTask({ tenant: '', id: done.id, metadata: undefined }, auth), TaskNotCancelableError);
    });
  });
}
