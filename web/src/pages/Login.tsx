import { useRouter } from "@tanstack/react-router";
import { type FormEvent, useState } from "react";

import { api } from "../api/client";
import { ApiError, toApiError } from "../api/errors";
import { setSession } from "../api/session";
import { Button } from "../ui/Button";
import { Field, Input } from "../ui/Field";
import { InlineError } from "../ui/States";

/** Only same-origin paths: a crafted `?redirect=https://evil` must not bounce the user away. */
export function safeRedirect(target: string | undefined): string {
  if (!target || !target.startsWith("/") || target.startsWith("//") || target.startsWith("/login")) return "/";
  return target;
}

export function LoginPage({ redirect }: { redirect?: string }) {
  const router = useRouter();
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [resent, setResent] = useState(false);
  const unverified = error instanceof ApiError && error.code === "email_not_verified";

  async function resend() {
    await api.POST("/api/v1/auth/verify/resend", { body: { email } });
    setResent(true);
  }

  async function submit(event: FormEvent) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const { data, error: body, response } = await api.POST("/api/v1/auth/login", { body: { email, password } });
      if (!response.ok || !data) throw toApiError(response.status, body);
      setSession(data);
      router.history.push(safeRedirect(redirect));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="grid min-h-screen place-items-center bg-slate-100 px-4">
      <div className="w-full max-w-sm">
        <div className="mb-6 flex items-center justify-center gap-2">
          <span className="grid size-9 place-items-center rounded-lg bg-indigo-600 text-lg font-bold text-white">
            C
          </span>
          <span className="text-xl font-semibold tracking-tight">Codity Scheduler</span>
        </div>
        <form
          onSubmit={submit}
          data-testid="login-form"
          className="space-y-4 rounded-lg bg-white p-6 shadow-sm ring-1 ring-slate-200"
        >
          <h1 className="text-base font-semibold">Sign in</h1>
          {redirect && safeRedirect(redirect) !== "/" && (
            <p data-testid="session-expired" className="text-sm text-slate-500">
              Your session ended. Sign in to return to where you were.
            </p>
          )}
          <Field label="Email" name="email">
            {({ id }) => (
              <Input
                id={id}
                data-testid="login-email"
                type="email"
                autoComplete="username"
                required
                value={email}
                onChange={(e) => setEmail(e.target.value)}
              />
            )}
          </Field>
          <Field label="Password" name="password">
            {({ id }) => (
              <Input
                id={id}
                data-testid="login-password"
                type="password"
                autoComplete="current-password"
                required
                value={password}
                onChange={(e) => setPassword(e.target.value)}
              />
            )}
          </Field>
          <InlineError error={error} />
          {unverified && (
            <Button type="button" size="sm" onClick={() => void resend()} disabled={resent} data-testid="login-resend">
              {resent ? "A new confirmation link is on its way" : "Send the confirmation link again"}
            </Button>
          )}
          <Button type="submit" variant="primary" className="w-full" busy={busy} data-testid="login-submit">
            Sign in
          </Button>
        </form>
      </div>
    </div>
  );
}
