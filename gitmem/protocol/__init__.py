"""Wire protocols: a JSON-RPC 2.0 line loop and nui's storage-handler list; no storage."""
