import { createRequire } from 'node:module';

/** A JSON Schema object, as sent to the gateway and shown to models. */
export type JSONSchema = { readonly [key: string]: unknown };

/**
 * The part of the Standard Schema interface (https://standardschema.dev) the
 * SDK reads: the types it infers a handler's arguments from and, for
 * conversion, the Standard JSON Schema converter (`~standard.jsonSchema`).
 * Zod 4, ArkType 2 and Valibot (through `toStandardJsonSchema` from
 * `@valibot/to-json-schema`) implement it.
 */
export interface StandardSchemaLike<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    readonly vendor: string;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
    readonly jsonSchema?: {
      readonly input: (options: { readonly target: string; readonly libraryOptions?: Record<string, unknown> }) => Record<string, unknown>;
      readonly output: (options: { readonly target: string; readonly libraryOptions?: Record<string, unknown> }) => Record<string, unknown>;
    };
  };
}

/**
 * What `inputSchema` and `argsSchema` take: a plain JSON Schema object with
 * `"type": "object"`, a Zod 4 object schema, or any Standard Schema that can
 * describe itself as JSON Schema.
 */
export type InputSchema = StandardSchemaLike<any, any> | JSONSchema;

/**
 * InferArgs is the argument type a handler receives for schema S: the
 * schema library's *input* type (Zod's `z.input`, Standard Schema's
 * `InferInput`), because the SDK does not run the library on the arguments —
 * defaults are not applied and transforms do not run. A plain JSON Schema
 * written inline (or `as const`) is read for its properties; any other gives
 * `Record<string, unknown>`.
 */
export type InferArgs<S> = S extends { readonly '~standard': { readonly types?: infer T } }
  ? NonNullable<T> extends { readonly input: infer I }
    ? I
    : Record<string, unknown>
  : FromJSONSchema<S>;

declare const noSchema: unique symbol;
/** NoSchema stands for a prompt defined without argsSchema. */
export type NoSchema = { readonly [noSchema]: true };

/** PromptArgs is what a prompt handler receives: the schema's input type, or string arguments. */
export type PromptArgs<S> = [S] extends [NoSchema] ? Record<string, string> : InferArgs<S>;

/** FromJSONSchema reads an object JSON Schema's properties into a type. */
export type FromJSONSchema<S> = S extends { readonly properties: infer P extends object }
  ? Simplify<
      { -readonly [K in keyof P as K extends RequiredOf<S> ? K : never]: ValueOf<P[K]> } & {
        -readonly [K in keyof P as K extends RequiredOf<S> ? never : K]?: ValueOf<P[K]>;
      }
    >
  : Record<string, unknown>;

type RequiredOf<S> = S extends { readonly required: readonly (infer R)[] } ? R : never;

type ValueOf<S> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly const: infer C }
    ? C
    : S extends { readonly type: 'string' }
      ? string
      : S extends { readonly type: 'number' | 'integer' }
        ? number
        : S extends { readonly type: 'boolean' }
          ? boolean
          : S extends { readonly type: 'null' }
            ? null
            : S extends { readonly type: 'array'; readonly items: infer I }
              ? ValueOf<I>[]
              : S extends { readonly type: 'array' }
                ? unknown[]
                : S extends { readonly type: 'object'; readonly properties: object }
                  ? FromJSONSchema<S>
                  : S extends { readonly type: 'object' }
                    ? Record<string, unknown>
                    : unknown;

type Simplify<T> = { [K in keyof T]: T[K] } & {};

const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

/**
 * toJSONSchema converts schema to the JSON Schema the gateway validates calls
 * against. It runs once, when a tool or prompt is defined; the schema
 * library is never run on a call's arguments afterwards. `what` names the
 * definition in error messages ("tool \"get_order\"").
 */
export function toJSONSchema(schema: unknown, what: string, io: 'input' | 'output' = 'input'): Record<string, unknown> {
  // ArkType's types are functions that carry ~standard.
  const isObject = schema !== null && (typeof schema === 'object' || typeof schema === 'function') && !Array.isArray(schema);
  if (!isObject || (typeof schema === 'function' && !('~standard' in schema))) {
    throw new TypeError(
      `${what}: the schema must be a JSON Schema object, a Zod 4 schema or a Standard Schema with JSON Schema support; got ${describe(schema)}.`,
    );
  }
  const std = (schema as Partial<StandardSchemaLike>)['~standard'];
  let out: unknown;
  let plain = false;
  if (std && typeof std === 'object') {
    const converter = std.jsonSchema?.[io];
    if (typeof converter === 'function') {
      out = convert(() => converter({ target: 'draft-2020-12' }), std.vendor, what);
    } else if ('_zod' in schema) {
      out = convert(() => zodToJSONSchema(schema, io), 'zod', what);
    } else {
      throw new TypeError(
        `${what}: the ${std.vendor} schema cannot describe itself as JSON Schema (it has no ~standard.jsonSchema). ` +
          'Pass plain JSON Schema, a Zod 4 schema, an ArkType type, or a Valibot schema wrapped with toStandardJsonSchema from @valibot/to-json-schema.',
      );
    }
  } else if ('_zod' in schema) {
    out = convert(() => zodToJSONSchema(schema, io), 'zod', what);
  } else {
    // Plain JSON Schema: copy it, so later changes to the object do not
    // change what was registered, and so it is known to be JSON.
    out = convert(() => JSON.parse(JSON.stringify(schema)), 'JSON', what);
    plain = true;
  }
  if (out === null || typeof out !== 'object' || Array.isArray(out)) {
    throw new TypeError(`${what}: the schema converted to ${describe(out)}, not a JSON Schema object.`);
  }
  const result = out as Record<string, unknown>;
  if (!plain && result.$schema === DRAFT_2020_12) {
    // A converter's default, and MCP's default dialect: no need to send it.
    // Plain JSON Schema goes to clients as written, $schema included.
    delete result.$schema;
  }
  return result;
}

function convert(f: () => unknown, vendor: string, what: string): unknown {
  try {
    return f();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new TypeError(`${what}: the ${vendor} schema cannot be converted to JSON Schema: ${reason}`);
  }
}

/**
 * zodToJSONSchema converts a Zod 4 schema from a release without the
 * Standard JSON Schema converter (before 4.2) with Zod's own toJSONSchema, as
 * `z.toJSONSchema(schema, { io })`: for input, fields with a `.default()` are
 * optional, as callers may leave them out.
 */
function zodToJSONSchema(schema: object, io: 'input' | 'output'): unknown {
  const bases = [import.meta.url, `${process.cwd()}/`];
  for (const base of bases) {
    let core: { toJSONSchema?: (s: unknown, o: unknown) => unknown };
    try {
      core = createRequire(base)('zod/v4/core');
    } catch {
      continue;
    }
    if (typeof core.toJSONSchema === 'function') {
      return core.toJSONSchema(schema, { io, target: 'draft-2020-12' });
    }
  }
  throw new Error('this Zod release has no JSON Schema support; install zod 4.2 or later');
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}
