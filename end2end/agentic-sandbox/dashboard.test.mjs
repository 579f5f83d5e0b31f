// The agentic-sandbox dashboard's pty-ws client shape against the real ptyhost: frames
// `{op, seq, ts, payload}` with no `id`, `pty.join_session` sent on `binding_hello`,
// top-level snake_case ops, a keyframe that resets the terminal and writes its nested
// frames, and a reconnect with `?replay_from=` in the URL. The client below behaves as
// `PtyWsV1Client` in agentic-sandbox's management/ui/app.js does, over the WebSocket API
// a browser has (Node's, behind --experimental-websocket); the token rides in a
// `bearer.<base64url>` subprotocol entry, as a browser must send it.
//   PTYHOST_BIN=target/debug/ptyhost node --experimental-websocket --test agentic-sandbox/

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { serve } from '../ptyhost.mjs';

const TOKEN = 'dashboard-test-admin-token';
const EXTENSIONS = 'https://agentic-sandbox.aiwg.io/extensions';
const servers = [];
let base;

/** A ptyhost on a free port with `flags`; its base URL. */
async function started(flags = []) {
  const server = await serve(TOKEN, flags);
  servers.push(server.process);
  return server.base;
}

before(async () => { base = await started(); });

after(() => servers.forEach((s) => s.kill('SIGTERM')));

async function api(method, path, body, token = TOKEN) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

const newSession = async () => (await api('POST', '/agents/local/sessions', { label: 'dashboard' })).body.session_id;

/** What an xterm does with the client's writes, as far as these tests look: the text. */
class Terminal {
  constructor() { this.cols = 100; this.rows = 30; this.text = ''; this.resets = 0; }
  reset() { this.text = ''; this.resets += 1; }
  resize(cols, rows) { this.cols = cols; this.rows = rows; }
  write(bytes) { this.text += new TextDecoder().decode(bytes); }
}

/** The dashboard's client: hello → join; frames dispatched by top-level op. */
class DashboardClient {
  constructor({ sessionId, role = 'controller', label = null, replayFrom = null, token = TOKEN, terminal = new Terminal() }) {
    Object.assign(this, { sessionId, requestRole: role, label, replayFrom, token, terminal });
    this.lastSeq = 0;
    this.role = null;
    this.clientId = null;
    this.members = [];
    this.frames = [];
    this.errors = [];
    this.waiters = [];
  }

  connect() {
    let url = `${base.replace(/^http/, 'ws')}/agents/local/sessions/${this.sessionId}/attach`;
    if (this.replayFrom != null) url += `?replay_from=${this.replayFrom}`;
    const bearer = `bearer.${Buffer.from(this.token).toString('base64url')}`;
    this.ws = new WebSocket(url, ['pty-ws.v1', bearer]);
    this.ws.binaryType = 'arraybuffer';
    this.ws.onmessage = (e) => this.onFrame(JSON.parse(typeof e.data === 'string' ? e.data : new TextDecoder().decode(e.data)));
    this.closed = new Promise((resolve) => { this.ws.onclose = (e) => resolve(e); });
    return this;
  }

  onFrame(frame) {
    this.frames.push(frame);
    if (typeof frame.seq === 'number') this.lastSeq = frame.seq;
    const p = frame.payload ?? {};
    switch (frame.op) {
      case 'binding_hello': {
        this.hello = p;
        const join = { client_label: this.label ?? `dashboard@test-${this.requestRole}`, cols: this.terminal.cols, rows: this.terminal.rows };
        if (this.requestRole) join.role = this.requestRole;
        this.send('pty.join_session', join);
        break;
      }
      case 'output': this.terminal.write(Buffer.from(p.data, 'base64')); break;
      case 'resize': this.terminal.resize(p.cols, p.rows); break;
      case 'role_assigned': this.role = p.role; this.clientId = p.client_id; break;
      case 'membership_changed': this.members = p.members; break;
      case 'keyframe':
        this.terminal.reset();
        for (const f of p.frames) {
          if (f.op === 'output') this.terminal.write(Buffer.from(f.payload.data, 'base64'));
          if (f.op === 'resize') this.terminal.resize(f.payload.cols, f.payload.rows);
        }
        this.lastSeq = p.cursor;
        break;
      case 'error': this.errors.push(p); break;
      default: break;
    }
    this.waiters = this.waiters.filter((w) => !w(frame));
  }

  send(op, payload = {}) {
    this.ws.send(JSON.stringify({ op, ts: new Date().toISOString(), payload }));
  }

  input(text) { this.send('pty.session_input', { data: Buffer.from(text).toString('base64') }); }

  /** Resolves with the first frame (from now, or already seen when `seen`) that `pred` takes. */
  until(pred, what, { seen = false, ms = 10000 } = {}) {
    const found = seen && this.frames.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(this.frames.slice(-5))}`)), ms);
      this.waiters.push((f) => pred(f) && (clearTimeout(timer), resolve(f), true));
    });
  }

  untilText(needle) {
    return new Promise((resolve, reject) => {
      const check = () => this.terminal.text.includes(needle);
      if (check()) return resolve();
      const timer = setTimeout(() => reject(new Error(`no ${needle} on the terminal: ${JSON.stringify(this.terminal.text.slice(-300))}`)), 10000);
      this.waiters.push(() => check() && (clearTimeout(timer), resolve(), true));
    });
  }
}

const op = (name) => (f) => f.op === name;

test('a dashboard client joins, takes the controller role and sees its input echoed', async () => {
  const sid = await newSession();
  const c = new DashboardClient({ sessionId: sid }).connect();
  const assigned = await c.until(op('role_assigned'), 'role_assigned', { seen: true });
  assert.equal(assigned.payload.role, 'controller');
  assert.equal(typeof assigned.payload.client_id, 'string');
  assert.equal(assigned.id, undefined, 'frames carry no id');
  assert.equal(typeof assigned.seq, 'number');
  assert.equal(c.frames[0].op, 'binding_hello');
  assert.deepEqual(c.hello.payload_mode, { binary: false, binary_subprotocol: 'pty-ws.v1.binary', json_subprotocol: 'pty-ws.v1' });
  assert.equal(c.hello.server_info.name, 'ptyhost');
  await c.until(op('keyframe'), 'the join keyframe', { seen: true });
  const members = await c.until((f) => f.op === 'membership_changed' && f.payload.members.length === 1, 'members', { seen: true });
  assert.deepEqual(members.payload.members[0], { client_id: c.clientId, role: 'controller', label: 'dashboard@test-controller' });
  c.input('echo dash-$((6*7))\r');
  await c.untilText('dash-42');
  c.send('pty.leave_session');
  await c.closed;
});

test('a late joiner is seen by the controller and repaints from its keyframe', async () => {
  const sid = await newSession();
  const a = new DashboardClient({ sessionId: sid }).connect();
  await a.until(op('role_assigned'), 'role_assigned', { seen: true });
  a.input('echo early-$((40+2))\r');
  await a.untilText('early-42');
  const b = new DashboardClient({ sessionId: sid, role: 'observer', label: 'late' }).connect();
  await b.until(op('keyframe'), "the late joiner's keyframe", { seen: true });
  assert.ok(b.terminal.text.includes('early-42'), 'the keyframe repaints what was on the screen');
  const seen = await a.until((f) => f.op === 'membership_changed' && f.payload.members.length === 2, 'two members', { seen: true });
  assert.deepEqual(
    seen.payload.members.map((m) => [m.role, m.label]).sort(),
    [['controller', 'dashboard@test-controller'], ['observer', 'late']],
  );
  b.input('echo nope\r');
  const denied = await b.until(op('error'), 'an error for observer input');
  assert.equal(denied.payload.code, 'pty.permission_denied');
  assert.equal(denied.payload.status, 403);
  const resets = a.terminal.resets;
  a.send('pty.request_keyframe');
  await a.until(op('keyframe'), 'the requested keyframe');
  assert.equal(a.terminal.resets, resets + 1);
  assert.ok(a.terminal.text.includes('early-42'), 'the repaint holds the screen');
  a.ws.close();
  b.ws.close();
});

test('a dashboard that reconnects with ?replay_from= gets a keyframe right after the hello, then joins', async () => {
  const sid = await newSession();
  const a = new DashboardClient({ sessionId: sid }).connect();
  await a.until(op('role_assigned'), 'role_assigned', { seen: true });
  a.input('echo before-$((7*6))\r');
  await a.untilText('before-42');
  const cursor = a.lastSeq;
  a.ws.close(4000, 'transport');
  await a.closed;
  const r = new DashboardClient({ sessionId: sid, replayFrom: cursor }).connect();
  await r.until(op('role_assigned'), 'role_assigned after the resume', { seen: true });
  assert.deepEqual(r.frames.slice(0, 2).map((f) => f.op), ['binding_hello', 'keyframe']);
  assert.equal(r.errors.length, 0);
  assert.ok(r.terminal.text.includes('before-42'));
  r.input('echo after-$((7*6))\r');
  await r.untilText('after-42');
  assert.ok(r.lastSeq > cursor);
  r.ws.close();

  const far = new DashboardClient({ sessionId: sid, replayFrom: 10_000_000 }).connect();
  await far.until(op('role_assigned'), 'role_assigned after an out-of-range resume', { seen: true });
  assert.deepEqual(far.frames.slice(0, 3).map((f) => f.op), ['binding_hello', 'error', 'keyframe']);
  assert.equal(far.frames[1].payload.code, 'replay.out_of_range');
  assert.equal(typeof far.frames[1].payload.oldest, 'number');
  far.ws.close();
});

test('pty.release_role hands the controller role back', async () => {
  const sid = await newSession();
  const a = new DashboardClient({ sessionId: sid }).connect();
  await a.until(op('role_assigned'), 'role_assigned', { seen: true });
  a.send('pty.release_role');
  const released = await a.until((f) => f.op === 'role_assigned' && f.payload.role === 'observer', 'the observer role');
  assert.equal(released.payload.client_id, a.clientId);
  await a.until((f) => f.op === 'membership_changed' && f.payload.members[0].role === 'observer', 'members', { seen: true });
  a.send('pty.request_role', { role: 'controller' });
  await a.until((f) => f.op === 'role_assigned' && f.payload.role === 'controller', 'the controller role again');
  a.ws.close();
});

test('A2A operations take their 0.3 names and shapes on a dashboard connection', async () => {
  const sid = await newSession();
  const a = new DashboardClient({ sessionId: sid }).connect();
  await a.until(op('role_assigned'), 'role_assigned', { seen: true });
  a.send('message/send', {
    message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text: 'echo a2a-$((6*7))' }] },
  });
  const task = await a.until((f) => f.op === 'task', 'the task');
  assert.equal(task.payload.kind, 'task');
  assert.equal(task.payload.contextId, sid);
  assert.equal(task.payload.status.state, 'completed');
  a.send('tasks/get', { task_id: task.payload.id });
  const got = await a.until((f) => f.op === 'task', 'tasks/get');
  assert.equal(got.payload.id, task.payload.id);
  a.send('tasks/list', { limit: 5 });
  const listed = await a.until(op('task_list'), 'tasks/list');
  assert.ok(listed.payload.tasks.some((t) => t.id === task.payload.id));
  a.send('tasks/cancel', { task_id: task.payload.id });
  const refused = await a.until(op('error'), 'tasks/cancel of a finished task');
  assert.equal(refused.payload.code, 'task.not_cancelable');
  a.send('tasks/get', {});
  const invalid = await a.until(op('error'), 'tasks/get without task_id');
  assert.deepEqual([invalid.payload.code, invalid.payload.status], ['request.invalid_params', 400]);
  a.send('tasks/explode', {});
  const unsupported = await a.until(op('error'), 'an unknown op');
  assert.equal(unsupported.payload.code, 'request.unsupported_operation');
  a.ws.close();
});

test('a Cockpit-style check finds the executor profile: five extensions, two required, and /health', async () => {
  const profiled = await started(['--profile', 'agentic-sandbox']);
  assert.equal((await fetch(`${profiled}/health`)).status, 200);
  for (const path of ['/.well-known/agent-card.json', '/agents/local/.well-known/agent-card.json']) {
    const card = await (await fetch(`${profiled}${path}`)).json();
    const byUri = Object.fromEntries(card.capabilities.extensions.map((e) => [e.uri, e]));
    const wanted = { 'runtime/v1': true, 'idempotency/v1': true, 'hitl-prompt/v1': false, 'multi-tenant/v1': false, 'pty-extensions/v1': false };
    for (const [name, required] of Object.entries(wanted)) {
      assert.ok(byUri[`${EXTENSIONS}/${name}`], `${path} declares ${name}`);
      assert.equal(byUri[`${EXTENSIONS}/${name}`].required, required, `${name} required: ${required}`);
    }
    const runtime = byUri[`${EXTENSIONS}/runtime/v1`].params;
    assert.match(runtime.instance_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(runtime.runtime, 'container');
    assert.equal(byUri[`${EXTENSIONS}/multi-tenant/v1`].params.enforcement, 'declared');
  }
  // Without the profile the four are optional and /health is not served.
  const card = await (await fetch(`${base}/.well-known/agent-card.json`)).json();
  assert.ok(card.capabilities.extensions.filter((e) => e.uri.startsWith(EXTENSIONS)).every((e) => e.required === false));
  assert.notEqual(await (await fetch(`${base}/health`)).text(), 'healthy');
});
