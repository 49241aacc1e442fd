// Test harness: a real Spacefix gateway binary on a loopback port, real
// agents built with this SDK, and the official MCP TypeScript client.
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { Agent } from '../dist/index.js';

const execFileP = promisify(execFile);
export const sdkDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The repository: $SPACEFIX_REPO when the suite runs from a copy (go test ./sdk/node), else two levels up. */
export const repoRoot = process.env.SPACEFIX_REPO || resolve(sdkDir, '..', '..');

let binPromise;

/**
 * gatewayBin returns the path of the gateway binary: $SPACEFIX_BIN, or one
 * built from this repository into a temporary directory (once per process).
 */
export function gatewayBin() {
  if (process.env.SPACEFIX_BIN) return Promise.resolve(process.env.SPACEFIX_BIN);
  binPromise ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spacefix-bin-'));
    const out = join(dir, 'spacefix');
    await execFileP('go', ['build', '-o', out, './cmd/spacefix'], { cwd: repoRoot, maxBuffer: 16 << 20 });
    process.on('exit', () => void rm(dir, { recursive: true, force: true }));
    return out;
  })();
  return binPromise;
}

/** freePort returns a TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

/** waitFor polls f until it returns a truthy value, or fails after ms. */
export async function waitFor(f, { ms = 10_000, every = 25, what = 'condition' } = {}) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await f();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

/** A gateway process: `spacefix serve` on a free loopback port with its own store. */
export class Gateway {
  /** @type {import('node:child_process').ChildProcess | undefined} */
  proc;
  stdout = '';
  stderr = '';
  agentKey = '';
  clientKey = '';

  constructor(bin, dir, port) {
    this.bin = bin;
    this.dir = dir;
    this.port = port;
    this.db = join(dir, 's.db');
    this.url = `http://127.0.0.1:${port}`;
  }

  static async start() {
    const bin = await gatewayBin();
    const dir = await mkdtemp(join(tmpdir(), 'spacefix-gw-'));
    const gw = new Gateway(bin, dir, await freePort());
    await gw.start();
    return gw;
  }

  /** start runs the gateway and waits until /healthz answers 200. */
  async start() {
    this.stdout = '';
    this.stderr = '';
    const proc = spawn(this.bin, ['serve', '--addr', `127.0.0.1:${this.port}`, '--data', this.db, '--shutdown-grace', '1s'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = proc;
    proc.stdout.setEncoding('utf8').on('data', (d) => (this.stdout += d));
    proc.stderr.setEncoding('utf8').on('data', (d) => (this.stderr += d));
    const exited = new Promise((r) => proc.once('exit', (code, sig) => r(`exited with ${code ?? sig}`)));
    const ready = waitFor(
      async () => {
        const res = await fetch(`${this.url}/healthz`);
        return res.status === 200;
      },
      { ms: 20_000, what: 'the gateway to answer /healthz' },
    );
    const outcome = await Promise.race([ready.then(() => 'ready'), exited]);
    if (outcome !== 'ready') throw new Error(`gateway ${outcome}:\n${this.stdout}\n${this.stderr}`);
    if (!this.agentKey) {
      await waitFor(() => /Client key\s+sfx_client_\S+/.test(this.stdout), { what: 'the keys on stdout' });
      this.agentKey = /Agent key\s+(sfx_agent_\S+)/.exec(this.stdout)[1];
      this.clientKey = /Client key\s+(sfx_client_\S+)/.exec(this.stdout)[1];
    }
  }

  /** stop ends the gateway gracefully (SIGTERM), killing it if it takes over 5 s. */
  async stop() {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const t = setTimeout(() => proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(t);
  }

  async restart() {
    await this.stop();
    await this.start();
  }

  /** dispose stops the gateway and removes its store. */
  async dispose() {
    await this.stop();
    await rm(this.dir, { recursive: true, force: true });
  }

  /** newKey creates a key in project default with the CLI, as a user would. */
  async newKey(kind = 'agent', ...flags) {
    const { stdout } = await execFileP(this.bin, ['keys', 'create', '--data', this.db, '--project', 'default', '--kind', kind, '--json', ...flags]);
    return JSON.parse(stdout).key;
  }

  /**
   * client connects the official MCP client with key (default: the first
   * client key). capabilities are the client's (e.g. `{ elicitation: {} }`);
   * setup(client) runs before it connects, to set request handlers.
   */
  async client(key = this.clientKey, { capabilities, setup } = {}) {
    const client = new Client({ name: 'spacefix-node-test', version: '0.1.0' }, capabilities ? { capabilities } : undefined);
    setup?.(client);
    const transport = new StreamableHTTPClientTransport(new URL(`${this.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${key}` } },
    });
    await client.connect(transport);
    return client;
  }
}

/** A logger that keeps every line, for assertions, and prints nothing. */
export function memoryLogger() {
  const lines = [];
  const add = (level) => (msg) => lines.push({ level, msg: String(msg) });
  return { lines, debug: add('debug'), info: add('info'), warn: add('warn'), error: add('error') };
}

/**
 * startAgent connects a new Agent to gw with a fresh agent key (so that
 * agents in one test file do not count as replicas of each other), and waits
 * for the welcome.
 */
export async function startAgent(gw, items, options = {}) {
  const logger = memoryLogger();
  const apiKey = options.apiKey ?? (await gw.newKey('agent'));
  const agent = new Agent({ url: gw.url, logger, ...options, apiKey });
  agent.register(items);
  await agent.connect();
  return { agent, logs: logger.lines, apiKey };
}

/**
 * untilVisible waits until client sees every tool, resource and prompt of
 * items. The gateway welcomes an agent a moment before its tools reach the
 * clients' lists, so a test that calls at once may meet "unknown tool".
 */
export async function untilVisible(client, items, { name, namespace } = {}) {
  const list = Array.isArray(items) ? items : [items];
  const prefix = namespace ? `${name.replaceAll('-', '_')}_` : '';
  const tools = list.filter((i) => i.kind === 'tool').map((t) => prefix + t.name);
  const uris = list.filter((i) => i.kind === 'resource' && !i.template).map((r) => r.uri);
  const templates = list.filter((i) => i.kind === 'resource' && i.template).map((r) => r.uri);
  const prompts = list.filter((i) => i.kind === 'prompt').map((p) => p.name);
  await waitFor(
    async () => {
      if (tools.length > 0) {
        const seen = new Set((await client.listTools()).tools.map((t) => t.name));
        if (!tools.every((n) => seen.has(n))) return false;
      }
      if (uris.length > 0) {
        const seen = new Set((await client.listResources()).resources.map((r) => r.uri));
        if (!uris.every((u) => seen.has(u))) return false;
      }
      if (templates.length > 0) {
        const seen = new Set((await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate));
        if (!templates.every((u) => seen.has(u))) return false;
      }
      if (prompts.length > 0) {
        const seen = new Set((await client.listPrompts()).prompts.map((p) => p.name));
        if (!prompts.every((n) => seen.has(n))) return false;
      }
      return true;
    },
    { what: `${[...tools, ...uris, ...templates, ...prompts].join(', ')} to be listed` },
  );
}

/** textOf returns the text of a tool result's only part. */
export function textOf(result) {
  if (result.content.length !== 1 || result.content[0].type !== 'text') {
    throw new Error(`expected one text part, got ${JSON.stringify(result.content)}`);
  }
  return result.content[0].text;
}

/** toolNames lists the names a client sees. */
export async function toolNames(client) {
  const { tools } = await client.listTools();
  return tools.map((t) => t.name).sort();
}
