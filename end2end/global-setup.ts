import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { port } from './playwright.config';

/**
 * Starts ptyhost as an operator would on a new machine, from a copy of the binary alone in
 * an empty directory (the UI is embedded), and captures its first-start link.
 */
export default async function globalSetup() {
  const built = process.env.PTYHOST_BIN ?? '../target/debug/ptyhost';
  const alone = mkdtempSync(join(tmpdir(), 'ptyhost-bin-'));
  const bin = join(alone, 'ptyhost');
  copyFileSync(built, bin);
  chmodSync(bin, 0o755);
  // A benchmark may hand over a data dir it prepared (and keeps); the tests start empty.
  const given = process.env.PTYHOST_E2E_DATA_DIR;
  const dataDir = given ?? mkdtempSync(join(tmpdir(), 'ptyhost-e2e-'));
  const server = spawn(bin, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', dataDir], {
    cwd: alone,
    stdio: ['ignore', 'pipe', 'inherit'],
    // HOME is the data dir: the shells read none of this machine's dotfiles.
    env: { ...process.env, HOME: dataDir, RUST_LOG: process.env.RUST_LOG ?? 'warn' },
  });
  const lines = createInterface({ input: server.stdout! });
  const link = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('ptyhost printed no first-start link')), 20_000);
    lines.on('line', (line) => {
      if (line.startsWith('open ')) {
        clearTimeout(timer);
        resolve(line.slice('open '.length));
      }
    });
    server.on('exit', (code) => reject(new Error(`ptyhost exited with ${code}`)));
  });
  process.env.PTYHOST_FIRST_START_LINK = link;
  return async () => {
    server.kill('SIGTERM');
    await new Promise((r) => server.on('exit', r));
    // The copy of the binary and the data dir go too: every run would leave 200 MB behind.
    rmSync(alone, { recursive: true, force: true });
    if (!given) rmSync(dataDir, { recursive: true, force: true });
  };
}
