//! reef-mcp: MCP client and server.
