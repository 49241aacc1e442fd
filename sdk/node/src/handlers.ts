import type { Call, Prompt, Resource, TemplateRead, Tool } from './define.js';
import { encodePromptResult, encodeResourceResult, encodeToolResult } from './result.js';

// A call reaches the handler registered under its kind and name.

/** What an agent has registered, by name: what a call may run. */
export interface Registered {
tools: ReadonlyMap<string, { tool: Tool<any> }>;
resources: ReadonlyMap<string, Resource>;
prompts: ReadonlyMap<string, Prompt<any>>;
}

/**
 * handlerFor returns a function that runs the handler a call of kind and
 * name goes to, with its arguments, and encodes its result for the wire; or
 * undefined when nothing of that name is registered.
 */
export function handlerFor(reg: Registered, kind: string, name: string, args: unknown): ((call: Call) => Promise<string>) | undefined {
  const a = args !== null && typeof args === 'object' && !Array.isArray(args) ? args : {};
  switch (kind) {
    case 'tool': {
      const t = reg.tools.get(name)?.tool;
      return t && (async (call) => encodeToolResult(await t.handler(a, call), t.outputSchema !== undefined));
    }
    case 'resource': {
      const r = reg.resources.get(name);
      return r && (async (call) => encodeResourceResult(await r.handler(call, r.template ? templateRead(a) : undefined), r.mimeType));
    }
    case 'prompt': {
      const p = reg.prompts.get(name);
      return p && (async (call) => encodePromptResult(await p.handler(a, call)));
    }
    case 'complete': {
      const req = completionRequest(a);
      const p = reg.prompts.get(name);
      if (p) {
        const c = p.complete?.[req.argument];
        return async (call) => encodeCompletion(c ? await c(req.value, req.context, call) : []);
      }
      const r = reg.resources.get(name);
      const rc = r?.complete;
      return rc && (async (call) => encodeCompletion(await rc(req.argument, req.value, req.context, call)));
    }
  }
  return undefined;
}

/** templateRead reads a template read's arguments: `{uri, params}`. */
function templateRead(args: unknown): TemplateRead {
  const a = (args ?? {}) as { uri?: unknown; params?: unknown };
  const params: Record<string, string> = {};
  if (a.params && typeof a.params === 'object') {
    for (const [k, v] of Object.entries(a.params as Record<string, unknown>)) params[k] = String(v);
  }
  return { uri: typeof a.uri === 'string' ? a.uri : '', params };
}

/** completionRequest reads a completion call's arguments. */
function completionRequest(args: unknown): { argument: string; value: string; context: Record<string, string> } {
  const a = (args ?? {}) as { argument?: unknown; value?: unknown; context?: unknown };
  const context: Record<string, string> = {};
  if (a.context && typeof a.context === 'object') {
    for (const [k, v] of Object.entries(a.context as Record<string, unknown>)) context[k] = String(v);
  }
  return { argument: String(a.argument ?? ''), value: String(a.value ?? ''), context };
}

/** encodeCompletion is a completion's wire result: `{"values": [...]}`, strings only. */
function encodeCompletion(values: unknown): string {
  const list = Array.isArray(values) ? values.map((v) => String(v)) : [];
  return JSON.stringify({ values: list });
}
