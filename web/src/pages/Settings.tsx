import { createColumnHelper } from "@tanstack/react-table";
import { type FormEvent, useState } from "react";

import { api, unwrap } from "../api/client";
import { ApiError } from "../api/errors";
import { useAction, useLive } from "../api/hooks";
import { sessionExpired, setSession } from "../api/session";
import type { ApiKeyPublic, InvitationPublic, MemberPublic, Project } from "../api/types";
import { ROLES, type Role } from "../lib/roles";
import { useProjectId, useSession } from "../lib/session";
import { formatDateTime, formatRelative } from "../lib/time";
import { Badge } from "../ui/Badge";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { Field, Input, Select } from "../ui/Field";
import { PageHeader } from "../ui/PageHeader";
import { EmptyState, InlineError } from "../ui/States";
import { DataTable } from "../ui/Table";

export function SettingsPage() {
  return (
    <div data-testid="page-settings" className="space-y-6">
      <PageHeader title="Settings" description="Projects, API keys, and who can do what in this organization." />
      <ProjectsCard />
      <WeightCard />
      <HttpAllowlistCard />
      <ApiKeysCard />
      <MembersCard />
      <InvitationsCard />
      <SecurityCard />
    </div>
  );
}

const projectCol = createColumnHelper<Project>();

function ProjectsCard() {
  const { projects, project, can, selectProject } = useSession();
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const create = useAction(
    () => unwrap(api.POST("/api/v1/projects", { body: { name, slug } })),
    [["projects"], ["me"]],
    (p) => {
      setName("");
      setSlug("");
      selectProject(p.id);
    },
  );
  const err = create.error instanceof ApiError ? create.error : null;
  const columns = [
    projectCol.accessor("name", {
      header: "Project",
      cell: (c) => (
        <span className="font-medium text-slate-900">
          {c.getValue()} {c.row.original.id === project.id && <Badge tone="indigo">current</Badge>}
        </span>
      ),
    }),
    projectCol.accessor("slug", { header: "Slug", cell: (c) => <code className="text-xs">{c.getValue()}</code> }),
    projectCol.display({
      id: "open",
      header: "",
      cell: (c) =>
        c.row.original.id !== project.id && (
          <div className="text-right">
            <Button size="sm" variant="ghost" onClick={() => selectProject(c.row.original.id)}>
              Switch
            </Button>
          </div>
        ),
    }),
  ];
  return (
    <Card title="Projects" padded={false} testId="settings-projects">
      <DataTable columns={columns} data={projects} getRowId={(p) => p.id} empty={<EmptyState title="No projects" />} />
      {can("admin") && (
        <form
          className="grid gap-3 border-t border-slate-100 p-4 sm:grid-cols-[1fr_1fr_auto] sm:items-start"
          onSubmit={(e: FormEvent) => {
            e.preventDefault();
            create.mutate(undefined);
          }}
        >
          <Field label="New project name" name="project-name" error={err?.fieldMessage("name")}>
            {({ id, invalid }) => (
              <Input id={id} invalid={invalid} required value={name} onChange={(e) => setName(e.target.value)} />
            )}
          </Field>
          <Field
            label="Slug"
            name="project-slug"
            error={
              err?.fieldMessage("slug") ?? (err?.code === "conflict" || err?.code === "name_taken" ? err.message : null)
            }
          >
            {({ id, invalid }) => (
              <Input id={id} invalid={invalid} required value={slug} onChange={(e) => setSlug(e.target.value)} />
            )}
          </Field>
          <Button type="submit" variant="primary" className="sm:mt-5" busy={create.isPending}>
            Create project
          </Button>
        </form>
      )}
    </Card>
  );
}

/** The project's fair-share weight: everyone sees it, organization admins change it (the API
 * refuses anyone else, and a project's API keys). */
function WeightCard() {
  const { can } = useSession();
  const projectId = useProjectId();
  const isAdmin = can("admin");
  const current = useLive(
    ["project", projectId],
    () => unwrap(api.GET("/api/v1/projects/{project_id}", { params: { path: { project_id: projectId } } })),
    { interval: 30_000 },
  );
  const [weight, setWeight] = useState<string | null>(null);
  const shown = weight ?? (current.data ? String(current.data.weight) : "");
  const save = useAction(
    () =>
      unwrap(
        api.PATCH("/api/v1/projects/{project_id}", {
          params: { path: { project_id: projectId } },
          body: { weight: Number(shown) },
        }),
      ),
    [["project", projectId]],
    () => setWeight(null),
  );
  const err = save.error instanceof ApiError ? save.error : null;
  return (
    <Card title="Fair share" testId="settings-weight">
      <p className="mb-3 text-sm text-slate-600">
        Workers that serve several projects share their slots between the projects with work in proportion to their
        weight (1–1,000; default 1), whatever their queues&apos; priorities: a queue&apos;s priority orders only its own
        project&apos;s queues. Organization admins set it.
      </p>
      {isAdmin ? (
        <form
          className="grid gap-3 sm:grid-cols-[12rem_auto] sm:items-start"
          onSubmit={(e: FormEvent) => {
            e.preventDefault();
            save.mutate(undefined);
          }}
        >
          <Field label="Weight" name="project-weight" error={err ? (err.fieldMessage("weight") ?? err.message) : null}>
            {({ id, invalid }) => (
              <Input
                id={id}
                invalid={invalid}
                data-testid="project-weight-input"
                type="number"
                required
                value={shown}
                onChange={(e) => setWeight(e.target.value)}
              />
            )}
          </Field>
          <Button type="submit" variant="primary" className="sm:mt-5" busy={save.isPending}>
            Save weight
          </Button>
        </form>
      ) : (
        <p className="text-sm text-slate-700">
          Weight <strong data-testid="project-weight">{current.data?.weight ?? "…"}</strong>
        </p>
      )}
      {save.isSuccess && weight === null && (
        <p className="mt-2 text-sm text-emerald-700" data-testid="project-weight-saved">
          Saved.
        </p>
      )}
    </Card>
  );
}

/** Hosts this project's `http_request` jobs may reach although they resolve to internal
 * addresses: only those the deployment's HTTP_HANDLER_ALLOWLIST names too take effect. */
function HttpAllowlistCard() {
  const { can } = useSession();
  const projectId = useProjectId();
  const isAdmin = can("admin");
  const current = useLive(
    ["project", projectId],
    () => unwrap(api.GET("/api/v1/projects/{project_id}", { params: { path: { project_id: projectId } } })),
    { enabled: isAdmin, interval: 30_000 },
  );
  const [hosts, setHosts] = useState<string | null>(null);
  const shown = hosts ?? current.data?.http_allowlist.join(", ") ?? "";
  const save = useAction(
    () =>
      unwrap(
        api.PATCH("/api/v1/projects/{project_id}", {
          params: { path: { project_id: projectId } },
          body: {
            http_allowlist: shown
              .split(/[\s,]+/)
              .map((h) => h.trim().toLowerCase())
              .filter(Boolean),
          },
        }),
      ),
    [["project", projectId]],
    () => setHosts(null),
  );
  if (!isAdmin) return null;
  const err = save.error instanceof ApiError ? save.error : null;
  return (
    <Card title="Internal hosts for http_request" testId="settings-http-allowlist">
      <p className="mb-3 text-sm text-slate-600">
        Jobs of this project may call these hosts although they resolve to private addresses; only hosts the
        deployment&apos;s <code className="text-xs">HTTP_HANDLER_ALLOWLIST</code> names too take effect. Empty: public
        hosts only.
      </p>
      <form
        className="grid gap-3 sm:grid-cols-[1fr_auto] sm:items-start"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          save.mutate(undefined);
        }}
      >
        <Field
          label="Hosts (comma-separated)"
          name="http-allowlist"
          error={err ? (err.fieldMessage("http_allowlist") ?? err.message) : null}
        >
          {({ id, invalid }) => (
            <Input
              id={id}
              invalid={invalid}
              value={shown}
              placeholder="hooks.internal, 10.0.0.5"
              onChange={(e) => setHosts(e.target.value)}
            />
          )}
        </Field>
        <Button type="submit" variant="primary" className="sm:mt-5" busy={save.isPending}>
          Save hosts
        </Button>
      </form>
      {save.isSuccess && hosts === null && (
        <p className="mt-2 text-sm text-emerald-700" data-testid="http-allowlist-saved">
          Saved.
        </p>
      )}
    </Card>
  );
}

const keyCol = createColumnHelper<ApiKeyPublic>();

function ApiKeysCard() {
  const projectId = useProjectId();
  const { can } = useSession();
  const path = { project_id: projectId };
  const keys = useLive(
    ["api-keys", projectId],
    () => unwrap(api.GET("/api/v1/projects/{project_id}/api-keys", { params: { path } })),
    { enabled: can("admin") },
  );
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("member");
  const [secret, setSecret] = useState<string | null>(null);
  const create = useAction(
    () => unwrap(api.POST("/api/v1/projects/{project_id}/api-keys", { params: { path }, body: { name, role } })),
    [["api-keys", projectId]],
    (created) => {
      setSecret(created.key);
      setName("");
    },
  );
  const revoke = useAction(
    (k: ApiKeyPublic) =>
      unwrap(
        api.DELETE("/api/v1/projects/{project_id}/api-keys/{key_id}", { params: { path: { ...path, key_id: k.id } } }),
      ),
    [["api-keys", projectId]],
  );
  if (!can("admin")) {
    return (
      <Card title="API keys" testId="settings-api-keys">
        <p className="text-sm text-slate-500">Only admins and owners manage API keys.</p>
      </Card>
    );
  }
  const err = create.error instanceof ApiError ? create.error : null;
  const columns = [
    keyCol.accessor("name", {
      header: "Name",
      cell: (c) => <span className="font-medium text-slate-900">{c.getValue()}</span>,
    }),
    keyCol.accessor("prefix", { header: "Key", cell: (c) => <code className="text-xs">{c.getValue()}…</code> }),
    keyCol.accessor("role", { header: "Role", cell: (c) => <Badge>{c.getValue()}</Badge> }),
    keyCol.accessor("created_by", {
      header: "Created by",
      meta: { hideOnMobile: true },
      cell: (c) => <span className="text-xs">{c.getValue()?.email ?? "a former member"}</span>,
    }),
    keyCol.accessor("expires_at", {
      header: "Expires",
      meta: { hideOnMobile: true },
      cell: (c) => (
        <span title={formatDateTime(c.getValue())}>{c.getValue() ? formatRelative(c.getValue()) : "never"}</span>
      ),
    }),
    keyCol.accessor("last_used_at", {
      header: "Last used",
      meta: { hideOnMobile: true },
      cell: (c) => (
        <span title={formatDateTime(c.getValue())}>{c.getValue() ? formatRelative(c.getValue()) : "never"}</span>
      ),
    }),
    keyCol.accessor("revoked_at", {
      header: "",
      cell: (c) =>
        c.getValue() ? (
          <div className="text-right">
            <Badge tone="red">revoked</Badge>
          </div>
        ) : (
          <div className="text-right">
            <Button
              size="sm"
              variant="danger"
              onClick={() =>
                window.confirm(`Revoke "${c.row.original.name}"? Clients using it stop working.`) &&
                revoke.mutate(c.row.original)
              }
            >
              Revoke
            </Button>
          </div>
        ),
    }),
  ];
  return (
    <Card title="API keys" padded={false} testId="settings-api-keys">
      {secret && (
        <div className="m-4 rounded-md bg-amber-50 p-3 text-sm ring-1 ring-amber-200" data-testid="api-key-secret">
          <div className="font-medium text-amber-900">Copy this key now — it is shown only once.</div>
          <code className="mt-1 block break-all text-xs text-slate-900 select-all">{secret}</code>
          <Button size="sm" className="mt-2" onClick={() => setSecret(null)}>
            I have saved it
          </Button>
        </div>
      )}
      <InlineError error={revoke.error} />
      <DataTable
        columns={columns}
        data={keys.data?.items}
        getRowId={(k) => k.id}
        loading={keys.isLoading}
        error={keys.error}
        empty={
          <EmptyState title="No API keys" hint="A key lets a program enqueue into this project with a fixed role." />
        }
      />
      <form
        className="grid gap-3 border-t border-slate-100 p-4 sm:grid-cols-[1fr_10rem_auto] sm:items-start"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          create.mutate(undefined);
        }}
      >
        <Field label="New key name" name="key-name" error={err?.fieldMessage("name")}>
          {({ id, invalid }) => (
            <Input id={id} invalid={invalid} required value={name} onChange={(e) => setName(e.target.value)} />
          )}
        </Field>
        <Field label="Role" name="key-role" error={err?.fieldMessage("role")}>
          {({ id }) => (
            <Select id={id} value={role} onChange={(e) => setRole(e.target.value as Role)}>
              {ROLES.filter((r) => r !== "owner").map((r) => (
                <option key={r}>{r}</option>
              ))}
            </Select>
          )}
        </Field>
        <Button type="submit" variant="primary" className="sm:mt-5" busy={create.isPending}>
          Create key
        </Button>
      </form>
    </Card>
  );
}

const memberCol = createColumnHelper<MemberPublic>();

function MembersCard() {
  const { can, me } = useSession();
  const members = useLive(["members"], () => unwrap(api.GET("/api/v1/org/members")), { interval: 10_000 });
  const change = useAction(
    ({ m, role: next }: { m: MemberPublic; role: Role }) =>
      unwrap(
        api.PATCH("/api/v1/org/members/{user_id}", { params: { path: { user_id: m.user_id } }, body: { role: next } }),
      ),
    [["members"]],
  );
  const remove = useAction(
    (m: MemberPublic) =>
      unwrap(api.DELETE("/api/v1/org/members/{user_id}", { params: { path: { user_id: m.user_id } } })),
    [["members"]],
  );
  const isOwner = can("owner");
  const columns = [
    memberCol.accessor("email", {
      header: "Member",
      cell: (c) => (
        <div>
          <div className="font-medium text-slate-900">{c.row.original.name ?? c.getValue()}</div>
          <div className="text-xs text-slate-500">{c.getValue()}</div>
        </div>
      ),
    }),
    memberCol.accessor("role", {
      header: "Role",
      cell: (c) =>
        isOwner && c.row.original.user_id !== me.user.id ? (
          <Select
            aria-label="Role"
            className="max-w-36"
            value={c.getValue()}
            onChange={(e) => change.mutate({ m: c.row.original, role: e.target.value as Role })}
          >
            {ROLES.map((r) => (
              <option key={r}>{r}</option>
            ))}
          </Select>
        ) : (
          <Badge tone={c.getValue() === "owner" ? "indigo" : "gray"}>{c.getValue()}</Badge>
        ),
    }),
    memberCol.accessor("joined_at", {
      header: "Joined",
      meta: { hideOnMobile: true },
      cell: (c) => <span title={formatDateTime(c.getValue())}>{formatRelative(c.getValue())}</span>,
    }),
    memberCol.display({
      id: "remove",
      header: "",
      cell: (c) =>
        isOwner &&
        c.row.original.user_id !== me.user.id && (
          <div className="text-right">
            <Button
              size="sm"
              variant="ghost"
              className="text-rose-600"
              onClick={() => window.confirm(`Remove ${c.row.original.email}?`) && remove.mutate(c.row.original)}
            >
              Remove
            </Button>
          </div>
        ),
    }),
  ];
  return (
    <Card title="Members and roles" padded={false} testId="settings-members">
      <InlineError error={change.error ?? remove.error} />
      <DataTable
        columns={columns}
        data={members.data?.items}
        getRowId={(m) => m.user_id}
        loading={members.isLoading}
        error={members.error}
        empty={<EmptyState title="No members" />}
      />
      <div className="border-t border-slate-100 px-4 py-3 text-xs text-slate-500">
        viewer: reads everything · member: + enqueue, cancel, retry, replay · admin: + queues, schedules, keys, projects
        · owner: + members and roles
      </div>
    </Card>
  );
}

const inviteCol = createColumnHelper<InvitationPublic>();

/** Owners invite by email: a single-use link that expires is mailed; the person joins only by
 * accepting it signed in with that (confirmed) address. Open invitations can be revoked. */
function InvitationsCard() {
  const { can } = useSession();
  const isOwner = can("owner");
  const invitations = useLive(["invitations"], () => unwrap(api.GET("/api/v1/org/invitations")), {
    enabled: isOwner,
    interval: 10_000,
  });
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>("member");
  const invite = useAction(
    () => unwrap(api.POST("/api/v1/org/invitations", { body: { email, role } })),
    [["invitations"]],
    () => setEmail(""),
  );
  const revoke = useAction(
    (i: InvitationPublic) =>
      unwrap(api.DELETE("/api/v1/org/invitations/{invitation_id}", { params: { path: { invitation_id: i.id } } })),
    [["invitations"]],
  );
  if (!isOwner) return null;
  const err = invite.error instanceof ApiError ? invite.error : null;
  const columns = [
    inviteCol.accessor("email", {
      header: "Invited",
      cell: (c) => <span className="font-medium text-slate-900">{c.getValue()}</span>,
    }),
    inviteCol.accessor("role", { header: "Role", cell: (c) => <Badge>{c.getValue()}</Badge> }),
    inviteCol.accessor("expires_at", {
      header: "Link expires",
      meta: { hideOnMobile: true },
      cell: (c) => <span title={formatDateTime(c.getValue())}>{formatRelative(c.getValue())}</span>,
    }),
    inviteCol.display({
      id: "revoke",
      header: "",
      cell: (c) => (
        <div className="text-right">
          <Button
            size="sm"
            variant="ghost"
            className="text-rose-600"
            onClick={() =>
              window.confirm(`Revoke the invitation of ${c.row.original.email}?`) && revoke.mutate(c.row.original)
            }
          >
            Revoke
          </Button>
        </div>
      ),
    }),
  ];
  return (
    <Card title="Invitations" padded={false} testId="settings-invitations">
      <InlineError error={revoke.error} />
      <DataTable
        columns={columns}
        data={invitations.data?.items}
        getRowId={(i) => i.id}
        loading={invitations.isLoading}
        error={invitations.error}
        empty={<EmptyState title="No open invitations" hint="Invite someone by email below." />}
      />
      <form
        className="grid gap-3 border-t border-slate-100 p-4 sm:grid-cols-[1fr_10rem_auto] sm:items-start"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          invite.mutate(undefined);
        }}
      >
        <Field
          label="Invite by email"
          name="invite-email"
          error={err?.fieldMessage("email") ?? (err && !err.fieldMessage("role") ? err.message : null)}
        >
          {({ id, invalid }) => (
            <Input
              id={id}
              invalid={invalid}
              type="email"
              required
              value={email}
              onChange={(e) => setEmail(e.target.value)}
            />
          )}
        </Field>
        <Field label="Role" name="invite-role">
          {({ id }) => (
            <Select id={id} value={role} onChange={(e) => setRole(e.target.value as Role)}>
              {ROLES.map((r) => (
                <option key={r}>{r}</option>
              ))}
            </Select>
          )}
        </Field>
        <Button type="submit" variant="primary" className="sm:mt-5" busy={invite.isPending}>
          Send invitation
        </Button>
      </form>
    </Card>
  );
}

/** The signed-in person's own sessions: a new password (every session ends, this one starts
 * again) and "sign out everywhere". */
function SecurityCard() {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [changed, setChanged] = useState(false);
  const change = useAction(
    () => unwrap(api.POST("/api/v1/auth/password", { body: { current_password: current, new_password: next } })),
    [],
    (tokens) => {
      setSession(tokens);
      setCurrent("");
      setNext("");
      setChanged(true);
    },
  );
  const everywhere = useAction(
    () => unwrap(api.POST("/api/v1/auth/logout-all")),
    [],
    () => sessionExpired(),
  );
  const err = change.error instanceof ApiError ? change.error : null;
  return (
    <Card title="Your sessions" testId="settings-security">
      <form
        className="grid gap-3 sm:grid-cols-[1fr_1fr_auto] sm:items-start"
        onSubmit={(e: FormEvent) => {
          e.preventDefault();
          setChanged(false);
          change.mutate(undefined);
        }}
      >
        <Field
          label="Current password"
          name="current-password"
          error={err && !err.fieldMessage("new_password") ? err.message : null}
        >
          {({ id, invalid }) => (
            <Input
              id={id}
              invalid={invalid}
              type="password"
              autoComplete="current-password"
              required
              value={current}
              onChange={(e) => setCurrent(e.target.value)}
            />
          )}
        </Field>
        <Field
          label="New password (12 characters or more)"
          name="new-password"
          error={err?.fieldMessage("new_password")}
        >
          {({ id, invalid }) => (
            <Input
              id={id}
              invalid={invalid}
              type="password"
              autoComplete="new-password"
              required
              minLength={12}
              value={next}
              onChange={(e) => setNext(e.target.value)}
            />
          )}
        </Field>
        <Button type="submit" variant="primary" className="sm:mt-5" busy={change.isPending}>
          Change password
        </Button>
      </form>
      {changed && (
        <p className="mt-2 text-sm text-emerald-700" data-testid="password-changed">
          Password changed. Every other session is signed out.
        </p>
      )}
      <div className="mt-4 flex flex-wrap items-center gap-3 border-t border-slate-100 pt-4 text-sm text-slate-600">
        <span>Signed in on another device you no longer trust?</span>
        <Button
          variant="danger"
          size="sm"
          busy={everywhere.isPending}
          onClick={() => window.confirm("Sign out every session, this one included?") && everywhere.mutate(undefined)}
          data-testid="logout-everywhere"
        >
          Sign out everywhere
        </Button>
      </div>
    </Card>
  );
}
