// The official TypeScript MCP SDK (@modelcontextprotocol/sdk) against the real ptyhost, over
// `ptyhost mcp` on stdio (hosting its own sessions), Streamable HTTP at `/mcp` with a bearer
// token, and `ptyhost mcp --url --token` driving that server. This SDK speaks the
// handshake-era protocol (2025-11-25): it subscribes to resources with `resources/subscribe`.
//   PTYHOST_bin=target/debug/ptyhost node --test mcp/

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { bin, serve } from '../ptyhost.mjs';

const TOKEN = 'mcp-js-test-admin-token';
let server;
let base;
let data;

before(async () => { ({ base, data, process: server } = await serve(TOKEN)); });

after(() => server.kill('SIGTERM'));

const token = (scope) =>
  execFileSync(bin, ['token', 'create', '--scope', scope, '--data-dir', data], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();

/** A connected MCP client of ptyhost, the way named. */
async function connect(way, bearer = TOKEN) {
  let transport;
  if (way === 'http') {
    transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
    });
  } else {
    const args = way === 'stdio-url'
      ? ['mcp', '--url', base, '--token', bearer]
      : ['mcp', '--data-dir', mkdtempSync(join(tmpdir(), 'ptyhost-mcp-js-stdio-'))];
    transport = new StdioClientTransport({ command: bin, args, env: { HOME: tmpdir() }, stderr: 'ignore' });
  }
  const client = new Client({ name: 'ptyhost-js-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** A tool's structured result; fails on an `isError` result. */
async function call(client, name, args = {}, options = {}) {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  assert.ok(!r.isError, JSON.stringify(r.content));
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  return r.structuredContent;
}

async function refusal(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.ok(r.isError, `${name} was not refused: ${JSON.stringify(r.structuredContent)}`);
  return r.content[0].text;
}

for (const way of ['stdio', 'http', 'stdio-url']) {
  describe(`over ${way}`, () => {
    let c;
    before(async () => { c = await connect(way); });
    after(async () => { await c.close(); });

    test('run of echo returns its output and exit code in one call', async () => {
      const { tools } = await c.listTools();
      const run = tools.find((t) => t.name === 'run');
      assert.equal(run.annotations.readOnlyHint, false);
      assert.ok(run.inputSchema.required.includes('command') && run.outputSchema.properties.exit_code);
      assert.equal(tools.find((t) => t.name === 'read_output').annotations.readOnlyHint, true);
      const r = await call(c, 'run', { command: 'echo hello-js' });
      assert.equal(r.status, 'completed');
      assert.equal(r.exit_code, 0);
      assert.equal(r.output, 'hello-js\n');
    });

    test('a long run answers running, task_status later has its output, and a cancel ends it canceled', async () => {
      const r = await call(c, 'run', { command: 'sleep 3; echo late', yield_ms: 500 });
      assert.equal(r.status, 'running');
      const done = await call(c, 'task_status', { task_id: r.task_id, wait_ms: 15000 });
      assert.equal(done.status, 'completed');
      assert.equal(done.output, 'late\n');
      const long = await call(c, 'run', { command: 'sleep 30; echo never', yield_ms: 300 });
      const canceled = await call(c, 'task_cancel', { task_id: long.task_id });
      assert.equal(canceled.status, 'canceled');
      // An aborted call interrupts its command too: the shell is free again at once.
      const aborted = new AbortController();
      setTimeout(() => aborted.abort(), 700);
      await assert.rejects(call(c, 'run', { session_id: long.session_id, command: 'sleep 30', yield_ms: 60000 }, { signal: aborted.signal }));
      const t0 = Date.now();
      const next = await call(c, 'run', { session_id: long.session_id, command: 'echo free' });
      assert.equal(next.output, 'free\n');
      assert.ok(Date.now() - t0 < 8000);
    });

    test('send_keys answers read -p and read_screen shows its prompt', async () => {
      const { session_id: sid } = await call(c, 'session_create', { label: 'keys-js' });
      const r = await call(c, 'run', { session_id: sid, command: "read -p 'colour? ' x; echo \"got $x\"", yield_ms: 500 });
      const screen = await call(c, 'read_screen', { session_id: sid });
      const row = screen.lines.indexOf('colour?');
      assert.ok(row >= 0, JSON.stringify(screen));
      assert.deepEqual(screen.cursor, { row, col: 'colour? '.length });
      await call(c, 'send_keys', { session_id: sid, keys: ['blue', 'Enter'] });
      const done = await call(c, 'task_status', { task_id: r.task_id, wait_ms: 10000 });
      assert.equal(done.status, 'completed');
      assert.match(done.output, /got blue\n$/);
    });

    test('wait_for answers within 100 ms of the matching output', async () => {
      const { session_id: sid } = await call(c, 'session_create', { label: 'wait-js' });
      await call(c, 'run', { session_id: sid, yield_ms: 0, command: 'sleep 1.5; echo "js-marker $(date +%s%3N)"' });
      const waited = await call(c, 'wait_for', { session_id: sid, pattern: 'js-marker \\d+', timeout_ms: 10000 });
      const answered = Date.now();
      assert.ok(waited.matched);
      const printed = Number(waited.output.match(/js-marker (\d+)/)[1]);
      assert.ok(answered - printed >= 0 && answered - printed < 100, `answered ${answered - printed} ms after the output`);
    });

    test('read_output after a cursor returns only the new lines', async () => {
      const { session_id: sid } = await call(c, 'session_create', { label: 'cursor-js' });
      const first = await call(c, 'run', { session_id: sid, command: 'echo js-one' });
      await call(c, 'run', { session_id: sid, command: 'echo js-two' });
      const fresh = await call(c, 'read_output', { session_id: sid, after: first.cursor });
      assert.match(fresh.output, /js-two/);
      assert.doesNotMatch(fresh.output, /js-one/);
    });

    test('a subscribed screen resource is announced when it changes', async () => {
      const { session_id: sid } = await call(c, 'session_create', { label: 'screen-js' });
      const uri = `ptyhost://sessions/${sid}/screen`;
      const updated = new Promise((resolve) => {
        c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => n.params.uri === uri && resolve());
      });
      await c.subscribeResource({ uri });
      await call(c, 'run', { session_id: sid, command: 'echo js-screen' });
      await updated;
      const { contents } = await c.readResource({ uri });
      assert.ok(contents[0].text.split('\n').includes('js-screen'));
    });

    if (way !== 'stdio') {
      test('an observer token is refused every write', async () => {
        const { session_id: sid } = await call(c, 'session_create', { label: 'observed-js' });
        const observer = await connect(way, token('pty:observe'));
        try {
          for (const [name, args] of [
            ['session_create', {}],
            ['session_close', { session_id: sid }],
            ['run', { session_id: sid, command: 'echo no' }],
            ['send_keys', { session_id: sid, keys: 'echo no' }],
            ['file_write', { session_id: sid, path: 'no.txt', content: 'no' }],
          ]) {
            assert.match(await refusal(observer, name, args), /^PERMISSION_DENIED/, name);
          }
          assert.ok((await call(observer, 'read_screen', { session_id: sid })).rows > 0);
        } finally {
          await observer.close();
        }
        const listed = await call(c, 'file_list', { session_id: sid });
        assert.deepEqual(listed.entries, []);
        const s = (await call(c, 'session_list')).sessions.find((x) => x.session_id === sid);
        assert.equal(s.state, 'running');
      });
    }
  });
}
