// What the node --test suites share: the built ptyhost, started as `serve` on a free
// loopback port with a fresh data dir and an admin bootstrap token.

import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export const bin = process.env.PTYHOST_BIN ?? '../target/debug/ptyhost';

/** `ptyhost serve … flags`, once it listens: `{base, data, process}`. */
export async function serve(token, flags = []) {
  const data = mkdtempSync(join(tmpdir(), 'ptyhost-node-'));
  const child = spawn(bin, ['serve', '--listen', '127.0.0.1:0', '--data-dir', data, '--bootstrap-token', token, ...flags], {
    stdio: ['ignore', 'pipe', 'ignore'],
    // HOME is the data dir: the shells read none of this machine's dotfiles.
    env: { ...process.env, HOME: data },
  });
  const lines = createInterface({ input: child.stdout });
  const base = await new Promise((resolve, reject) => {
    lines.on('line', (l) => l.startsWith('listening on ') && resolve(l.slice('listening on '.length)));
    child.on('exit', (code) => reject(new Error(`ptyhost exited with ${code}`)));
  });
  return { base, data, process: child };
}
