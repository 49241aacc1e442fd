/** The longest progress line, in characters; longer lines are cut. */
export const MAX_PROGRESS_LENGTH = 200;
/** How many progress lines may go out per second per call. */
export const MAX_PROGRESS_PER_SECOND = 4;

/**
 * ProgressThrottle passes progress lines to send at most
 * MAX_PROGRESS_PER_SECOND in any second. A line that finds the window full
 * is held back; a later one replaces it (the latest wins), and it goes out
 * when the window allows. After stop, nothing more is sent.
 */
export class ProgressThrottle {
  readonly #send: (line: string) => void;
  readonly #sent: number[] = []; // times of the last few lines, oldest first
  #pending: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #done = false;
  readonly #now: () => number;

  constructor(send: (line: string) => void, now: () => number = Date.now) {
    this.#send = send;
    this.#now = now;
  }

  /** line sends message now, or holds it back until the window allows. */
  line(message: string): void {
    const msg = cut(String(message ?? ''), MAX_PROGRESS_LENGTH);
    if (msg === '' || this.#done) return;
    if (this.#timer !== undefined) {
      this.#pending = msg;
      return;
    }
    const wait = this.#wait(this.#now());
    if (wait <= 0) {
      this.#emit(msg);
      return;
    }
    this.#pending = msg;
    this.#timer = setTimeout(() => this.#flush(), wait);
  }

  /** stop drops any held line; nothing is sent after stop. */
  stop(): void {
    this.#done = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending = undefined;
  }

  #wait(now: number): number {
    if (this.#sent.length < MAX_PROGRESS_PER_SECOND) return 0;
    return this.#sent[0] + 1000 - now;
  }

  #emit(msg: string): void {
    this.#sent.push(this.#now());
    if (this.#sent.length > MAX_PROGRESS_PER_SECOND) this.#sent.shift();
    this.#send(msg);
  }

  #flush(): void {
    this.#timer = undefined;
    if (this.#done || this.#pending === undefined) return;
    const wait = this.#wait(this.#now());
    if (wait > 0) {
      this.#timer = setTimeout(() => this.#flush(), wait);
      return;
    }
    const msg = this.#pending;
    this.#pending = undefined;
    this.#emit(msg);
  }
}

/** cut shortens s to at most n characters (code points). */
export function cut(s: string, n: number): string {
  if (s.length <= n) return s;
  const chars = Array.from(s);
  return chars.length <= n ? s : chars.slice(0, n).join('');
}
