import type { Answers, ElicitResult, Inputs, Root, SampleRequest, SampleResult } from './ask.js';
import type { LogLevel } from './log.js';
import { toJSONSchema, type InferArgs, type InputSchema, type NoSchema, type PromptArgs } from './schema.js';

/** Who made a call: the client key, as named in the project. */
export interface Caller {
  /** The client key's id (`key_…`). */
  keyId: string;
  /** The client key's name, as in the dashboard. */
  keyName: string;
}

/** The person behind a call made through an OAuth app. */
export interface Person {
  /** The person's id in the gateway: stable, never reused. */
  readonly id: string;
  /** The person's email, as their account has it now. */
  readonly email: string;
  /** The person's name, as their account has it now ('' when they gave none). */
  readonly name: string;
}

/** The OAuth client (an app a person connected) a call came through. */
export interface App {
  /** The OAuth client id. */
  readonly id: string;
  /** The name the app registered with. */
  readonly name: string;
}

/** A role in a project. */
export type Role = 'viewer' | 'editor' | 'owner';

/** What a caller may do. */
export type Scope = 'mcp:read' | 'mcp:write';

/** What a handler learns about the call it serves, and how it talks back. */
export interface Call {
  /** The gateway's id of the call, as in its call log. */
  readonly callId: string;
  /** `tool`, `resource` or `prompt`. */
  readonly kind: 'tool' | 'resource' | 'prompt';
  /** The tool or prompt name as registered (without a namespace), or the resource URI. */
  readonly tool: string;
  /**
   * The client key that made the call. A call through an OAuth app has the
   * key the gateway made for the person's grant.
   */
  readonly caller: Caller;
  /**
   * Who made the call when it came with an OAuth token (a person who
   * connected an app); undefined for a call with a client key, which speaks
   * for no one person.
   */
  readonly person: Person | undefined;
  /** The OAuth client the person called through; undefined for a client key. */
  readonly app: App | undefined;
  /** The name of the project the call was made in. */
  readonly project: string;
  /** The person's role in the project; '' for a client key. */
  readonly role: Role | '';
  /**
   * What the caller may do: `mcp:read` and, when it may write, `mcp:write`.
   * An OAuth call has the scopes the person granted the app; a client key
   * those it allows (a read-only key: just `mcp:read`).
   */
  readonly scopes: readonly Scope[];
  /**
   * A short-lived JWT the gateway signed that says who is calling, for your
   * own backend to verify against the gateway's `/.well-known/jwks.json`
   * (docs/identity.md); '' unless the agent key was set to receive identity
   * tokens. Pass it on: the client's own token never reaches a handler.
   */
  readonly identityToken: string;
  /**
   * The client capabilities that elicit, sample and roots need and that the
   * client declared for this call: `elicitation`, `sampling`, `roots`. Ask
   * only for what is here to avoid a MissingCapabilityError.
   */
  readonly clientCapabilities: readonly string[];
  /** Epoch milliseconds after which the gateway has given up on the call; 0 when it sent none. */
  readonly deadline: number;
  /**
   * Set when the gateway delivers this call again after an unknown outcome:
   * an earlier call of this tool with the same request id (see
   * `idempotencyKey`) timed out or lost its agent before it answered, so its
   * write may or may not have happened. `retryOf` is that call's id, as in
   * the call log; look for what it did (your own record of the request id)
   * before doing it again. '' on a first delivery.
   */
  readonly retryOf: string;
  /** Why the earlier call's outcome is unknown: `timeout` or `disconnected`; '' on a first delivery. */
  readonly retryReason: RetryReason;
  /**
   * The W3C trace context of the gateway's span for this call (the
   * `traceparent` header's value, https://www.w3.org/TR/trace-context/), or
   * '' when the gateway does not trace and the client sent none. To make your
   * own spans children of it, extract it with your tracer's propagator, for
   * example OpenTelemetry's
   * `propagation.extract(context.active(), { traceparent: call.traceparent, tracestate: call.tracestate })`.
   */
  readonly traceparent: string;
  /** The W3C `tracestate` that goes with traceparent; often ''. */
  readonly tracestate: string;
  /**
   * Aborted when the client cancels, at the deadline, when the connection to
   * the gateway ends, or when agent.close() stops waiting for the call (after
   * the drain, at `drainTimeoutMs`). Whatever the handler returns after that
   * is not sent.
   */
  readonly signal: AbortSignal;
  /**
   * Sends a short progress line (cut to 200 characters); the client sees it
   * if it asked for progress, and the dashboard's log shows it. At most 4
   * lines a second go out: extra lines are held back and only the latest is
   * sent when the second allows. Nothing is sent after the result.
   */
  progress(message: string): void;
  /**
   * Asks the MCP client's user a yes/no question about this call — "Delete
   * order 1042?" — and resolves with their answer: `true` only when they
   * accepted and confirmed; `false` when they declined or dismissed it. Use
   * it before a destructive action. The gateway asks through MCP
   * elicitation; the question counts against the call's wait.
   *
   * Rejects with a `CannotConfirmError` (its message starts with
   * `the MCP client cannot ask the user`) when the client cannot ask; with
   * the signal's reason when the call is aborted first; at once when another
   * question of this call is still waiting (ask one at a time).
   */
  confirm(question: string): Promise<boolean>;
  /**
   * Asks the MCP client's user to fill in a form (MCP elicitation): message
   * says what for, requestedSchema is the form — a JSON Schema object of flat
   * properties (strings with format email, uri, date or date-time; numbers
   * and integers with bounds; booleans; enums, titled through oneOf of const
   * and title; defaults). Resolves with the user's action and, when they
   * accepted, the content, which the gateway checked against the form.
   * Rejects with a `MissingCapabilityError` when the client cannot ask.
   */
  elicit(message: string, requestedSchema: Record<string, unknown>): Promise<ElicitResult>;
  /**
   * Asks the MCP client's model to write a message (MCP sampling), for a
   * handler that needs a model's help without a model of its own; the
   * client usually shows the request to its user first. Rejects with a
   * `MissingCapabilityError` when the client does not offer sampling.
   */
  sample(request: SampleRequest): Promise<SampleResult>;
  /**
   * The client's roots (MCP roots/list): where its user works. Rejects with
   * a `MissingCapabilityError` when the client offers none.
   */
  roots(): Promise<Root[]>;
  /**
   * Asks the client for several inputs in one round — forms (`elicit`, and
   * several with `elicits`), a model's message and the roots — as one
   * input_required result on 2026-07-28 and
   * parallel requests on 2025 sessions; resolves with the responses to
   * those asked. Rejects as a whole when the client cannot give any of them.
   */
  together(inputs: Inputs): Promise<Answers>;
  /**
   * Sends a log message to the MCP client (notifications/message, with the
   * agent's `name` as the logger): `data` is anything JSON, a string or an
   * object. The client gets it only at or above the level it asked for
   * (logging/setLevel, or a 2026-07-28 request's logLevel); messages over
   * 16 KiB, or faster than the gateway passes them on, are dropped. Best
   * effort: it never throws for a sent message and returns nothing.
   */
  log(level: LogLevel, data: unknown): void;
}

/** Why a call is delivered again: see Call.retryOf. */
export type RetryReason = '' | 'timeout' | 'disconnected';

/** The context a tool handler receives. */
export type ToolCall = Call;

/** MCP tool annotations; they travel to clients as given. No readOnlyHint means the tool counts as a write. */
export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** Whether MCP clients may run a tool as a task (MCP's `execution.taskSupport`). */
export type TaskSupport = 'forbidden' | 'optional' | 'required';

/** How a tool may be run: MCP's `Tool.execution`. */
export interface ToolExecution {
  /**
   * `optional`: a client may run the tool as a task (it gets a task at once
   * and fetches the result when the handler returns), or call it plainly;
   * `required`: only as a task; `forbidden` (the default): never. Clients see
   * it in tools/list. It does not change `timeoutMs`.
   */
  taskSupport?: TaskSupport;
}

/**
 * IdempotencyKeyOf is what `idempotencyKey` may name for arguments of type
 * Args: a required string argument, or any name when the type does not list
 * its arguments (defineTool checks the schema either way).
 */
export type IdempotencyKeyOf<Args> = string extends keyof Args
  ? string
  : { [K in keyof Args]-?: {} extends Pick<Args, K> ? never : Args[K] extends string ? K : never }[keyof Args] & string;

/** What defineTool takes. */
export interface ToolOptions<S extends InputSchema> {
  /** 1 to 64 characters from A-Z a-z 0-9 _ -; a verb and a noun: `get_order`. */
  name: string;
  /** A name for people. */
  title?: string;
  /** What the tool does, what it returns, what it returns when nothing matches, which sibling to use instead. */
  description: string;
  /**
   * The arguments: plain JSON Schema, a Zod 4 object, or any Standard Schema
   * that can describe itself as JSON Schema (ArkType, Valibot with
   * toStandardJsonSchema). Converted to JSON Schema once; the gateway
   * validates every call against it. Refinements, transforms and `.regex()`
   * are not run on calls.
   */
  inputSchema: S;
  /**
   * The JSON Schema of the tool's structured result (any schema inputSchema
   * takes; a library schema is converted for its output type). With it, a
   * handler's object result also goes as `structuredContent`, and clients
   * check it against this schema.
   */
  outputSchema?: InputSchema;
  annotations?: ToolAnnotations;
  /** The gateway's wait for this tool, 1 to 120000 ms; absent means the project's call wait. */
  timeoutMs?: number;
  /** Whether MCP clients may run the tool as a task, for slow work: `{ taskSupport: 'optional' }`. */
  execution?: ToolExecution;
  /**
   * Names the argument that carries a request id, such as `'requestId'`: a
   * required string argument the model fills with a new id for each write
   * and reuses when it retries. The gateway then remembers each id's outcome
   * for the project's repeat window (24 hours by default) and makes repeats
   * safe itself: a repeat of a call that ended gets the same result without
   * reaching the handler, a repeat of a running call waits for it, and the
   * same id with other arguments is refused. The handler runs at most once
   * per delivery; the one repeat delivered again is one after an unknown
   * outcome (a timeout, or an agent that went away before answering), with
   * `call.retryOf` and `call.retryReason` set. defineTool throws when the
   * name is not a required string property of inputSchema.
   */
  idempotencyKey?: IdempotencyKeyOf<InferArgs<S>>;
  /**
   * Serves a call. Return a string (sent as text), any other JSON value (sent
   * as JSON text; undefined as `null`), or a result with a `content` array
   * (`toolText`, `toolImage`, `toolError`). Throw an Error to fail the call
   * with its message (the model reads it); rarely, throw a ProtocolError to
   * fail the client's request with a JSON-RPC error instead.
   */
  handler: (args: InferArgs<S>, call: Call) => unknown;
}

/** A tool, ready for agent.register. */
export interface Tool<Args = Record<string, unknown>> {
  readonly kind: 'tool';
  readonly name: string;
  readonly title?: string;
  readonly description: string;
  /** The JSON Schema sent to the gateway. */
  readonly inputSchema: Record<string, unknown>;
  /** The JSON Schema of structuredContent, if the tool declared one. */
  readonly outputSchema?: Record<string, unknown>;
  readonly annotations?: ToolAnnotations;
  readonly timeoutMs?: number;
  /** Set when the tool may run as a task (optional or required). */
  readonly execution?: Readonly<ToolExecution>;
  /** The argument that carries the request id, when the gateway makes repeats safe. */
  readonly idempotencyKey?: string;
  readonly handler: (args: Args, call: Call) => unknown;
}

/** What defineResource takes. */
export interface ResourceOptions {
  /** An absolute URI, such as `orders://open`. */
  uri: string;
  /** The display name. */
  name: string;
  description?: string;
  /** The type of the resource's text or bytes; default `application/json`. */
  mimeType?: string;
  /**
   * Reads the resource; it takes no arguments (the call is passed for its
   * signal). A string is sent as is, bytes (a Uint8Array or Buffer) as a
   * blob (base64 on the wire: images, PDFs), anything else as JSON. A throw
   * reaches the client as a JSON-RPC error with the message.
   */
  handler: (call: Call) => unknown;
}

/** A resource, ready for agent.register. */
export interface Resource {
  readonly kind: 'resource';
  /** The URI, or with template the RFC 6570 URI template. */
  readonly uri: string;
  readonly name: string;
  readonly description?: string;
  readonly mimeType: string;
  /** Set by defineResourceTemplate: uri is a template. */
  readonly template?: true;
  /** A template's variable completer: see ResourceTemplateOptions.complete. */
  readonly complete?: (param: string, value: string, args: Record<string, string>, call: Call) => string[] | Promise<string[]>;
  readonly handler: (call: Call, read?: TemplateRead) => unknown;
}

/** What a resource template's handler reads: the URI and the template's variables. */
export interface TemplateRead {
  uri: string;
  params: Record<string, string>;
}

/** What defineResourceTemplate takes. */
export interface ResourceTemplateOptions {
  /** An RFC 6570 URI template with a variable, such as `orders://orders/{id}` ({var} matches one path segment, {+var} any text). */
  uriTemplate: string;
  /** The display name. */
  name: string;
  description?: string;
  /** The type of the resources' text or bytes; default `application/json`. */
  mimeType?: string;
  /** Reads the resource at `read.uri`, with the template's variables in `read.params`; its value is sent as a resource's is. */
  handler: (read: TemplateRead, call: Call) => unknown;
  /**
   * Suggests values as a user types one of the template's variables in a
   * client (MCP completion/complete): `param` names it, `value` is what they
   * typed so far, `args` the other variables filled in.
   */
  complete?: (param: string, value: string, args: Record<string, string>, call: Call) => string[] | Promise<string[]>;
}

/** What definePrompt takes. */
export interface PromptOptions<S extends InputSchema> {
  /** 1 to 64 characters from A-Z a-z 0-9 _ -. */
  name: string;
  /** The name people see in a client's menu. */
  title?: string;
  description?: string;
  /**
   * The arguments, all strings: a Zod 4 object, a Standard Schema, or plain
   * JSON Schema. Their names, descriptions and which are required are sent;
   * the gateway refuses a request that lacks a required one.
   */
  argsSchema?: S;
  /**
   * Suggests values as a user types an argument in a client (MCP
   * completion/complete), by argument name: `value` is what they typed so
   * far, `args` the other arguments filled in. The first 100 suggestions
   * are passed on; an argument without one gets none.
   */
  complete?: Record<string, Completer>;
  /** Renders the prompt: a string (one user message) or `{ messages: [{ role, content }] }`. */
  handler: (args: PromptArgs<S>, call: Call) => unknown;
}

/** Suggests values for one argument or template variable: see PromptOptions.complete. */
export type Completer = (value: string, args: Record<string, string>, call: Call) => string[] | Promise<string[]>;

/** One argument of a prompt. */
export interface PromptArgument {
  readonly name: string;
  readonly description?: string;
  readonly required?: boolean;
  readonly completable?: boolean;
}

/** A prompt, ready for agent.register. */
export interface Prompt<Args = Record<string, string>> {
  readonly kind: 'prompt';
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly arguments: readonly PromptArgument[];
  readonly handler: (args: Args, call: Call) => unknown;
  /** The argument completers, by name. */
  readonly complete?: Readonly<Record<string, Completer>>;
}

/** Anything agent.register takes. */
export type Registrable = Tool<any> | Resource | Prompt<any>;

const TASK_SUPPORT: readonly string[] = ['forbidden', 'optional', 'required'];

/**
 * defineTool defines a tool. Its handler's argument type is inferred from
 * inputSchema, which is converted to JSON Schema here, once.
 */
export function defineTool<const S extends InputSchema>(options: ToolOptions<S>): Tool<InferArgs<S>> {
  const o = options ?? ({} as ToolOptions<S>);
  const what = `defineTool ${JSON.stringify(o.name)}`;
  if (typeof o.name !== 'string') throw new TypeError(`${what}: name must be a string`);
  if (typeof o.description !== 'string') throw new TypeError(`${what}: description must be a string`);
  if (typeof o.handler !== 'function') throw new TypeError(`${what}: handler must be a function`);
  if (o.timeoutMs !== undefined && (!Number.isInteger(o.timeoutMs) || o.timeoutMs < 0)) {
    throw new TypeError(`${what}: timeoutMs must be a whole number of milliseconds (1 to 120000)`);
  }
  const taskSupport = o.execution?.taskSupport;
  if (o.execution !== undefined && (typeof o.execution !== 'object' || o.execution === null)) {
    throw new TypeError(`${what}: execution must be an object such as { taskSupport: 'optional' }`);
  }
  if (taskSupport !== undefined && !TASK_SUPPORT.includes(taskSupport)) {
    throw new TypeError(`${what}: execution.taskSupport must be 'forbidden', 'optional' or 'required', not ${JSON.stringify(taskSupport)}`);
  }
  if (o.idempotencyKey !== undefined && (typeof o.idempotencyKey !== 'string' || o.idempotencyKey === '')) {
    throw new TypeError(`${what}: idempotencyKey must name the tool's request id argument, for example 'requestId'`);
  }
  const inputSchema = toJSONSchema(o.inputSchema, what);
  if (o.idempotencyKey !== undefined) checkIdempotencyKey(o.name, o.idempotencyKey, inputSchema);
  const tool: Tool<InferArgs<S>> = {
    kind: 'tool',
    name: o.name,
    description: o.description,
    inputSchema,
    handler: o.handler,
    ...(o.title !== undefined && { title: o.title }),
    ...(o.outputSchema !== undefined && { outputSchema: toJSONSchema(o.outputSchema, `${what} outputSchema`, 'output') }),
    ...(o.annotations !== undefined && { annotations: { ...o.annotations } }),
    ...(o.timeoutMs !== undefined && { timeoutMs: o.timeoutMs }),
    ...(taskSupport !== undefined && taskSupport !== 'forbidden' && { execution: Object.freeze({ taskSupport }) }),
    ...(o.idempotencyKey !== undefined && { idempotencyKey: o.idempotencyKey }),
  };
  return Object.freeze(tool);
}

/**
 * checkIdempotencyKey throws unless key is a required string property of the
 * tool's input schema: the rule the gateway applies to the registration,
 * in its words, said here where the tool is defined.
 */
function checkIdempotencyKey(tool: string, key: string, schema: Record<string, unknown>): void {
  const start = `Tool ${JSON.stringify(tool)} names ${JSON.stringify(key)} as its idempotency key, but`;
  const fix = 'make it a required string argument.';
  const props = schema.properties;
  const prop =
    props !== null && typeof props === 'object' && Object.hasOwn(props, key) ? (props as Record<string, unknown>)[key] : undefined;
  if (prop === undefined) throw new TypeError(`${start} the input schema has no such argument; ${fix}`);
  if ((prop as { type?: unknown } | null)?.type !== 'string') throw new TypeError(`${start} it is not a string; ${fix}`);
  if (!Array.isArray(schema.required) || !schema.required.includes(key)) throw new TypeError(`${start} it is not required; ${fix}`);
}

/** defineResource defines a resource: a current view of something, read by URI with no arguments. */
export function defineResource(options: ResourceOptions): Resource {
  const o = options ?? ({} as ResourceOptions);
  const what = `defineResource ${JSON.stringify(o.uri)}`;
  if (typeof o.uri !== 'string' || !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(o.uri)) {
    throw new TypeError(`${what}: uri must be an absolute URI such as orders://open`);
  }
  if (typeof o.name !== 'string' || o.name === '') throw new TypeError(`${what}: name (the display name) is required`);
  if (typeof o.handler !== 'function') throw new TypeError(`${what}: handler must be a function`);
  const resource: Resource = {
    kind: 'resource',
    uri: o.uri,
    name: o.name,
    mimeType: o.mimeType || 'application/json',
    handler: o.handler,
    ...(o.description !== undefined && { description: o.description }),
  };
  return Object.freeze(resource);
}

/**
 * defineResourceTemplate defines resources named by a URI template: clients
 * list it with resources/templates/list and read any URI it matches.
 */
export function defineResourceTemplate(options: ResourceTemplateOptions): Resource {
  const o = options ?? ({} as ResourceTemplateOptions);
  const what = `defineResourceTemplate ${JSON.stringify(o.uriTemplate)}`;
  if (typeof o.uriTemplate !== 'string' || !/^[A-Za-z][A-Za-z0-9+.-]*:[^{]*\{[^}]+\}/.test(o.uriTemplate)) {
    throw new TypeError(`${what}: uriTemplate must be an absolute URI template with a variable, such as orders://orders/{id}`);
  }
  if (typeof o.name !== 'string' || o.name === '') throw new TypeError(`${what}: name (the display name) is required`);
  if (typeof o.handler !== 'function') throw new TypeError(`${what}: handler must be a function`);
  const handler = o.handler;
  const resource: Resource = {
    kind: 'resource',
    uri: o.uriTemplate,
    name: o.name,
    mimeType: o.mimeType || 'application/json',
    template: true,
    handler: (call, read) => handler(read ?? { uri: '', params: {} }, call),
    ...(typeof o.complete === 'function' && { complete: o.complete }),
    ...(o.description !== undefined && { description: o.description }),
  };
  return Object.freeze(resource);
}

/** definePrompt defines a prompt: a message template users pick from a client's menu. */
export function definePrompt<const S extends InputSchema = NoSchema>(options: PromptOptions<S>): Prompt<PromptArgs<S>> {
  const o = options ?? ({} as PromptOptions<S>);
  const what = `definePrompt ${JSON.stringify(o.name)}`;
  if (typeof o.name !== 'string') throw new TypeError(`${what}: name must be a string`);
  if (typeof o.handler !== 'function') throw new TypeError(`${what}: handler must be a function`);
  const args: PromptArgument[] = [];
  if (o.argsSchema !== undefined) {
    const schema = toJSONSchema(o.argsSchema, what);
    const props = (schema.properties ?? {}) as Record<string, { description?: unknown }>;
    const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
    for (const [name, prop] of Object.entries(props)) {
      const arg: { name: string; description?: string; required?: boolean; completable?: boolean } = { name };
      if (prop && typeof prop.description === 'string') arg.description = prop.description;
      if (required.has(name)) arg.required = true;
      if (typeof o.complete?.[name] === 'function') arg.completable = true;
      args.push(Object.freeze(arg));
    }
  }
  const prompt: Prompt<PromptArgs<S>> = {
    kind: 'prompt',
    name: o.name,
    arguments: Object.freeze(args),
    handler: o.handler,
    ...(o.complete !== undefined && { complete: Object.freeze({ ...o.complete }) }),
    ...(o.title !== undefined && { title: o.title }),
    ...(o.description !== undefined && { description: o.description }),
  };
  return Object.freeze(prompt);
}
