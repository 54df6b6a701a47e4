"""The MCP tools: the queue's verbs for a supervising agent."""
