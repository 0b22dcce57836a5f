"""The runtime's service layer: what ``pmw serve`` exposes beside the World (governance calls, the HTTP API)."""
