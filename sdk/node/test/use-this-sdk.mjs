// Loaded with `node --import` by example.test.mjs: the example imports
// @spacefix/core from the dist/ next to these tests (a copy under a
// temporary folder when go test runs the suite), not from the source tree.
import { register } from 'node:module';

register(
  'data:text/javascript,' +
    encodeURIComponent(`
      const target = ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
      export async function resolve(specifier, context, next) {
        if (specifier === '@spacefix/core') return { url: target, shortCircuit: true };
        return next(specifier, context);
      }
    `),
);
