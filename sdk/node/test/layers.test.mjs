// The SDK's modules form layers: no module imports, even for types only, one
// that imports it back, directly or through others. A cycle makes the order
// modules run in depend on which one a user imports first, and the design
// harder to change; this test names any cycle in src/.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const src = fileURLToPath(new URL('../src/', import.meta.url));

/** imports returns the graph of src/: module → the modules of src/ it imports or re-exports. */
function imports() {
  const graph = new Map();
  for (const file of readdirSync(src).filter((f) => f.endsWith('.ts'))) {
    const text = readFileSync(join(src, file), 'utf8');
    const deps = new Set();
    for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+'\.\/([\w-]+)\.js'/g)) deps.add(m[1]);
    graph.set(file.replace(/\.ts$/, ''), [...deps].sort());
  }
  return graph;
}

/** cycles returns each cycle of graph once, as the modules along it. */
function cycles(graph) {
  const found = new Map();
  const walk = (node, path) => {
    const at = path.indexOf(node);
    if (at >= 0) {
      const cycle = path.slice(at);
      const key = [...cycle].sort().join(' ');
      if (!found.has(key)) found.set(key, [...cycle, node].join(' → '));
      return;
    }
    for (const next of graph.get(node) ?? []) walk(next, [...path, node]);
  };
  for (const node of graph.keys()) walk(node, []);
  return [...found.values()];
}

test('src/ has no import cycle', () => {
  const graph = imports();
  assert.ok(graph.get('agent')?.includes('session'), 'the import reader found no import: it reads nothing');
  assert.deepEqual(cycles(graph), []);
});

test('the cycle finder finds a cycle', () => {
  const graph = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a']],
    ['d', ['a']],
  ]);
  assert.deepEqual(cycles(graph), ['a → b → c → a']);
});
