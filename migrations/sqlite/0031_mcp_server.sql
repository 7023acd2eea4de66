-- Tool calls made by an MCP client (`hearth mcp serve`, `/mcp`) name the client, as its
-- clientInfo or token calls it; NULL for calls a chat turn made. `hearth usage` counts them.
ALTER TABLE tool_audit ADD COLUMN client TEXT;
