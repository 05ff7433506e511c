import { useQueryClient } from "@tanstack/react-query";
import { useNavigate } from "@tanstack/react-router";
import { useState } from "react";

import { api, unwrap } from "../api/client";
import { setSession } from "../api/session";
import { useSession } from "../lib/session";
import { Button } from "../ui/Button";
import { Card } from "../ui/Card";
import { PageHeader } from "../ui/PageHeader";
import { InlineError } from "../ui/States";

/** The invitation link: the signed-in invitee accepts it explicitly (nothing happens by just
 * opening it), then the dashboard switches to the organisation they joined. */
export function AcceptInvitationPage({ token }: { token?: string }) {
  const { me } = useSession();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function accept() {
    if (!token) return;
    setBusy(true);
    setError(null);
    try {
      const joined = await unwrap(api.POST("/api/v1/auth/invitations/accept", { body: { token } }));
      const tokens = await unwrap(api.POST("/api/v1/auth/switch-org", { body: { org_id: joined.org.id } }));
      setSession(tokens);
      // Everything on screen belonged to the previous organisation: refetch it all (the
      // session context's /auth/me included) for the one just joined.
      await queryClient.resetQueries();
      await navigate({ to: "/" });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="space-y-6" data-testid="page-accept-invitation">
      <PageHeader title="Invitation" description="Join another organisation with this account." />
      <Card title="Accept the invitation">
        <div className="space-y-3 text-sm text-slate-700">
          {token ? (
            <p>
              You are signed in as <strong>{me.user.email}</strong>. The invitation must have been sent to this address.
            </p>
          ) : (
            <p>This link has no token: open the link from the mail as it is.</p>
          )}
          <InlineError error={error} />
          <Button
            variant="primary"
            onClick={() => void accept()}
            busy={busy}
            disabled={!token}
            data-testid="accept-invitation"
          >
            Accept and open the organisation
          </Button>
        </div>
      </Card>
    </div>
  );
}
