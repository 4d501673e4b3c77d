"""Host adapters: turn one host's hook payloads into journal events, commits and handoffs."""
