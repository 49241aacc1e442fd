/** The largest result, in bytes of JSON, the gateway takes. */
export const MAX_RESULT_BYTES = 4 * 1024 * 1024;
/** How many content parts one tool result may carry. */
export const MAX_CONTENT_PARTS = 16;

/** A text part of a tool result or prompt message. */
export interface TextContent {
  type: 'text';
  text: string;
  [extra: string]: unknown;
}

/** An image part: base64 data and its MIME type. */
export interface ImageContent {
  type: 'image';
  data: string;
  mimeType: string;
  [extra: string]: unknown;
}

/** An audio part: base64 data and its MIME type. */
export interface AudioContent {
  type: 'audio';
  data: string;
  mimeType: string;
  [extra: string]: unknown;
}

/** An embedded resource: its text, or its base64 `blob`. */
export interface EmbeddedResource {
  type: 'resource';
  resource: { uri: string; mimeType?: string; text: string } | { uri: string; mimeType?: string; blob: string };
  [extra: string]: unknown;
}

/** One part of a tool result. */
export type Content = TextContent | ImageContent | AudioContent | EmbeddedResource;

/**
 * A tool result in MCP's shape. A handler that returns a value with a
 * `content` array has it sent untouched: 1 to 16 parts, with `isError` if
 * set.
 */
export interface ToolResult {
  content: Content[];
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  [extra: string]: unknown;
}

/** toolText returns a result of one text part (the same as returning the string). */
export function toolText(text: string): ToolResult {
  return { content: [{ type: 'text', text: String(text) }] };
}

/**
 * toolImage returns a result of one image part, followed by the caption as a
 * text part when there is one. `base64` is the image's bytes in base64.
 */
export function toolImage(base64: string, mimeType: string, caption?: string): ToolResult {
  const content: Content[] = [{ type: 'image', data: base64, mimeType }];
  if (caption) content.push({ type: 'text', text: caption });
  return { content };
}

/** toolAudio returns a result of one audio part, followed by the caption as a text part when there is one. */
export function toolAudio(base64: string, mimeType: string, caption?: string): ToolResult {
  const content: Content[] = [{ type: 'audio', data: base64, mimeType }];
  if (caption) content.push({ type: 'text', text: caption });
  return { content };
}

/**
 * toolError returns a failed result (`isError: true`) whose text the model
 * reads. Write it for the model: what went wrong and what to try next.
 * Throwing an Error has the same effect.
 */
export function toolError(message: string): ToolResult {
  return { content: [{ type: 'text', text: String(message) }], isError: true };
}

/** A message of a rendered prompt. `content` may be a string, sent as text. */
export interface PromptMessage {
  role: 'user' | 'assistant';
  content: string | TextContent | ImageContent | AudioContent | EmbeddedResource;
}

/** What a prompt handler may return besides a string. */
export interface PromptResult {
  description?: string;
  messages: PromptMessage[];
}

/**
 * CallFailure is a failure whose message goes to the gateway as the call's
 * error, as it is.
 */
export class CallFailure extends Error {
  override name = 'CallFailure';
}

/**
 * encodeToolResult turns a tool handler's value into the JSON of an MCP
 * CallToolResult. structured says whether an object value also goes as
 * structuredContent (the tool declared an outputSchema).
 */
export function encodeToolResult(value: unknown, structured = false): string {
  if (isShaped(value)) {
    const n = value.content.length;
    if (n < 1 || n > MAX_CONTENT_PARTS) {
      throw new CallFailure(`Result has ${n} content parts; a tool result carries 1 to ${MAX_CONTENT_PARTS}.`);
    }
    return sized(json(value));
  }
  const text = typeof value === 'string' ? value : json(value);
  if (structured && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return sized(`{"content":[${json({ type: 'text', text })}],"structuredContent":${text}}`);
  }
  return sized(json({ content: [{ type: 'text', text }] }));
}

/**
 * encodeResourceResult turns a resource handler's value into the wire's
 * `{text, mimeType}`, or `{text: '', blob, mimeType}` (base64) for bytes (a
 * Uint8Array or Buffer).
 */
export function encodeResourceResult(value: unknown, mimeType: string): string {
  if (value instanceof Uint8Array) return sized(json({ text: '', blob: Buffer.from(value).toString('base64'), mimeType }));
  const text = typeof value === 'string' ? value : json(value);
  return sized(json({ text, mimeType }));
}

/** encodePromptResult turns a prompt handler's value into the wire's `{description?, messages}`. */
export function encodePromptResult(value: unknown): string {
  if (typeof value === 'string') {
    return sized(json({ messages: [{ role: 'user', content: { type: 'text', text: value } }] }));
  }
  const r = value as Partial<PromptResult> | null | undefined;
  if (!r || typeof r !== 'object' || !Array.isArray(r.messages)) {
    throw new CallFailure('The prompt handler must return a string or { messages: [{ role, content }] }.');
  }
  if (r.messages.length === 0) {
    throw new CallFailure('The prompt rendered no messages; return at least one.');
  }
  const messages = r.messages.map((m, i) => {
    if (!m || (m.role !== 'user' && m.role !== 'assistant')) {
      throw new CallFailure(`Prompt message ${i + 1} has role ${JSON.stringify(m?.role ?? null)}; use user or assistant.`);
    }
    const content = typeof m.content === 'string' ? { type: 'text', text: m.content } : m.content;
    if (!content || typeof content !== 'object') {
      throw new CallFailure(`Prompt message ${i + 1} has no content; give a string or a content part.`);
    }
    return { role: m.role, content };
  });
  const out: PromptResult = { messages: messages as PromptMessage[] };
  if (typeof r.description === 'string' && r.description !== '') out.description = r.description;
  return sized(json(out));
}

/**
 * json returns v's JSON; undefined becomes null. A value JSON cannot hold (a
 * BigInt, a cycle, a function) fails the call with
 * `Result could not be serialised: <reason>`.
 */
export function json(v: unknown): string {
  if (v === undefined) return 'null';
  let s: string | undefined;
  try {
    s = JSON.stringify(v);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new CallFailure(`Result could not be serialised: ${reason.replace(/\s*\n\s*/g, ' ')}`);
  }
  if (s === undefined) {
    throw new CallFailure(`Result could not be serialised: a ${typeof v} has no JSON form`);
  }
  return s;
}

function sized(s: string): string {
  const n = Buffer.byteLength(s, 'utf8');
  if (n > MAX_RESULT_BYTES) throw new CallFailure(tooLarge(n));
  return s;
}

/** tooLarge is the protocol's message for a result over the limit. */
export function tooLarge(n: number): string {
  return `Result is too large: ${thousands(n)} bytes; the limit is 4 MiB (${thousands(MAX_RESULT_BYTES)} bytes). Return less, or page through it.`;
}

/** thousands formats n with comma separators: 65536 → "65,536". */
export function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function isShaped(v: unknown): v is ToolResult {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && Array.isArray((v as { content?: unknown }).content);
}
