"""The security findings' tests (issue 13) use the API's fixtures: the app over this test's
database, an in-process client, signed-in people, the SMTP sink."""

from tests.api.conftest import (  # noqa: F401 - fixtures, found by pytest by name
    api_db,
    api_settings,
    app,
    client,
    mailbox,
    make_api_key,
    make_org_user,
    outsider,
    owner,
    shared_app,
)
