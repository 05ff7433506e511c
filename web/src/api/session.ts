// The signed-in session: tokens in localStorage, and the one refresh that may be in flight.
//
// Refresh tokens rotate: each works exactly once, and presenting a used one revokes the whole
// family. So when several requests hit 401 together they must share ONE refresh call; a second
// call with the same token would log the user out. `refreshOnce()` is that shared promise.

export interface Tokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
}

const STORAGE_KEY = "codity.session";

type Listener = () => void;
const listeners = new Set<Listener>();

export function loadTokens(): Tokens | null {
  try {
    const raw = localStorage.getItem(STORAGE_KEY);
    if (!raw) return null;
    const parsed = JSON.parse(raw) as Partial<Tokens>;
    if (typeof parsed.access_token !== "string" || typeof parsed.refresh_token !== "string") {
      return null;
    }
    return parsed as Tokens;
  } catch {
    return null; // corrupt storage is the same as no session
  }
}

export function saveTokens(tokens: Tokens): void {
  localStorage.setItem(STORAGE_KEY, JSON.stringify(tokens));
  listeners.forEach((fn) => fn());
}

export function clearTokens(): void {
  localStorage.removeItem(STORAGE_KEY);
  listeners.forEach((fn) => fn());
}

export function onSessionChange(fn: Listener): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

let inflight: Promise<string | null> | null = null;

/** Exchange the refresh token for a new pair; concurrent callers share the same exchange.
 *
 * Other tabs share the tokens (localStorage), so the exchange also runs under a Web Lock:
 * a tab that waited while another tab refreshed finds a new refresh token in storage and
 * uses the access token that came with it instead of presenting a rotated one. */
export function refreshOnce(): Promise<string | null> {
  if (inflight) return inflight;
  const startedWith = loadTokens()?.refresh_token;
  if (!startedWith) return Promise.resolve(null);
  const exchange = async (): Promise<string | null> => {
    const current = loadTokens();
    if (!current) return null;
    if (current.refresh_token !== startedWith) return current.access_token; // another tab did it
    try {
      const response = await fetch("/api/v1/auth/refresh", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ refresh_token: current.refresh_token }),
      });
      if (!response.ok) {
        clearTokens();
        return null;
      }
      const tokens = (await response.json()) as Tokens;
      saveTokens(tokens);
      return tokens.access_token;
    } catch {
      return null; // network failure: keep the tokens, the next poll tries again
    }
  };
  const locked: Promise<string | null> =
    typeof navigator !== "undefined" && navigator.locks
      ? (navigator.locks.request("codity.session.refresh", exchange) as unknown as Promise<string | null>) // a promise returned by the callback is flattened
      : exchange();
  const shared = locked.finally(() => {
    inflight = null;
  });
  inflight = shared;
  return shared;
}

// Where to go when the session cannot be renewed; the router registers it at start-up.
let expiredHandler: (() => void) | null = null;

export function setSessionExpiredHandler(fn: () => void): void {
  expiredHandler = fn;
}

export function sessionExpired(): void {
  clearTokens();
  expiredHandler?.();
}
