/** The longest tool or prompt name the gateway accepts. */
export const MAX_NAME_LENGTH = 64;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * checkName returns the message the gateway answers (HTTP 400) for a tool or
 * prompt name it refuses, or `undefined` when the name is acceptable: 1 to 64
 * characters from `A-Z a-z 0-9 _ -`, without `__` (reserved for bridged MCP
 * servers). The SDK does not refuse such a name itself; it logs this message
 * when you register, and the gateway refuses the connection.
 */
export function checkName(kind: 'tool' | 'prompt', name: string): string | undefined {
  if (typeof name !== 'string' || !NAME.test(name)) {
    return `Invalid ${kind} name ${goQuote(String(name))}.`;
  }
  if (name.includes('__')) {
    return `Invalid ${kind} name ${goQuote(name)}: names containing "__" are reserved for bridged MCP servers.`;
  }
  return undefined;
}

/** goQuote quotes s the way the gateway's messages do (Go's %q, for printable text). */
function goQuote(s: string): string {
  return JSON.stringify(s);
}
