import { createRootRoute, createRoute, createRouter, Outlet, redirect } from "@tanstack/react-router";

import { hasSession, refreshOnce } from "./api/session";
import { AppShell } from "./layout/AppShell";
import { AcceptInvitationPage } from "./pages/AcceptInvitation";
import { DeadLettersPage } from "./pages/DeadLetters";
import { JobDetailPage } from "./pages/JobDetail";
import { JobsPage, parseJobSearch } from "./pages/Jobs";
import { LoginPage } from "./pages/Login";
import { OverviewPage } from "./pages/Overview";
import { QueuesPage } from "./pages/Queues";
import { SchedulesPage } from "./pages/Schedules";
import { SettingsPage } from "./pages/Settings";
import { VerifyEmailPage } from "./pages/VerifyEmail";
import { WorkersPage } from "./pages/Workers";

const rootRoute = createRootRoute({ component: Outlet });

const loginRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: "/login",
  validateSearch: (search: Record<string, unknown>): { redirect?: string } => ({
    redirect: typeof search.redirect === "string" ? search.redirect : undefined,
  }),
  component: function Login() {
    const { redirect: target } = loginRoute.useSearch();
    return <LoginPage redirect={target} />;
  },
});

// Everything else needs a session. A fresh page has no access token in memory: the refresh
// cookie (if any) is exchanged for one; without a session, go to login and remember the page.
const appRoute = createRoute({
  getParentRoute: () => rootRoute,
  id: "app",
  beforeLoad: async ({ location }) => {
    if (!hasSession() && !(await refreshOnce())) {
      throw redirect({ to: "/login", search: { redirect: location.href } });
    }
  },
  component: AppShell,
});

// Public: the link mailed at registration.
const verifyRoute = createRoute({
  getParentRoute: () => rootRoute,
  path: "/verify-email",
  validateSearch: (search: Record<string, unknown>): { token?: string } => ({
    token: typeof search.token === "string" ? search.token : undefined,
  }),
  component: function Verify() {
    return <VerifyEmailPage token={verifyRoute.useSearch().token} />;
  },
});

const overviewRoute = createRoute({ getParentRoute: () => appRoute, path: "/", component: OverviewPage });
const queuesRoute = createRoute({ getParentRoute: () => appRoute, path: "/queues", component: QueuesPage });
const workersRoute = createRoute({ getParentRoute: () => appRoute, path: "/workers", component: WorkersPage });
const schedulesRoute = createRoute({ getParentRoute: () => appRoute, path: "/schedules", component: SchedulesPage });
const deadLettersRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/dead-letters",
  component: DeadLettersPage,
});
const settingsRoute = createRoute({ getParentRoute: () => appRoute, path: "/settings", component: SettingsPage });

// The invitation link: accepted signed in, so it sits behind the session like every screen.
const acceptRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/invitations/accept",
  validateSearch: (search: Record<string, unknown>): { token?: string } => ({
    token: typeof search.token === "string" ? search.token : undefined,
  }),
  component: function Accept() {
    return <AcceptInvitationPage token={acceptRoute.useSearch().token} />;
  },
});

const jobsRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/jobs",
  validateSearch: parseJobSearch,
  component: function Jobs() {
    return <JobsPage search={jobsRoute.useSearch()} />;
  },
});

const jobDetailRoute = createRoute({
  getParentRoute: () => appRoute,
  path: "/jobs/$jobId",
  component: function JobDetail() {
    const { jobId } = jobDetailRoute.useParams();
    return <JobDetailPage jobId={jobId} />;
  },
});

const routeTree = rootRoute.addChildren([
  loginRoute,
  verifyRoute,
  appRoute.addChildren([
    acceptRoute,
    overviewRoute,
    queuesRoute,
    jobsRoute,
    jobDetailRoute,
    workersRoute,
    schedulesRoute,
    deadLettersRoute,
    settingsRoute,
  ]),
]);

// Plain query strings (`?q=176`), not TanStack's JSON-in-the-URL: every search value this
// app keeps is a string, and plain URLs are what people paste and bookmark.
function parseSearch(query: string): Record<string, string> {
  return Object.fromEntries(new URLSearchParams(query));
}

function stringifySearch(search: Record<string, unknown>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(search)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

export const router = createRouter({ routeTree, defaultPreload: false, parseSearch, stringifySearch });

declare module "@tanstack/react-router" {
  interface Register {
    router: typeof router;
  }
}
