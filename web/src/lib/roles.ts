// The org roles in order; the dashboard hides what the caller's role may not do (the API
// refuses it anyway — hiding is for clarity, not security).
export type Role = "owner" | "admin" | "member" | "viewer";

const rank: Record<Role, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

export function roleAtLeast(role: string | null | undefined, min: Role): boolean {
  if (!role || !(role in rank)) return false;
  return rank[role as Role] >= rank[min];
}

export const ROLES: Role[] = ["owner", "admin", "member", "viewer"];
