"""The Python API: `Queue`, `SyncQueue`, `App` and the landing verbs over a store."""
