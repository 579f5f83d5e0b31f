import { test, expect } from '@playwright/test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { adminToken, domContext, rows, typeLine } from '../helpers';
import { port } from '../playwright.config';

// An agent drives a session over MCP (the official TypeScript SDK, Streamable HTTP) while a
// person watches it in the browser at the `ui_url` the agent was given, and takes it over.

test('a person watching in the browser sees each MCP call happen, and can take over', async ({ browser }) => {
  const agent = new Client({ name: 'agent', version: '1.0.0' });
  await agent.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${adminToken()}` } },
  }));
  const call = async (name: string, args: Record<string, unknown>) => {
    const r = await agent.callTool({ name, arguments: args });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    return r.structuredContent as any;
  };
  const created = await call('session_create', { label: 'agent-at-work' });
  const sid = created.session_id;
  expect(created.ui_url).toBe(`http://127.0.0.1:${port}/sessions/${sid}`);

  const page = await (await domContext(browser)).newPage();
  await page.goto(`${created.ui_url}#token=${adminToken()}`);
  await expect(rows(page)).toContainText(/[#$]/);

  // run: the command and its output appear, and the task list has it.
  const ran = await call('run', { session_id: sid, command: 'echo agent-ran-$((6*7))' });
  expect(ran.output).toBe('agent-ran-42\n');
  await expect(rows(page)).toContainText('agent-ran-42');
  const task = page.locator(`.tasks li[data-task="${ran.task_id}"]`);
  await expect(task).toHaveAttribute('data-state', 'completed');
  await expect(task).toContainText('echo agent-ran-$((6*7))');

  // A long run left running shows as running, and its cancel as the shell's ^C.
  const long = await call('run', { session_id: sid, command: 'sleep 30', yield_ms: 200 });
  await expect(page.locator(`.tasks li[data-task="${long.task_id}"]`)).toHaveAttribute('data-state', 'working');
  await call('task_cancel', { task_id: long.task_id });
  await expect(page.locator(`.tasks li[data-task="${long.task_id}"]`)).toHaveAttribute('data-state', 'canceled');
  await expect(rows(page)).toContainText('^C');

  // send_keys: typed as a person at the keyboard would.
  await call('send_keys', { session_id: sid, keys: ['echo keys-from-the-agent', 'Enter'] });
  await expect(rows(page)).toContainText('echo keys-from-the-agent');

  // The person takes control and types; the agent, waiting for it, sees it.
  const waited = call('wait_for', { session_id: sid, pattern: 'typed-by-the-person', timeout_ms: 15000 });
  await page.getByRole('button', { name: 'Take control' }).click();
  await expect(page.locator('.role')).toHaveText('controller');
  await typeLine(page, 'echo typed-by-the-person');
  expect((await waited).matched).toBe(true);
  const screen = await call('read_screen', { session_id: sid });
  expect(screen.lines).toContain('typed-by-the-person');
  await page.screenshot({ path: test.info().outputPath('mcp-agent-watched.png') });

  // The sessions page lists it by the label the agent gave it.
  await page.goto('/');
  await expect(page.locator(`tr[data-session="${sid}"]`)).toContainText('agent-at-work');
  await agent.close();
});
