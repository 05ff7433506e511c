// The signed-in session: the access token in memory only, the refresh token in an httpOnly
// cookie this code never sees.
//
// - The access token lives in this module's memory: nothing a script can read after the page
//   is gone (no localStorage), so a stolen copy of storage holds no session.
// - The refresh token is the `codity_refresh` cookie (httpOnly, SameSite=Strict, path
//   /api/v1/auth): the browser sends it to /auth/refresh and /auth/logout only. Those calls
//   must carry the session's CSRF token in `X-CSRF-Token`; it comes with every sign-in and
//   refresh, and in the readable `codity_csrf` cookie (so a reloaded page can still refresh).
// - A reload starts with no access token: the first navigation calls `refreshOnce()`, which
//   exchanges the cookie for a new access token (or finds there is no session).
//
// Refresh tokens rotate: each works exactly once, and presenting a used one revokes the whole
// family. Concurrent 401s in one tab share ONE refresh (`refreshOnce()` is that shared
// promise), and tabs take turns under a Web Lock, so each presents the cookie the previous
// exchange left.

export interface AccessToken {
  access_token: string;
  expires_in: number;
  csrf_token: string;
}

const CSRF_COOKIE = "codity_csrf";

type Listener = () => void;
const listeners = new Set<Listener>();

let accessToken: string | null = null;
let csrfToken: string | null = null;

export function getAccessToken(): string | null {
  return accessToken;
}

export function hasSession(): boolean {
  return accessToken !== null;
}

export function setSession(tokens: AccessToken): void {
  accessToken = tokens.access_token;
  csrfToken = tokens.csrf_token;
  listeners.forEach((fn) => fn());
}

export function clearSession(): void {
  accessToken = null;
  csrfToken = null;
  listeners.forEach((fn) => fn());
}

export function onSessionChange(fn: Listener): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** The CSRF token of the refresh cookie the browser holds now. The readable cookie comes
 * first: it is set together with the refresh cookie, so it matches it even when another tab
 * signed in again since; the token this tab was given is the fallback. */
export function csrfHeader(): Record<string, string> {
  const fromCookie = document.cookie
    .split(";")
    .map((part) => part.trim().split("="))
    .find(([name]) => name === CSRF_COOKIE)?.[1];
  const token = fromCookie ? decodeURIComponent(fromCookie) : csrfToken;
  return token ? { "X-CSRF-Token": token } : {};
}

let inflight: Promise<string | null> | null = null;

/** Exchange the refresh cookie for a new access token; concurrent callers share the exchange.
 * Null when there is no session (or it was revoked); the session is then cleared. */
export function refreshOnce(): Promise<string | null> {
  if (inflight) return inflight;
  const exchange = async (): Promise<string | null> => {
    try {
      const response = await fetch("/api/v1/auth/refresh", {
        method: "POST",
        credentials: "same-origin",
        headers: csrfHeader(),
      });
      if (!response.ok) {
        clearSession();
        return null;
      }
      const tokens = (await response.json()) as AccessToken;
      setSession(tokens);
      return tokens.access_token;
    } catch {
      return null; // network failure: keep what we have, the next call tries again
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

/** Sign out this session: the server revokes its refresh family and clears the cookies. */
export async function signOutSession(): Promise<void> {
  await fetch("/api/v1/auth/logout", {
    method: "POST",
    credentials: "same-origin",
    headers: csrfHeader(),
  }).catch(() => undefined);
  clearSession();
}

// Where to go when the session cannot be renewed; the router registers it at start-up.
let expiredHandler: (() => void) | null = null;

export function setSessionExpiredHandler(fn: () => void): void {
  expiredHandler = fn;
}

export function sessionExpired(): void {
  clearSession();
  expiredHandler?.();
}
