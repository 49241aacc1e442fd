const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 30_000;

/**
 * backoffDelay returns the wait in ms before retry number `attempt` (from 0):
 * 250 ms doubling up to 30 s, each with ±20 % jitter.
 */
export function backoffDelay(attempt: number): number {
  const base = attempt < 20 ? Math.min(BACKOFF_MIN_MS * 2 ** attempt, BACKOFF_MAX_MS) : BACKOFF_MAX_MS;
  return Math.round(base * (0.8 + 0.4 * Math.random()));
}
