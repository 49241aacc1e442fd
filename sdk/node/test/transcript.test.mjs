// Plays the agent-protocol transcripts of core/internal/agentproto/testdata/transcripts
// against this SDK: the same files drive core/transcript_test.go for the Go
// SDK. See the README there for the format, and player.mjs for the player.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { Agent, defineTool } from '../dist/index.js';
import { memoryLogger, repoRoot } from './harness.mjs';
import { parseTranscript, player, TEST_KEY } from './player.mjs';

const dir = join(repoRoot, 'core', 'internal', 'agentproto', 'testdata', 'transcripts');

/** transcriptAgent returns an agent offering the tools every transcript expects. */
function transcriptAgent(url) {
  const agent = new Agent({ apiKey: TEST_KEY, url, logger: memoryLogger() });
  agent.register([
    defineTool({
      name: 'echo',
      description: 'Returns its text.',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
      handler: (args) => args.text,
    }),
    defineTool({
      name: 'fail',
      description: 'Fails.',
      inputSchema: { type: 'object' },
      handler: () => {
        throw new Error('it failed: ask again later');
      },
    }),
    defineTool({
      name: 'wait',
      description: 'Waits until cancelled.',
      inputSchema: { type: 'object' },
      handler: (_args, call) =>
        new Promise((_resolve, reject) => call.signal.addEventListener('abort', () => reject(call.signal.reason), { once: true })),
    }),
    defineTool({
      name: 'sleep',
      description: 'Sleeps 300 ms.',
      inputSchema: { type: 'object' },
      handler: (_args, call) => {
        call.progress('sleeping');
        return new Promise((resolve) => setTimeout(() => resolve('slept'), 300));
      },
    }),
    defineTool({
      name: 'shaped',
      description: 'Returns a shaped result.',
      inputSchema: { type: 'object' },
      handler: () => ({ content: [{ type: 'text', text: 'shaped' }], isError: true }),
    }),
  ]);
  return agent;
}

describe('agent-protocol transcripts', () => {
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.txtar')).sort()) {
    it(file.replace(/\.txtar$/, ''), async () => {
      const gw = await player();
      const agent = transcriptAgent(gw.url);
      try {
        await gw.play(agent, parseTranscript(readFileSync(join(dir, file), 'utf8')));
      } finally {
        await agent.close();
        await gw.close();
      }
    });
  }
});
