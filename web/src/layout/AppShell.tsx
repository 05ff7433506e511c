import { useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import { Link, Outlet, useNavigate } from "@tanstack/react-router";

import { pollingDisabled, startLiveUpdates, useLiveStatus } from "../api/live";
import { signOutSession } from "../api/session";
import { SessionProvider, useSession } from "../lib/session";
import { loadTheme, saveTheme, type Theme } from "../lib/theme";
import { viewerTimeZone } from "../lib/time";
import { Badge } from "../ui/Badge";
import { Button } from "../ui/Button";

const NAV = [
  { to: "/", label: "Overview", testId: "nav-overview" },
  { to: "/queues", label: "Queues", testId: "nav-queues" },
  { to: "/jobs", label: "Jobs", testId: "nav-jobs" },
  { to: "/workers", label: "Workers", testId: "nav-workers" },
  { to: "/schedules", label: "Schedules", testId: "nav-schedules" },
  { to: "/dead-letters", label: "Dead letters", testId: "nav-dead-letters" },
  { to: "/settings", label: "Settings", testId: "nav-settings" },
] as const;

export function AppShell() {
  return (
    <SessionProvider>
      <Frame />
    </SessionProvider>
  );
}

function Frame() {
  const { me, role, projects, project, selectProject } = useSession();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  // One event stream for the project on screen; switching project switches the stream.
  useEffect(() => startLiveUpdates(queryClient, project.id), [queryClient, project.id]);

  async function signOut() {
    // The server revokes the session's refresh family and clears its cookies; locally the
    // session ends whatever the answer.
    await signOutSession();
    queryClient.clear();
    await navigate({ to: "/login", search: { redirect: undefined } });
  }

  return (
    <div className="min-h-screen lg:grid lg:grid-cols-[14rem_1fr]">
      <aside className="border-b border-slate-200 bg-slate-900 text-slate-300 lg:border-r lg:border-b-0">
        <div className="lg:sticky lg:top-0">
          <div className="flex items-center justify-between gap-2 px-4 py-3 lg:py-5">
            <div className="flex items-center gap-2 text-white">
              <span className="grid size-7 place-items-center rounded-md bg-indigo-500 text-sm font-bold">C</span>
              <span className="font-semibold tracking-tight">Codity</span>
            </div>
          </div>
          <nav className="flex gap-1 overflow-x-auto px-2 pb-2 lg:flex-col lg:overflow-visible lg:pb-0">
            {NAV.map((item) => (
              <Link
                key={item.to}
                to={item.to}
                data-testid={item.testId}
                activeOptions={{ exact: item.to === "/" }}
                className="rounded-md px-3 py-1.5 text-sm whitespace-nowrap hover:bg-slate-800 hover:text-white"
                activeProps={{ className: "bg-slate-800 text-white font-medium" }}
              >
                {item.label}
              </Link>
            ))}
          </nav>
        </div>
      </aside>
      <div className="min-w-0">
        <header className="flex flex-wrap items-center justify-between gap-3 border-b border-slate-200 bg-white px-4 py-2.5 sm:px-6">
          <label className="flex items-center gap-2 text-sm text-slate-500">
            <span className="hidden sm:inline">Project</span>
            <select
              data-testid="project-select"
              value={project.id}
              onChange={(e) => selectProject(e.target.value)}
              className="rounded-md border-0 py-1 pr-8 pl-2 text-sm font-medium text-slate-900 ring-1 ring-slate-300 focus:ring-2 focus:ring-indigo-600"
            >
              {projects.map((p) => (
                <option key={p.id} value={p.id}>
                  {p.name}
                </option>
              ))}
            </select>
          </label>
          <div className="flex items-center gap-3 text-sm">
            <LiveIndicator />
            <ThemeSwitch />
            <span className="hidden text-xs text-slate-500 md:inline" title="Times are shown in your time zone">
              {viewerTimeZone}
            </span>
            <span className="hidden text-slate-600 sm:inline" data-testid="current-user">
              {me.user.email}
            </span>
            <Badge tone={role === "viewer" ? "gray" : "indigo"} testId="current-role">
              {role}
            </Badge>
            <Button size="sm" variant="ghost" onClick={signOut} data-testid="logout">
              Sign out
            </Button>
          </div>
        </header>
        <main className="mx-auto max-w-7xl px-4 py-6 sm:px-6">
          <Outlet />
        </main>
      </div>
    </div>
  );
}

function ThemeSwitch() {
  return (
    <select
      aria-label="Theme"
      data-testid="theme-select"
      defaultValue={loadTheme()}
      onChange={(e) => saveTheme(e.target.value as Theme)}
      className="rounded-md border-0 bg-white py-1 pr-7 pl-2 text-xs text-slate-700 ring-1 ring-slate-300"
    >
      <option value="system">System theme</option>
      <option value="light">Light</option>
      <option value="dark">Dark</option>
    </select>
  );
}

/** Whether the screen is updated by the event stream, or polling because the stream dropped. */
function LiveIndicator() {
  const status = useLiveStatus();
  const text =
    status === "live"
      ? "Live"
      : status === "connecting"
        ? "Connecting…"
        : pollingDisabled()
          ? "Live updates lost"
          : "Live updates lost — polling every 2 s";
  return (
    <span
      data-testid="live-status"
      data-status={status}
      role="status"
      title={
        status === "live"
          ? "Changes appear as they happen (server-sent events)"
          : "The event stream is down; reconnecting in the background"
      }
      className="inline-flex items-center gap-1.5 text-xs text-slate-600"
    >
      <span
        aria-hidden
        className={
          "size-2 rounded-full " +
          (status === "live" ? "bg-emerald-500" : status === "polling" ? "bg-amber-500" : "bg-slate-400")
        }
      />
      {text}
    </span>
  );
}
