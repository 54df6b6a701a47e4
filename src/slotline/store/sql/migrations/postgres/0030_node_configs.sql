-- What each node published of the configuration it serves (issue 27), so that a client
-- anywhere on the store builds the tasks of its agent types as the node would: its agent
-- types (a JSON object {name: type}, as slotline.yaml gives them: environment variable
-- names, never values), the settings it applied (a JSON object, without the store URL,
-- webhooks or hooks) and the file it read (NULL: none, the defaults). Read only while its
-- node is live (heartbeats); each start replaces it.
CREATE TABLE node_configs (
    node_id TEXT PRIMARY KEY,
    source TEXT,
    agents TEXT NOT NULL,
    settings TEXT NOT NULL,
    published_at DOUBLE PRECISION NOT NULL
);
