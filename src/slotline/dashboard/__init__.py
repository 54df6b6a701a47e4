"""The dashboard's static files (HTML, ES modules, CSS, vendored libraries), served by
`slotline.server.dashboard`; no Python here."""
